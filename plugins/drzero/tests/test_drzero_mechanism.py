"""Dr. Zero's mechanism on the built-in model, short: on one real training step the advantages the trainer used are
HRPO's, each reward standardised over its category's rows across prompts, computed by hand; and the step's rewards
tell that rule from GRPO's per-prompt groups, a coarser key and the unscaled reward. benchmarks/mechanism.py has the
accuracy runs."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_one_real_step_has_the_cluster_advantages_computed_by_hand():
    (step,) = load_script(BENCHMARK).advantage_check(seed=0, steps=1)
    print(step)
    assert step["error"] < 1e-4, step
    # the step can tell the rules apart: each replaced rule gives advantages far from those used
    assert min(step["vs_prompt"], step["vs_steps"], step["vs_unscaled"]) > 0.1, step
    assert step["clusters"] > 1 and step["rows"] == 32, step
