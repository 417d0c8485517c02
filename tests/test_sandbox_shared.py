"""``measured_once``: a timing measured on the main process alone reaches every process unchanged, and an error
there stops every process rather than leaving one waiting. One real two-process launch (torch.distributed.run,
gloo on CPU) checks both; the single-process call is checked here."""

from __future__ import annotations

import json

import pytest

from stackrl.blocks.sandbox import measured_once

TWO_PROCESSES = """
import json
import sys
from pathlib import Path

from accelerate import PartialState

from stackrl.blocks.sandbox import Sandbox, measured_once

state = PartialState(cpu=True)
calls = []


def timed():
    calls.append(state.process_index)
    result = Sandbox().run("for _ in range(20000): pass\\nprint(7)")
    return {"rank": state.process_index, "cpu_s": result.cpu_s, "stdout": result.stdout}


def failing():
    calls.append(state.process_index)
    raise ValueError("a program could not be timed")


shared = measured_once(timed, what="venus")
try:
    measured_once(failing, what="venus")
    error = "no error"
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
Path(sys.argv[1], f"rank{state.process_index}.json").write_text(json.dumps(
    {"shared": shared, "error": error, "calls": calls}))
state.destroy_process_group()
"""


def test_one_process_calls_it_directly_and_its_errors_stay_its_own():
    assert measured_once(lambda: [1.5, 2.5]) == [1.5, 2.5]
    with pytest.raises(ValueError, match="boom"):
        measured_once(lambda: (_ for _ in ()).throw(ValueError("boom")))


def test_two_processes_get_the_main_process_timing_and_its_error(tmp_path, worker):
    script = tmp_path / "shared.py"
    script.write_text(TWO_PROCESSES)
    worker.run_script(script, str(tmp_path), nproc=2)
    main, other = (json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2))
    # the very same measurement (a float of the main process's run) on both: no second run could equal it by chance
    assert main["shared"] == other["shared"] and main["shared"]["rank"] == 0 and main["shared"]["stdout"] == "7\n"
    assert main["shared"]["cpu_s"] > 0
    assert main["calls"] == [0, 0] and other["calls"] == []  # only the main process ran anything
    assert main["error"] == "ValueError: a program could not be timed"  # raised there as it came
    assert other["error"] == "StackrlError: venus: ValueError: a program could not be timed"  # not a hang


def test_a_timing_reward_trains_on_the_same_rewards_in_both_processes(tmp_path, worker, tiny_model_dir):
    """venus on stackrl/arith-code's programs, one step on two processes: each process's reward hook returns the
    main process's timed rewards, so both get the same values (their own times would differ) and the same weights."""
    pytest.importorskip("stackrl_venus")
    run = {"name": "timed", "plugins": ["venus"], "sections": {
        "model": {"name_or_path": "stackrl/arith-code", "dtype": "float32"},
        "data": {"prompt_template": "{question}Program:\n"},
        "rewards": {"exact_match": None, "venus": 1.0},
        "venus": {"repeats": 3},
        "output_dir": str(tmp_path / "timed" / "run"),
        "trainer": {"per_device_train_batch_size": 4, "num_generations": 4, "max_steps": 1,
                    "max_completion_length": 48, "temperature": 1.0},
    }}
    worker.launch(tiny_model_dir, [run], tmp_path)
    main, other = worker.reports(tmp_path, "timed")
    rewards = [call for call in main["plugin_rewards"] if call["plugin"] == "venus"]
    assert rewards and rewards == [call for call in other["plugin_rewards"] if call["plugin"] == "venus"]
    values = [value for call in rewards for value in call["result"]]
    assert len(values) == 8 and any(value not in (0.5, -1.0) for value in values)  # timed: a speed term is in
    assert main["param_hash"] == other["param_hash"]
