"""MR-RLVR's mechanism on the built-in model, run short through benchmarks/mechanism.py: stage 1's fill reward
teaches the fill tasks it trains on (their log-probability of being restored rises), and the switch hands training
to the outcome reward on the problems. The benchmark measures held-out fill accuracy over three seeds, and pass@1
and pass@k after stage 2 against plain RLVR."""

import math
from pathlib import Path

import pytest

from stackrl.tasks.arithmetic import make_dataset
from stackrl.testing.repository import load_script

from stackrl_mrrlvr import Mrrlvr, MrrlvrConfig
from stackrl_mrrlvr.plugin import STEP_COLUMN

pytestmark = pytest.mark.mechanism

MECHANISM = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py")
SWITCH = 8
PROBLEMS = 4  # every step draws all four fill tasks
SHORT = ["trainer.per_device_train_batch_size=32", "trainer.max_completion_length=48",
         "trainer.learning_rate=3e-4", "mrrlvr.tasks=[fill]", f"data.size={PROBLEMS}"]


def _unscored(mean) -> bool:
    """A component that scored no completion of a step: its mean is NaN (None once in the trainer's log)."""
    return mean is None or math.isnan(mean)


def test_stage_1_teaches_its_fill_tasks_and_the_switch_hands_over_to_the_outcome_reward(tmp_path):
    # The run's own fill rows, built as the plugin builds them from the training problems (prompt = question).
    rows = {i: {**row, "prompt": row["question"]} for i, row in enumerate(make_dataset("train", PROBLEMS, seed=0))}
    tasks = [(r["prompt"], r["solution"], r[STEP_COLUMN]) for r in Mrrlvr(MrrlvrConfig(tasks=["fill"])).process_rows(rows, 0)]
    figures = MECHANISM.run("mrrlvr", 0, SWITCH, SWITCH + 1, tmp_path, heldout=4, k=2, fill_on=tasks,
                            overrides=SHORT)
    before, after = figures["fill"][0]["logprob"], figures["fill"][SWITCH]["logprob"]
    assert after > before + 1.0, figures["fill"]
    trainer = figures["trainer"]
    logged = {row["step"]: row for row in trainer.state.log_history if "reward" in row}
    stage_1, stage_2 = [logged[s] for s in range(1, SWITCH + 1)], logged[SWITCH + 1]
    assert all(row["reward_weight/mrrlvr"] == 1.0 and _unscored(row["rewards/exact_match/mean"]) for row in stage_1)
    assert stage_2["reward_weight/mrrlvr"] == 0.0 and _unscored(stage_2["rewards/mrrlvr/mean"])
    assert stage_2["reward"] == stage_2["rewards/exact_match/mean"]
    assert sorted(trainer.pool.last_batch) == list(range(PROBLEMS)) and trainer.pool.stage == 2
