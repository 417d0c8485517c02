"""EEPO's mechanism on the built-in task and model, short: one seed, a few steps of the CPU recipe against plain
GRPO. The full figures (3 seeds) come from benchmarks/mechanism.py."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_groups_hold_more_distinct_answers_than_grpo_groups(tmp_path):
    mechanism = load_script(BENCHMARK)
    short = ["trainer.disable_tqdm=true", "trainer.max_completion_length=48"]
    eepo = mechanism.run("eepo", seed=0, steps=3, folder=tmp_path, overrides=short)
    grpo = mechanism.run("grpo", seed=0, steps=3, folder=tmp_path, overrides=short)
    print(f"eepo {eepo}\ngrpo {grpo}")
    # 24 groups of 8 each: the benchmark's gap (about one answer a group) is several standard errors
    assert eepo["distinct"] > grpo["distinct"] + 0.5, (eepo, grpo)
