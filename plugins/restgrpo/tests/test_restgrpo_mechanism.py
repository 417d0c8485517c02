"""ReST-GRPO's mechanism on the built-in model, short: one seed of the CPU recipe's filter (no partial solutions)
against plain GRPO, over the recipe's first iteration. The full figures (3 seeds, the whole method and the
ablations, held-out accuracy) come from benchmarks/mechanism.py."""

import math
from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_the_filter_gives_more_groups_a_reward_spread_than_plain_sampling(tmp_path):
    mechanism = load_script(BENCHMARK)
    short = ["trainer.disable_tqdm=true"]
    rest = mechanism.run("filter_only", seed=0, steps=24, folder=tmp_path, overrides=short, evaluate_after=False)
    grpo = mechanism.run("grpo", seed=0, steps=24, folder=tmp_path, overrides=short, evaluate_after=False)
    groups = (24 - 8) * 8  # the steps after the first pass, 8 groups each
    noise = math.sqrt(grpo["spread"] * (1 - grpo["spread"]) / groups)
    print(f"share of groups with a reward spread: filter {rest['spread']:.3f}, grpo {grpo['spread']:.3f}")
    assert rest["spread"] > grpo["spread"] + 2 * noise, (rest, grpo, noise)
