"""ECHO's update on the built-in model in a label-free run, short (the full figures: benchmarks/mechanism.py)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_clip_range_and_advantage_weights_follow_the_policys_own_entropy_and_confidence():
    # The built-in model puts nearly all its mass on its top 5 tokens, so the authors' top-5 confidence is flat there
    # (0.1988 to 0.2): a token's confidence is its top probability here, which spreads the clip ranges apart.
    figures, monitor = load_script(BENCHMARK).run(seed=0, steps=1, overrides=["echo.confidence_topk=1"])
    assert len(monitor.steps) == 1 and figures["shaped_steps"] >= 1, figures
    # Every row's clip range is the formula of its own tail confidence, recomputed from the policy's logits ...
    assert figures["clip_error"] < 1e-4, figures
    # ... so a completion that ends less sure gets the wider range (the authors' direction), pair by pair.
    assert figures["clip_disorder"] == 0, figures
    assert figures["clip_uncertain_tail"] > figures["clip_confident_tail"], figures
    # Every token's advantage weight is 1 + a * S_t, S_t recomputed; uncertain tokens weigh more than 1, sure ones less.
    assert figures["weight_error"] < 1e-3, figures
    assert figures["weight_uncertain_tokens"] > 1.0 > figures["weight_confident_tokens"], figures
    # TRL's loss through the real trainer clips at those ranges, exactly, and differs from the config's range.
    assert figures["loss"] == pytest.approx(figures["loss_by_hand"], abs=1e-5), figures
    assert figures["loss_config_range"] == pytest.approx(figures["loss_config_by_hand"], abs=1e-5), figures
    assert abs(figures["loss"] - figures["loss_config_range"]) > 1e-4, figures
