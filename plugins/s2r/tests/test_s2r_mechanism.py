"""S^2R's mechanism on the built-in judging model, short: one step of the CPU recipe on stackrl/arith-skills (48
trajectories of two answers at most), and the benchmark's held-out measurement run short. The history baselines
of later steps are the fast tests' (tests/test_s2r.py); the held-out figures after training, against plain GRPO,
come from benchmarks/mechanism.py."""

from pathlib import Path

import pytest

from stackrl.rewards import exact_match
from stackrl.testing.fixtures import train_steps
from stackrl.testing.heldout import recipe_config
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

PLUGIN = Path(__file__).resolve().parents[1]
RECIPE = PLUGIN.parents[1] / "configs" / "recipes" / "s2r-cpu.yaml"


def right(text: str, answer: str) -> bool:
    return exact_match(text, answer) == 1.0


def test_a_check_is_credited_by_its_own_verdicts_truth_not_by_the_outcome_it_led_to(tmp_path):
    config = recipe_config(RECIPE, plugins=True, seed=0, steps=1, output_dir=tmp_path,
                           overrides=["trainer.disable_tqdm=true", "trainer.per_device_train_batch_size=48",
                                      "s2r.answers=2"])
    rollout = train_steps(config)._rollouts["train"]
    figures = load_script(PLUGIN / "benchmarks" / "mechanism.py").advantage_figures(rollout, right)
    assert figures["n_right"] >= 10 and figures["n_wrong"] >= 5, figures
    # A check whose verdict is right about the answer it checks is pushed up, one whose verdict is wrong down.
    assert figures["right"] > 0.3 and figures["wrong"] < -0.3, figures
    # ... also where the row's final answer says the opposite: a right "wrong" whose correction failed still goes
    # up, a wrong "wrong" whose correction kept the answer right still goes down (the outcome alone does the reverse).
    assert figures["n_right_final_wrong"] >= 3 and figures["n_wrong_final_right"] >= 3, figures
    assert figures["right_final_wrong"] > 0.3 and figures["wrong_final_right"] < -0.3, figures


def test_the_benchmark_measures_the_self_verified_trajectory_on_held_out_problems(tmp_path):
    figures = load_script(PLUGIN / "benchmarks" / "mechanism.py").run("s2r", 0, 0, tmp_path, ["s2r.answers=2"], 16)
    assert 0 < figures["first"] < 1 and 0 < figures["final"] < 1
    assert 0 < figures["verify_right"] < 1 and 0 < figures["corrected"] < 1
