"""SVR-R1's mechanism on the built-in judging model, short: one step of the CPU recipe on stackrl/arith-skills, 16
groups of 8 trajectories, and the benchmark's held-out measurement run short. The held-out figures after training,
against plain GRPO, come from benchmarks/mechanism.py."""

from pathlib import Path

import pytest

from stackrl.rewards import exact_match
from stackrl.tasks import parse_verdict
from stackrl.testing.fixtures import train_steps
from stackrl.testing.heldout import recipe_config
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

PLUGIN = Path(__file__).resolve().parents[1]
RECIPE = PLUGIN.parents[1] / "configs" / "recipes" / "svrr1-cpu.yaml"


def test_the_outcome_alone_pushes_a_no_to_a_wrong_answer_above_a_yes_and_a_yes_to_a_right_one_above_a_no(tmp_path):
    config = recipe_config(RECIPE, plugins=True, seed=0, steps=1, output_dir=tmp_path,
                           overrides=["trainer.disable_tqdm=true", "trainer.per_device_train_batch_size=128"])
    rollout = train_steps(config)._rollouts["train"]
    # Each row's first answer and first verdict, read here from the texts and the hidden answers, and the one
    # advantage GRPO gave the row's tokens, its check's among them.
    by_case: dict[tuple[bool, bool | None], list[float]] = {}
    for i, segments in enumerate(rollout.columns["segments"]):
        first_right = exact_match(segments[0].text, rollout.columns["answer"][i]) == 1.0
        by_case.setdefault((first_right, parse_verdict(segments[1].text)), []).append(rollout.advantages[i].item())
    assert sum(len(v) for k, v in by_case.items() if k[1] is None) < 0.15 * len(rollout), "checks miss their verdict"

    def mean(first_right: bool, verdict: bool) -> float:
        values = by_case.get((first_right, verdict), [])
        assert len(values) >= 5, f"too few {verdict} verdicts on first answers right={first_right}: {by_case}"
        return sum(values) / len(values)

    # The verdicts have no reward of their own: a "no" to a wrong answer earns only through the rethinks it buys
    # that come out right, a "yes" to one finalises it wrong; a "yes" to a right answer keeps it, a "no" risks it.
    assert mean(False, False) > mean(False, True) + 0.3, by_case
    assert mean(True, True) > mean(True, False) + 0.3, by_case


def test_the_benchmark_measures_the_self_verified_trajectory_on_held_out_problems(tmp_path):
    figures = load_script(PLUGIN / "benchmarks" / "mechanism.py").run("svrr1", 0, 0, tmp_path, [], 32)
    assert 0 < figures["first"] < 1 and 0 < figures["final"] < 1
    assert 1 <= figures["verifications"] <= 2 and 0 < figures["rethought"] < 1
