"""TurnSight on the built-in model, short: one real step of the CPU recipe (stackrl/arith-tools with the calculator,
4 prompts x 8 episodes), the advantages the plugin hands on compared token by token with benchmarks/mechanism.py's
hand computation from ctx.score log-probs (each calculator turn's results read off the loss mask, a context per
horizon written out, the agreement, the z-score over the group's kept turns, the clipped scale), and no advantage's
sign changed; again with a scale strong enough to flip signs unclipped. The GRPO comparison figures come from the script's main (README)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_each_tool_turns_advantage_is_its_agreed_hindsight_signal_scaled_and_keeps_its_sign():
    figures = load_script(BENCHMARK).run(
        seed=0, steps=1, overrides=["trainer.per_device_train_batch_size=32", "trainer.disable_tqdm=true"])
    assert figures["steps"] == 1, figures
    assert figures["mismatched_tokens"] == 0, figures["notes"]
    assert figures["sign_flips"] == 0, figures
    # the check has something to tell apart: turns dropped for disagreeing, several groups normalised, scales clipped
    assert figures["turns"] > figures["kept"] >= 8, figures
    assert figures["groups_normalised"] >= 3 and figures["clipped_tokens"] > 20, figures
    assert figures["tokens_changed"] > 100, figures


def test_a_strong_scale_that_would_flip_signs_unclipped_keeps_every_sign():
    # alpha 1.5: 1 + 1.5 * sign(A) * z is negative on many tokens; the band holds them at 0.5
    figures = load_script(BENCHMARK).run(
        seed=0, steps=1,
        overrides=["trainer.per_device_train_batch_size=32", "trainer.disable_tqdm=true", "turnsight.alpha=1.5"])
    assert figures["would_flip_unclipped"] > 50, figures
    assert figures["sign_flips"] == 0, figures
    assert figures["mismatched_tokens"] == 0, figures["notes"]
