"""A resumed run continues exactly: same parameters and the same plugin state as an uninterrupted one, also after
Ctrl-C."""

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from stackrl.cli import main
from stackrl.plots import METRICS_FILE
from stackrl.testing.fixtures import StopAt, train_steps
from stackrl.testing.tiny import TINY_TRAINER
from stackrl.trainer import PLUGIN_STATE_FILE, last_checkpoint

PLUGINS = ["digit_reward", "step_counter"]


def parameters(trainer):
    return {name: p.detach().clone() for name, p in trainer.model.named_parameters()}


def same_parameters(a, b) -> bool:
    want, got = parameters(a), parameters(b)
    return all(torch.equal(want[name], got[name]) for name in want)


# One prompt a step. 32 prompts: 6 steps straight against 3 + resume + 3, inside the first epoch. 4 prompts: epochs
# of 4 steps, 8 straight against 5 + resume + 3, so the resumed run must replay the data order of an epoch it began
# after the interruption.
@pytest.mark.parametrize("prompts, stop, total", [(32, 3, 6), (4, 5, 8)])
def test_a_resumed_run_continues_exactly(make_config, tmp_path, prompts, stop, total):
    saving = {"save_strategy": "steps", "save_steps": stop, "max_steps": total}
    data = {"size": prompts}
    straight = train_steps(make_config(PLUGINS, trainer=saving, data=data, output_dir=str(tmp_path / "straight")))

    interrupted = make_config(PLUGINS, trainer=saving, data=data, output_dir=str(tmp_path / "resumed"))
    first = train_steps(interrupted, callbacks=[StopAt(stop)])
    assert first.state.global_step == stop
    resumed = train_steps(interrupted, resume=True)

    assert resumed.state.global_step == total
    assert same_parameters(straight, resumed)
    want_state = straight.plugins.plugins["step_counter"].state_dict()
    assert resumed.plugins.plugins["step_counter"].state_dict() == want_state
    assert want_state["steps"] == total and len(want_state["reward_sums"]) == total


def logged_steps(run, key) -> list[int]:
    """The steps of the rows of ``metrics.jsonl`` that hold ``key`` (a line still being written is left out)."""
    path = run / METRICS_FILE
    lines = path.read_text().splitlines(keepends=True) if path.is_file() else []
    return [row["step"] for row in map(json.loads, filter(lambda line: line.endswith("\n"), lines)) if key in row]


def checkpoint_step(checkpoint: str) -> int:
    return int(checkpoint.rsplit("-", 1)[1])


def logged_past_checkpoint(run) -> bool:
    saved = last_checkpoint(str(run))
    return saved is not None and max(logged_steps(run, "loss"), default=0) > checkpoint_step(saved)


def _interruptible() -> None:
    """In the child, before it runs: Ctrl-C delivered as from a terminal. A process inherits an ignored or blocked
    SIGINT from its parent, and a test worker may hold one, left by a library an earlier test ran; the child would
    then never see the interrupt and train to the end."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_stops_cleanly_and_the_command_resumes_exactly(tiny_model_dir, tmp_path, capsys):
    """Ctrl-C during ``stackrl train``: exit 130, the last checkpoint and the resume command; resuming prints the
    summary an uninterrupted run prints, logs every step once, and ends with the same weights and plugin state."""
    run = tmp_path / "run"
    path = tmp_path / "run.yaml"
    # Checkpoints far apart: the run is interrupted a step or two after one is passed, well before the next.
    # Constant lr: the first run's length does not shape the schedule.
    trainer = {**TINY_TRAINER, "save_strategy": "steps", "save_steps": 5, "max_steps": 1000,
               "lr_scheduler_type": "constant"}
    path.write_text(yaml.safe_dump({
        "model": {"name_or_path": str(tiny_model_dir)},
        "data": {"size": 32},
        "plugins": PLUGINS,
        "rewards": {"exact_match": 1.0},
        "trainer": trainer,
        "eval": {"size": 4, "samples": 2},
        "output_dir": str(run),
    }))
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:  # files: a pipe could fill up
        first = subprocess.Popen([sys.executable, "-m", "stackrl.cli", "train", str(path)], stdout=out, stderr=err,
                                 preexec_fn=_interruptible)
    deadline = time.monotonic() + 600
    # Interrupt once a step past the checkpoint is logged: the resumed run must log that step again, not twice.
    while not logged_past_checkpoint(run):
        assert first.poll() is None and time.monotonic() < deadline, (tmp_path / "err").read_text()
        time.sleep(0.2)
    first.send_signal(signal.SIGINT)
    first.wait(timeout=300)
    out, err = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    assert first.returncode == 130, err
    assert "Traceback" not in out + err
    checkpoint = last_checkpoint(str(run))
    stopped = re.fullmatch(rf"stackrl: interrupted at step (\d+); last checkpoint: {re.escape(checkpoint)}",
                           err.splitlines()[-2])
    assert stopped and int(stopped.group(1)) > checkpoint_step(checkpoint)
    assert err.splitlines()[-1] == f"resume with: stackrl train {path} --resume"

    total = f"trainer.max_steps={checkpoint_step(checkpoint) + 4}"
    assert main(["train", str(path), total, "--resume"]) == 0
    resumed = capsys.readouterr().out.splitlines()
    assert main(["train", str(path), total, f"output_dir={tmp_path / 'straight'}"]) == 0
    straight = capsys.readouterr().out.splitlines()
    held_out = lambda lines: [line for line in lines if line.startswith("held-out ")]  # noqa: E731
    assert held_out(resumed) == held_out(straight) and held_out(resumed)[0].startswith("held-out pass@1: ")

    for key in ("loss", "eval/pass@1"):
        assert logged_steps(run, key) == logged_steps(tmp_path / "straight", key)
    final = {folder: load_file(folder / "model.safetensors") for folder in (run, tmp_path / "straight")}
    assert all(torch.equal(final[run][name], weight) for name, weight in final[tmp_path / "straight"].items())
    states = [torch.load(Path(last_checkpoint(str(folder))) / PLUGIN_STATE_FILE) for folder in final]
    assert states[0]["step_counter"] == states[1]["step_counter"]
