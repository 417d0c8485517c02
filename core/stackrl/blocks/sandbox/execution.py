"""One sandboxed run: a program in a fresh folder, as one process group under resource limits, always reaped.

A run writes the program (and any ``files``) into a new temporary folder, starts the interpreter there in a new
session (its own process group) with a scrubbed environment, through the :mod:`isolation
<stackrl.blocks.sandbox.isolation>` wrapper, and feeds it ``stdin``. It ends when the process exits, the wall-clock
limit passes, or the output passes its size; in every case the whole process group is killed and the process
reaped before the result is returned, and the folder is removed.
"""

from __future__ import annotations

import math
import os
import re
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from stackrl.blocks.sandbox.isolation import PATH, Isolation

BOOTSTRAP = (Path(__file__).parent / "bootstrap.py").read_text()
PROGRAM = "main.py"
STOPS = ("exited", "timeout", "cpu_limit", "memory_limit", "output_limit", "signal")


@dataclass(frozen=True)
class Limits:
    """The limits of one run (``sandbox`` section's keys of the same names)."""

    timeout_s: float
    cpu_s: float
    memory_mb: int
    max_processes: int
    max_open_files: int
    max_file_mb: int
    max_output_bytes: int


@dataclass(frozen=True)
class ExecResult:
    """What a run did. Everything but ``wall_s`` and ``cpu_s`` is the same on every run of a deterministic program.

    ``stopped`` says why it ended: ``exited`` (on its own, with ``exit_code``), ``timeout`` (wall clock),
    ``cpu_limit``, ``memory_limit`` (it raised ``MemoryError``), ``output_limit`` (stdout or stderr passed
    ``max_output_bytes``; what came before is kept) or ``signal`` (killed by ``signal``). ``completed`` is true only
    when the program's code ran to its end: no uncaught exception and no exit call (``sys.exit`` or ``os._exit``,
    whatever status it gives), the condition a test's assertions passing needs. ``cpu_s`` is the program's CPU time
    (with its reaped children) as it reported it on ending by itself; for a run killed, only what the kernel
    accounted to the processes reaped, which under bubblewrap leaves the program out. ``isolated`` is false for a
    run on the host (``sandbox.allow_unisolated``). Under bubblewrap an exit status above 128 reads as a signal.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    signal: int | None
    stopped: str
    completed: bool
    wall_s: float
    cpu_s: float
    isolated: bool

    @property
    def ok(self) -> bool:
        """It ran to its end and exited with status 0."""
        return self.completed and self.stopped == "exited" and self.exit_code == 0


def execute(
    isolation: Isolation,
    limits: Limits,
    program: str,
    *,
    stdin: str | bytes = b"",
    files: dict[str, str | bytes] | None = None,
    argv: tuple[str, ...] = (),
    interpreter: list[str],
) -> ExecResult:
    """Run the Python ``program`` once with the ``interpreter`` command (see the module's docstring)."""
    with launched(isolation, limits, program, files=files, argv=argv, interpreter=interpreter) as run:
        stdin = stdin.encode() if isinstance(stdin, str) else stdin
        out, err, ending = _exchange(run.process, stdin, run.started + limits.timeout_s, limits.max_output_bytes)
        return run.result(out, err, ending)


@dataclass
class Launch:
    """A started run: its process (stdin, stdout and stderr are pipes), the bootstrap's report pipe and the time it
    started. ``reap`` kills what is left of its group and reaps it, once."""

    process: subprocess.Popen
    report: int
    started: float
    isolated: bool
    status: int | None = None
    usage: object = None

    def reap(self) -> None:
        if self.status is not None:
            return
        _kill_group(self.process.pid)
        _, self.status, self.usage = os.wait4(self.process.pid, 0)
        self.process.returncode = self.status  # reaped here: Popen must not wait on it again
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()

    def result(self, out: bytes, err: bytes, ending: str | None) -> ExecResult:
        """The run's result once its output is read: ``ending`` is why the parent stopped it (``None``: it ended
        on its own)."""
        self.reap()
        wall = time.monotonic() - self.started
        completed, reported_cpu = _report(self.report)
        exit_code, killed_by = _decode(self.status, self.isolated)
        cpu = self.usage.ru_utime + self.usage.ru_stime if reported_cpu is None else reported_cpu
        stderr = err.decode("utf-8", "replace")
        if ending is None:
            if killed_by == signal.SIGXCPU:
                ending = "cpu_limit"
            elif killed_by is not None:
                ending = "signal"
            elif exit_code and stderr.rstrip().rsplit("\n", 1)[-1].startswith("MemoryError"):
                ending = "memory_limit"
            else:
                ending = "exited"
        return ExecResult(
            stdout=out.decode("utf-8", "replace"), stderr=stderr, exit_code=exit_code, signal=killed_by,
            stopped=ending, completed=completed and ending == "exited", wall_s=wall, cpu_s=cpu, isolated=self.isolated,
        )


@contextmanager
def launched(
    isolation: Isolation,
    limits: Limits,
    program: str,
    *,
    files: dict[str, str | bytes] | None = None,
    argv: tuple[str, ...] = (),
    interpreter: list[str],
    stderr: int = subprocess.PIPE,
) -> Iterator[Launch]:
    """Start ``program`` in a fresh folder with ``files``, under the bootstrap's limits; on leaving, whatever
    happened, its process group is killed, its process reaped and its folder removed."""
    folder = os.path.realpath(tempfile.mkdtemp(prefix="stackrl-sandbox-"))
    report, handed = os.pipe()
    run = None
    try:
        _write_files(folder, {**(files or {}), PROGRAM: program}, isolation.user.uid)
        workdir = isolation.workdir(folder)
        command = [*interpreter, "-c", BOOTSTRAP, _rlimits(limits, isolation), str(handed),
                   f"{workdir}/{PROGRAM}", *argv]
        env = {"PATH": PATH, "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
        started = time.monotonic()
        process = subprocess.Popen(
            isolation.command(folder, command, env), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            cwd=folder, env=env, start_new_session=True, pass_fds=(handed,),
        )
        run = Launch(process, report, started, isolation.isolated)
        os.close(handed)
        handed = -1
        yield run
    finally:
        if run is not None:
            run.reap()
        for fd in (report, handed):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)


def _write_files(folder: str, files: dict[str, str | bytes], uid: int | None) -> None:
    """Write the run's files; a name that would leave the folder is refused."""
    for name, content in files.items():
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts or not path.parts:
            raise ValueError(f"sandbox file '{name}': names are relative paths inside the run's folder")
        target = Path(folder, *path.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
    if uid is not None:  # the trainer is root: the folder belongs to the user the program runs as
        for root, dirs, names in os.walk(folder):
            for name in [root, *(os.path.join(root, n) for n in dirs + names)]:
                os.chown(name, uid, uid)


def _rlimits(limits: Limits, isolation: Isolation) -> str:
    """The bootstrap's ``LIMITS`` argument."""
    cpu = math.ceil(limits.cpu_s)
    megabyte = 1 << 20
    pairs = {
        "CPU": (cpu, cpu + 1),  # SIGXCPU at the limit, SIGKILL a second later
        "AS": (limits.memory_mb * megabyte,) * 2,
        "FSIZE": (limits.max_file_mb * megabyte,) * 2,
        "NOFILE": (limits.max_open_files,) * 2,
        "CORE": (0, 0),
        "NPROC": (_process_limit(limits.max_processes, isolation),) * 2,
    }
    return ",".join(f"{name}={soft}:{hard}" for name, (soft, hard) in pairs.items())


def _process_limit(max_processes: int, isolation: Isolation) -> int:
    """The kernel counts ``RLIMIT_NPROC`` per user and per user namespace: under isolation the run has a namespace
    of its own, so the limit is the run's; on the host, the user's processes already running count too (those of
    the sandbox's user, or of the trainer's when it is not root)."""
    if isolation.isolated:
        return max_processes
    return max_processes + _tasks_of(isolation.user.owner)


def _tasks_of(uid: int) -> int:
    """The threads of all processes of user ``uid`` now (what ``RLIMIT_NPROC`` counts)."""
    count = 0
    for _, status in proc_files("status"):
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields["Uid"].split()[0]) == uid:
            count += int(fields["Threads"])
    return count


def proc_files(name: str) -> Iterator[tuple[int, str]]:
    """``(pid, text of /proc/<pid>/<name>)`` for each process now (those gone while read left out)."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                yield int(entry.name), Path(entry.path, name).read_text(errors="replace")
            except OSError:
                continue


def _exchange(process: subprocess.Popen, stdin: bytes, deadline: float, limit: int) -> tuple[bytes, bytes, str | None]:
    """Feed ``stdin`` and collect stdout and stderr until the process exits and its pipes close. The whole group is
    killed at the deadline, when an output passes ``limit``, and as soon as the process exits (whatever it left
    running). Returns the outputs and ``timeout``, ``output_limit`` or ``None`` (the process exited)."""
    selector = selectors.DefaultSelector()
    exit_fd = os.pidfd_open(process.pid)
    selector.register(exit_fd, selectors.EVENT_READ)
    stdout, stderr, feed = process.stdout.fileno(), process.stderr.fileno(), process.stdin.fileno()
    outputs = {stdout: bytearray(), stderr: bytearray()}
    for fd in outputs:
        selector.register(fd, selectors.EVENT_READ)
    pending = memoryview(stdin)
    if pending:
        os.set_blocking(feed, False)
        selector.register(feed, selectors.EVENT_WRITE)
    else:
        process.stdin.close()
    ending, exited = None, False
    try:
        while selector.get_map() and ending is None:
            left = deadline - time.monotonic()
            if left <= 0:
                ending = None if exited else "timeout"
                break
            for key, _ in selector.select(left):
                if key.fd == exit_fd:
                    exited = True
                    selector.unregister(exit_fd)
                    _kill_group(process.pid)
                elif key.fd == feed:
                    try:
                        pending = pending[os.write(feed, pending[:65536]):]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # the program stopped reading: the rest of stdin is not for it
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(feed)
                        process.stdin.close()
                else:
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fd)
                        continue
                    kept = outputs[key.fd]
                    room = limit - len(kept)
                    kept += chunk[:room]
                    if len(chunk) > room:
                        ending = "output_limit"
    finally:
        _kill_group(process.pid)
        selector.close()
        os.close(exit_fd)
    return bytes(outputs[stdout]), bytes(outputs[stderr]), ending


def _kill_group(leader: int) -> None:
    """SIGKILL every process of the run's group. The leader is not reaped yet, so the group id is still the run's."""
    try:
        os.killpg(leader, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _report(marker: int) -> tuple[bool, float | None]:
    """What the bootstrap reported: whether the program's code ran to its end, and its CPU time (``None`` when it
    reported nothing: killed, or ended by ``os._exit``)."""
    os.set_blocking(marker, False)
    try:
        line = os.read(marker, 64).decode("ascii", "replace").split()
    except BlockingIOError:
        return False, None
    try:
        return line[0] == "1", float(line[1])
    except (IndexError, ValueError):
        return False, None


def _decode(status: int, isolated: bool) -> tuple[int | None, int | None]:
    """``(exit code, signal)`` of a wait status. bubblewrap exits with 128 + the signal that killed its program."""
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    code = os.WEXITSTATUS(status)
    if isolated and code > 128:
        return None, code - 128
    return code, None


FENCE = re.compile(r"```[\w+-]*\r?\n?(.*?)```", re.DOTALL)


def program_of(completion: str) -> str:
    """The program a completion holds: its last fenced code block (how the papers' code reads a reply), else the
    whole completion (the built-in code model writes a bare program)."""
    blocks = FENCE.findall(completion)
    return blocks[-1].strip() if blocks else completion
