"""The sandbox block's runs, pool, tests, sessions and config, on a real bubblewrap sandbox; and a reward stage
that runs programs through the real trainer."""

import dataclasses
import time
from pathlib import Path

import pytest

from stackrl.blocks.sandbox import IOCase, Sandbox, Session, passed_share, pool, program_of, run_tests
from stackrl.errors import ConfigError
from stackrl.sandbox_section import SandboxSection
from stackrl.testing.fixtures import train_steps
from stackrl.testing.repository import load_script

SETTINGS = SandboxSection(timeout_s=20, cpu_s=10, workers=2, max_output_bytes=1000)


@pytest.fixture(scope="module")
def sandbox():
    return pool.shared(SETTINGS)


def test_a_run_returns_its_output_status_and_why_it_stopped(sandbox):
    result = sandbox.run("import sys\nname = input()\nprint('hello', name)\nsys.exit(3)", stdin="ada\n")
    assert (result.stdout, result.exit_code, result.stopped, result.completed, result.ok) == (
        "hello ada\n", 3, "exited", False, False)
    files = {"data/numbers.txt": "1 2 3", "blob.bin": b"\x00\x01"}
    result = sandbox.run("print(sum(map(int, open('data/numbers.txt').read().split())), len(open('blob.bin', 'rb').read()))",
                         files=files)
    assert result.ok and result.stdout == "6 2\n" and result.isolated
    with pytest.raises(ValueError, match="'../escape.py'"):
        sandbox.run("pass", files={"../escape.py": ""})


def test_results_are_deterministic_for_a_deterministic_program(sandbox):
    """Set order (hash seed), working folder and traceback paths are the same in every run."""
    program = "import os\nprint({'alpha', 'beta', 'gamma', 'delta'}, hash('x'), os.getcwd())\nraise ValueError('end')"
    first, second = sandbox.run(program), sandbox.run(program)
    untimed = lambda result: dataclasses.replace(result, wall_s=0.0, cpu_s=0.0)  # noqa: E731
    assert untimed(first) == untimed(second)
    assert 'File "/tmp/sandbox/main.py", line 3' in first.stderr and first.stopped == "exited"


def test_a_stuck_program_costs_at_most_its_timeout(sandbox):
    """Asleep with its outputs closed, or ignoring SIGTERM: each run ends at its timeout."""
    stuck = [
        "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(600)",
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)",
    ]
    started = time.monotonic()
    results = sandbox.run_many(stuck, timeout_s=1.0)
    assert [result.stopped for result in results] == ["timeout", "timeout"]
    assert all(result.wall_s < 1.0 + 1.0 for result in results)
    assert time.monotonic() - started < 1.0 + 2.0  # the two ran side by side


def test_output_past_its_size_stops_the_run_and_is_cut(sandbox):
    result = sandbox.run("while True:\n    print('x' * 99)")
    assert result.stopped == "output_limit" and len(result.stdout) == SETTINGS.max_output_bytes
    assert sandbox.run("print('x' * 998)").stopped == "exited"  # 999 bytes: within the size


def test_cpu_time_is_the_programs_own(sandbox):
    """What a method like Venus ranks programs by: the busy program's CPU time, not the wrapper's."""
    busy = sandbox.run("import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end:\n    pass")
    idle = sandbox.run("pass")
    assert busy.ok and busy.cpu_s >= 0.3 and idle.cpu_s < 0.3


def test_the_pool_runs_at_most_its_workers_at_once_and_keeps_the_order():
    """Four half-second sleeps on two workers take two rounds; the results come in the programs' order."""
    two = pool.shared(dataclasses.replace(SETTINGS, workers=2))
    started = time.monotonic()
    results = two.run_many([f"import time\ntime.sleep(0.5)\nprint({i})" for i in range(4)])
    assert time.monotonic() - started >= 1.0
    assert [result.stdout for result in results] == ["0\n", "1\n", "2\n", "3\n"]
    with pytest.raises(ValueError, match="2 programs but 1 stdins"):
        two.run_many(["pass", "pass"], ["x"])


PROGRAM = "def add(a, b):\n    return a + b\n"


def test_a_test_passes_only_when_its_code_ran_to_its_end(sandbox):
    """Exit status 0 is never a pass by itself: an exit call before the assertions passes nothing."""
    tests = [
        "assert add(2, 3) == 5",
        "assert add(2, 3) == 6",
        "import sys; sys.exit(0)\nassert add(2, 3) == 6",
        "import os; os._exit(0)\nassert add(2, 3) == 6",
        "while True:\n    pass",
        "assert undefined_name",
    ]
    results = run_tests(sandbox, PROGRAM, tests, timeout_s=1.0)
    assert [(r.passed, r.reason, r.error) for r in results] == [
        (True, "passed", None),
        (False, "failed", "AssertionError"),
        (False, "exited_early", None),
        (False, "exited_early", None),
        (False, "timeout", None),
        (False, "failed", "NameError"),
    ]
    assert passed_share(results) == pytest.approx(1 / 6)
    assert [result.result.exit_code for result in results[2:4]] == [0, 0]  # what "exit code 0 = pass" would count


def test_input_output_tests_compare_what_the_program_prints(sandbox):
    program = "n = int(input())\nprint(n * 2)   \n"
    results = run_tests(sandbox, program, [IOCase("3\n", "6\n\n"), IOCase("4", "9"), IOCase("x", "")])
    assert [r.reason for r in results] == ["passed", "wrong_output", "failed"]
    with pytest.raises(TypeError, match="assertion code"):
        run_tests(sandbox, program, [42])


def test_a_session_keeps_its_state_across_turns(sandbox):
    with Session(sandbox, timeout_s=1.0) as session:
        assert session.execute("x = 6").stdout == ""
        assert session.execute("print('x is', x)\nx * 7").stdout == "x is 6\n42\n"
        failed = session.execute("import sys; sys.exit(2)")
        assert failed.error == "SystemExit" and failed.stopped == "exited"
        assert session.execute("x").stdout == "6\n"  # the exit call ended the cell, not the session
        assert session.execute("while True:\n    pass").stopped == "timeout"
        fresh = session.execute("'x' in globals()")
        assert fresh.restarted and fresh.stdout == "False\n"
        broken = session.execute("import os; os.write(1, b'garbage\\n')")
        assert broken.stopped == "broken"  # a cell that writes past the server ends the session
        assert session.execute("1 + 1").stdout == "2\n"


def test_config_errors_name_the_sandbox_key(make_config):
    with pytest.raises(ConfigError, match=r"sandbox\.workers must be positive, not 0"):
        make_config(sandbox={"workers": 0})
    with pytest.raises(ConfigError, match=r"sandbox\.isolation must be one of auto, bwrap, unshare, none, not 'docker'"):
        make_config(sandbox={"isolation": "docker"})
    with pytest.raises(ConfigError, match=r"unknown key 'sandbox\.timout_s'.*timeout_s"):
        make_config(sandbox={"timout_s": 1})
    with pytest.raises(ConfigError, match=r"sandbox\.uid must be a user other than root"):
        make_config(sandbox={"uid": 0})


def test_a_reward_stage_runs_programs_with_the_runs_sandbox(make_config):
    config = make_config(["sandbox_reward"], sandbox={"timeout_s": 7.5, "workers": 2})
    trainer = train_steps(config, steps=1)
    plugin = trainer.plugins.plugins["sandbox_reward"]
    assert plugin.settings[0].timeout_s == 7.5 and plugin.settings[0].workers == 2
    results = plugin.results[0]
    assert results and all(result.ok and result.isolated for result in results)
    assert trainer.state.log_history[0]["rewards/sandbox_reward/mean"] == 1.0


def test_a_plugin_that_runs_programs_refuses_a_run_without_isolation_before_anything_loads(make_config):
    from stackrl.run import validate

    unavailable = {"isolation": "bwrap", "bwrap": "/nonexistent/bwrap"}
    with pytest.raises(ConfigError, match=r"sandbox\.isolation: no isolation"):
        validate(make_config(["sandbox_reward"], sandbox=unavailable))
    validate(make_config(["digit_reward"], sandbox=unavailable))  # no plugin runs programs


def test_a_context_built_outside_a_run_gets_the_default_sandbox():
    assert Sandbox.of(object()).settings == SandboxSection()


def test_a_stuck_program_does_not_hang_the_reward_stage(make_config):
    config = make_config(["sandbox_reward"], sandbox={"timeout_s": 0.5}, sandbox_reward={"program": "while True: pass"})
    trainer = train_steps(config, steps=1)
    results = trainer.plugins.plugins["sandbox_reward"].results[0]
    assert {result.stopped for result in results} == {"timeout"} and max(r.wall_s for r in results) < 0.5 + 1.0
    assert trainer.state.log_history[0]["rewards/sandbox_reward/mean"] == 0.0


def test_the_benchmark_prints_runs_per_second(capsys):
    script = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "sandbox.py")
    figures = script.main(["--runs", "4", "--rounds", "1"])
    output = capsys.readouterr().out
    assert "bwrap_pool_runs_per_s: " in output and "unshare_serial_runs_per_s: " in output and "isolation_cost_ratio: " in output
    assert all(value > 0 for value in figures.values())


def test_the_benchmark_measures_the_share_of_a_step_a_reward_hook_takes(capsys):
    script = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "sandbox.py")
    figures = script.main(["--step-share", "venus", "--share-steps", "1"])
    assert "venus_reward_share: " in capsys.readouterr().out and 0 < figures["venus_reward_share"] < 1
    from stackrl_venus import Venus

    assert Venus.reward.__name__ == "reward" and Venus.reward.__qualname__ == "Venus.reward"  # the hook restored


def test_the_program_of_a_completion_is_its_last_fenced_block_else_the_whole_completion():
    assert program_of("a = 1\nprint(a)") == "a = 1\nprint(a)"
    assert program_of("Slow:\n```python\nprint(1)\n```\nFaster:\n```py\nprint(2)\n```\nDone.") == "print(2)"
    assert program_of("```\nprint(3)```") == "print(3)"
