"""CSCR: credit moves off the tokens the claimed outcomes shift most; each rollout keeps its credit and sign."""

from pathlib import Path

import pytest
import torch

from stackrl.blocks.tokensignals import SignalContext, TokenSignals
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.heldout import advantage_context, assert_accuracy_holds, right_and_wrong_rollout
from stackrl.testing.repository import load_script
from stackrl_cscr import sensitivity

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


class TestConformance(PluginConformance):
    plugin_name = "cscr"
    refused_settings = [({"strength": -1.0}, "must be non-negative, not -1.0"),
                        ({"sensitivity": "mean"}, "must be one of sum, max, not 'mean'"),
                        ({"floor": 1.5}, r"must be in \[0, 1\], not 1.5")]


@pytest.fixture
def trainer(built_in_trainer):
    return built_in_trainer(["cscr"])


def test_sensitivity_of_hand_built_shifts():
    up, down = torch.tensor([0.5, -2.0, 0.0]), torch.tensor([-1.0, -0.5, 3.0])
    assert sensitivity(up, down, "sum").tolist() == [1.5, 2.5, 3.0]
    assert sensitivity(up, down, "max").tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(("kind", "strength", "floor"), [("sum", 1.0, 0.0), ("max", 0.3, 0.0), ("sum", 1.0, 0.5)])
def test_credit_is_reallocated_by_inverse_sensitivity_keeping_each_rollouts_total(trainer, kind, strength, floor):
    rollout = right_and_wrong_rollout(trainer.processing_class)
    ctx = advantage_context(trainer, rollout, "cscr")
    plugin = make_plugin("cscr", sensitivity=kind, strength=strength, floor=floor)
    got = plugin.reshape_advantages(rollout.advantages, ctx)
    signals = TokenSignals.of(ctx)
    up = signals.gap(SignalContext("c", "{claimed_solution}\n\n{prompt}"))
    down = signals.gap(SignalContext("d", "{denied_solution}\n\n{prompt}"))
    s = up.abs() + down.abs() if kind == "sum" else torch.maximum(up.abs(), down.abs())
    weights = signals.mask * (1 / (1 + strength * s)).clamp_min(floor)
    mean_one = weights * signals.mask.sum(1, keepdim=True) / weights.sum(1, keepdim=True)
    expected = rollout.advantages.unsqueeze(1) * mean_one
    assert torch.allclose(got, expected, atol=1e-6)
    assert torch.allclose(got.sum(1), rollout.advantages * signals.mask.sum(1), atol=1e-5), "the credit budget"
    assert ((got * rollout.advantages.unsqueeze(1)) >= 0).all(), "the verifier's direction"
    for row in range(len(rollout)):  # the most sensitive token gets the least credit (ties at the floor aside)
        n = len(rollout.completion_ids[row])
        assert torch.isclose(got[row, :n].abs().min(), got[row, s[row, :n].argmax()].abs())


def test_by_default_no_token_keeps_less_than_half_an_insensitive_tokens_credit(trainer):
    """The floor (0.5 by default): however sensitive, a token's weight is at least half that of a token no claim
    moves, so the most sensitive tokens keep credit (without it the built-in model leaves them 0.005)."""
    rollout = right_and_wrong_rollout(trainer.processing_class)
    ctx = advantage_context(trainer, rollout, "cscr")
    got = make_plugin("cscr").reshape_advantages(rollout.advantages, ctx)
    up, down, mask = make_plugin("cscr").shifts(ctx)
    assert (1 / (1 + (up.abs() + down.abs()))[mask.bool()]).min() < 0.1, "some token is far below the floor"
    per_token = got / rollout.advantages.unsqueeze(1)
    for row in range(len(rollout)):
        n = len(rollout.completion_ids[row])
        assert per_token[row, :n].min() >= 0.5 * per_token[row, :n].max() - 1e-6


def test_the_two_claims_are_the_rollouts_own_answer_and_another(trainer):
    """The wrong row (answer 12) is re-scored under a solution reaching 12, and under the reference (11)."""
    rollout = right_and_wrong_rollout(trainer.processing_class)
    up, down, _ = make_plugin("cscr").shifts(advantage_context(trainer, rollout, "cscr"))
    signals = TokenSignals.of(advantage_context(trainer, rollout, "cscr"))
    claim = SignalContext("own", "4 * 2 = 8\n8 + 3 = 12\nThe answer is 12.\n\n{prompt}")
    reference = SignalContext("reference", "{solution}\n\n{prompt}")
    assert torch.allclose(up[1], signals.gap(claim)[1]) and torch.allclose(down[1], signals.gap(reference)[1])
    assert torch.allclose(up[0], signals.gap(reference)[0])


@pytest.mark.mechanism
def test_the_papers_diagnostic_reproduces_and_accuracy_holds():
    """The mechanism on the built-in model, short (the full figures come from benchmarks/mechanism.py)."""
    mechanism = load_script(BENCHMARK)
    found = mechanism.diagnostic(problems=32, seed=0)
    assert found["shifted"] >= 100
    assert found["same_direction"] > 0.6, found      # most shifted tokens move the same way under both claims
    # the most sensitive tenth gets less than its share of the tokens, and the floor keeps it about half of it
    assert 0.4 * found["top_tokens"] < found["top_credit"] < 0.8 * found["top_tokens"], found
    assert_accuracy_holds(mechanism.RECIPE, steps=8, heldout=64, seed=0)
