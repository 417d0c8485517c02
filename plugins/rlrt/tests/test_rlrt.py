"""RLRT: correct rollouts credit most the tokens the teacher would not have predicted; incorrect ones are routed."""

from pathlib import Path

import pytest
import torch

from stackrl.blocks.tokensignals import REFERENCE, TokenSignals
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.heldout import (
    WRITTEN_PROBLEMS, WRITTEN_SLIPS, advantage_context, assert_accuracy_holds, written_rollout,
)
from stackrl.testing.repository import load_script

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


class TestConformance(PluginConformance):
    plugin_name = "rlrt"
    refused_settings = [
        ({"incorrect": "opsd"}, "rlrt.incorrect: must be one of grpo, rlsd, not 'opsd'"),
        ({"credit": "scale"}, "rlrt.credit: must be one of add, reallocate, not 'scale'"),
        ({"clip": -1.0}, "rlrt.clip: must be positive"),
    ]


@pytest.fixture
def trainer(built_in_trainer):
    return built_in_trainer(["rlrt"])


def _rollout(tokenizer):
    """Group 1: right (its own route to the answer), wrong. Group 2: right, wrong. Advantages as GRPO's, except the
    last right row, given a negative one (another reward component could): routing follows the reward."""
    first, second = WRITTEN_PROBLEMS
    completions = ["4 * 2 = 8\n3 + 8 = 11\nThe answer is 11.", WRITTEN_SLIPS[first], WRITTEN_PROBLEMS[second],
                   WRITTEN_SLIPS[second]]
    return written_rollout(tokenizer, [first, first, second, second], completions,
                           advantages=torch.tensor([0.7, -0.7, -0.2, -0.7]))


@pytest.mark.parametrize("incorrect", ["grpo", "rlsd"])
def test_correct_rows_get_the_reversed_exponent_and_incorrect_ones_their_route(trainer, incorrect):
    rollout = _rollout(trainer.processing_class)
    ctx = advantage_context(trainer, rollout, "rlrt")
    plugin = make_plugin("rlrt", clip=1.5, incorrect=incorrect, credit="reallocate")
    got = plugin.reshape_advantages(rollout.advantages, ctx)
    gap, mask = TokenSignals.of(ctx).gap(REFERENCE), TokenSignals.of(ctx).mask
    sign = torch.tensor([-1.0, -1.0 if incorrect == "rlsd" else 0.0, -1.0, -1.0 if incorrect == "rlsd" else 0.0])
    # correct rows: exp(-gap), whatever their advantage's sign; incorrect: RLSD's exp(sign(A) gap), or 1
    weights = torch.exp(sign.unsqueeze(1) * gap.clamp(-1.5, 1.5)) * mask
    weights = weights * mask.sum(1, keepdim=True) / weights.sum(1, keepdim=True)
    assert torch.allclose(got, rollout.advantages.unsqueeze(1) * weights, atol=1e-6)
    assert torch.allclose(got.sum(1), rollout.advantages * mask.sum(1), atol=1e-5)
    if incorrect == "grpo":
        assert torch.allclose(got[1], rollout.advantages[1] * mask[1])


def test_by_default_the_boost_adds_to_grpo_and_takes_nothing_from_other_tokens(trainer):
    """``credit: add`` (the default): correct rows get A * max(1, exp(-clamp(gap))), never rescaled, so every token
    keeps at least GRPO's advantage; incorrect rows keep GRPO's."""
    rollout = _rollout(trainer.processing_class)
    ctx = advantage_context(trainer, rollout, "rlrt")
    got = make_plugin("rlrt", clip=1.5).reshape_advantages(rollout.advantages, ctx)
    gap, mask = TokenSignals.of(ctx).gap(REFERENCE), TokenSignals.of(ctx).mask
    boost = torch.exp(-gap.clamp(-1.5, 1.5)).clamp_min(1.0)
    grpo = rollout.advantages.unsqueeze(1) * mask
    assert torch.allclose(got[[0, 2]], (grpo * boost)[[0, 2]], atol=1e-6)
    assert torch.allclose(got[[1, 3]], grpo[[1, 3]])
    assert ((got - grpo) * grpo.sign() >= -1e-7).all(), "no token gets less than GRPO gives it"
    assert (boost[[0, 2]] > 1.5).any() and (gap[[0, 2]] > 0.1).any(), "both kinds of token are in the rollout"


def test_the_correct_rows_own_step_gets_the_most_credit(trainer):
    """The right row writes "3 + 8" where the reference has "8 + 3": the teacher did not predict that "3", so RLRT
    credits it most (RLSD's unreversed rule would credit it least)."""
    rollout = _rollout(trainer.processing_class)
    got = make_plugin("rlrt").reshape_advantages(rollout.advantages, advantage_context(trainer, rollout, "rlrt"))
    own = len(trainer.processing_class("4 * 2 = 8\n", add_special_tokens=False)["input_ids"])
    assert trainer.processing_class.decode(rollout.completion_ids[0][own]) == "3"
    assert int(got[0, : len(rollout.completion_ids[0])].argmax()) == own


def test_boosted_tokens_are_logged_per_correct_row(trainer):
    rollout = _rollout(trainer.processing_class)
    logged = {}
    ctx = advantage_context(trainer, rollout, "rlrt")
    ctx._log = lambda name, value: logged.__setitem__(name, value)
    plugin = make_plugin("rlrt", self_driven_margin=0.1)
    plugin.reshape_advantages(rollout.advantages, ctx)
    gap = TokenSignals.of(ctx).gap(REFERENCE)
    expected = ((gap[[0, 2]] < -0.1) & TokenSignals.of(ctx).mask[[0, 2]].bool()).sum().item() / 2
    assert expected > 0 and logged["rlrt/boosted_per_correct_row"] == expected


@pytest.mark.mechanism
def test_self_driven_tokens_are_boosted_and_accuracy_holds():
    """The mechanism on the built-in model, short (the full figures come from benchmarks/mechanism.py)."""
    mechanism = load_script(BENCHMARK)
    found = mechanism.boosted(problems=48, seed=0)
    assert found["correct_rows"] >= 10 and found["per_correct_row"] > 0
    assert found["rlrt_ratio"] > 2.0 > 0.5 > found["rlsd_ratio"], found
    assert_accuracy_holds(mechanism.RECIPE, steps=8, heldout=64, seed=0)
