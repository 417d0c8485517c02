"""ReST-GRPO's mechanism on the built-in model, short: one seed of the CPU recipe against plain GRPO. The full
figures (3 seeds, the ablations, held-out accuracy) come from benchmarks/mechanism.py."""

import math
from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_more_groups_have_a_reward_spread_than_under_plain_sampling(tmp_path):
    mechanism = load_script(BENCHMARK)
    short = ["trainer.disable_tqdm=true"]
    rest = mechanism.run("restgrpo", seed=0, steps=24, folder=tmp_path, overrides=short, evaluate_after=False)
    grpo = mechanism.run("grpo", seed=0, steps=24, folder=tmp_path, overrides=short, evaluate_after=False)
    groups = (24 - 8) * 8  # the steps after the first pass, 8 groups each
    noise = math.sqrt(grpo["spread"] * (1 - grpo["spread"]) / groups)
    print(f"share of groups with a reward spread: restgrpo {rest['spread']:.3f}, grpo {grpo['spread']:.3f}")
    assert rest["spread"] > grpo["spread"] + 2 * noise, (rest, grpo, noise)
