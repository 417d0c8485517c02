"""R-Diverse's mechanism on the built-in posing model (stackrl/arith-skills): in a real run, each challenger reward is
R-Zero's uncertainty of the solver's answers less the memory penalty of every question posed at earlier steps,
measured by skill; the monitor keeps its own memory and adds the penalty back. And the model shows the surface
diversity illusion the skill measure is for: its questions repeat an earlier question's operations far more often
than its text. A flipped penalty, a memory of the current step only, or the surface measure in place of the skill
fail it (plugins/rdiverse/README.md)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = load_script(Path(__file__).parents[1] / "benchmarks" / "mechanism.py")


def test_the_reward_is_the_uncertainty_less_the_skill_memory_penalty():
    figures, challenges = BENCHMARK.run(seed=0, steps=6, overrides=["trainer.per_device_train_batch_size=8",
                                                                     "rdiverse.proposer_share=0.5"])
    later = [p for p in challenges.posed if p["step"] > 0]
    assert len(later) >= 10, len(later)
    allowed = BENCHMARK.uncertainty_values(challenges.posed[0]["samples"])
    for posed in challenges.posed:
        assert min(abs(posed["left"] - value) for value in allowed) < 1e-5, posed
    assert sum(p["penalty"] > 0.5 for p in later) >= len(later) / 2, figures  # the memory weighs on most
    # Surface diversity illusion: new numbers, the same operations.
    assert figures["skill_repeats"] > figures["surface_repeats"] + 0.2, figures
