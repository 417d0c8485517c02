"""RLCSD: the contrast between a correct and a wrong hint, as a per-token reward beside GRPO or as its weights."""

import math
from pathlib import Path

import pytest
import torch

from stackrl.blocks.tokensignals import SignalContext, TokenSignals
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.heldout import (
    WRITTEN_PROBLEMS, WRITTEN_SLIPS, advantage_context, assert_accuracy_holds, right_and_wrong_rollout, written_rollout,
)
from stackrl.testing.repository import load_script

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


class TestConformance(PluginConformance):
    plugin_name = "rlcsd"
    refused_settings = [({"mode": "both"}, "must be one of residual, additive, magnitude, not 'both'"),
                        ({"wrong_hints": 5}, "must be 1 to 4, not 5"), ({"tau": 0}, "must be positive, not 0"),
                        ({"coefficient": -0.1}, "must be non-negative")]


@pytest.fixture
def trainer(built_in_trainer):
    return built_in_trainer(["rlcsd"])


LEGACY = dict(positive_template="{solution}\n\n{prompt}", negative_template="{wrong_solution}\n\n{prompt}")
RIGHT, RIGHT_OWN_WAY = WRITTEN_PROBLEMS["(4 * 2) + 3"], "4 * 2 = 8\n3 + 8 = 11\nThe answer is 11."
WRONG, WRONG_OTHER = WRITTEN_SLIPS["(4 * 2) + 3"], "4 * 2 = 6\n6 + 3 = 9\nThe answer is 9."


def _group_rollout(tokenizer):
    """A mixed group of four (right, wrong, right, wrong) and a tied group of four right answers; advantages smaller
    than the residual's bound, so it can cross zero."""
    completions = [RIGHT, WRONG, RIGHT_OWN_WAY, WRONG_OTHER] + [WRITTEN_PROBLEMS["(3 + 5) - 2"]] * 4
    return written_rollout(tokenizer, ["(4 * 2) + 3"] * 4 + ["(3 + 5) - 2"] * 4, completions, group_size=4,
                           advantages=torch.tensor([0.3, -0.3, 0.3, -0.3, 0.0, 0.0, 0.0, 0.0]))


def _contrast(ctx):
    """The contrast written out from the two hints' log-probs."""
    signals = TokenSignals.of(ctx)
    right = signals.logprobs(SignalContext("right", "{solution}\n\n{prompt}"))
    wrong = signals.logprobs(SignalContext("wrong", "{wrong_solution}\n\n{prompt}"))
    return right - wrong, signals.mask


def test_additive_mode_adds_the_clipped_contrast_to_every_token(trainer):
    rollout = right_and_wrong_rollout(trainer.processing_class)
    ctx = advantage_context(trainer, rollout, "rlcsd")
    plugin = make_plugin("rlcsd", mode="additive", coefficient=0.3, clip=1.5, **LEGACY)
    got = plugin.reshape_advantages(rollout.advantages, ctx)
    contrast, mask = _contrast(ctx)
    expected = (rollout.advantages.unsqueeze(1) + 0.3 * contrast.clamp(-1.5, 1.5)) * mask
    assert torch.allclose(got, expected, atol=1e-6)
    assert contrast.abs().max() > 1.5, "the clip is exercised"


def test_magnitude_mode_weights_the_advantage_by_the_contrast_keeping_each_rollouts_credit(trainer):
    rollout = right_and_wrong_rollout(trainer.processing_class)
    ctx = advantage_context(trainer, rollout, "rlcsd")
    got = make_plugin("rlcsd", mode="magnitude", clip=1.5, **LEGACY).reshape_advantages(rollout.advantages, ctx)
    contrast, mask = _contrast(ctx)
    weights = torch.exp(rollout.advantages.sign().unsqueeze(1) * contrast.clamp(-1.5, 1.5)) * mask
    expected = rollout.advantages.unsqueeze(1) * weights * mask.sum(1, keepdim=True) / weights.sum(1, keepdim=True)
    assert torch.allclose(got, expected, atol=1e-6)
    assert torch.allclose(got.sum(1), rollout.advantages * mask.sum(1), atol=1e-5)


def test_the_hints_are_siblings_and_the_wrong_hint_their_mean(trainer):
    """The correct hint is another right answer of the group, never the row's own; the wrong hint the mean
    probability under the group's other wrong answers (two for a right row, one for a wrong row)."""
    rollout = _group_rollout(trainer.processing_class)
    ctx = advantage_context(trainer, rollout, "rlcsd")
    contrast, hinted = make_plugin("rlcsd").contrast(ctx)
    signals = TokenSignals.of(ctx)
    under = lambda text: signals.logprobs(SignalContext(text[:12], text + "\n\n{prompt}"))  # noqa: E731
    mean_wrong = torch.logsumexp(torch.stack([under(WRONG), under(WRONG_OTHER)]), 0) - math.log(2)
    expected = {0: under(RIGHT_OWN_WAY) - mean_wrong, 1: under(RIGHT_OWN_WAY) - under(WRONG_OTHER),
                2: under(RIGHT) - mean_wrong, 3: under(RIGHT) - under(WRONG)}
    for row, value in expected.items():
        assert torch.allclose(contrast[row], value[row] * signals.mask[row], atol=1e-5), row
    assert (hinted[4:] == 0).all() and (hinted[:4] == signals.mask[:4]).all(), "a tied group has no wrong sibling"


def test_the_residual_form_is_the_authors(trainer):
    """A_t = A + 0.5 tanh(c / 0.02) on the tokens where that residual exceeds 0.02, kept on A's side of zero; the
    selected and the other tokens each averaged over themselves; the tied group left out of the loss."""
    rollout = _group_rollout(trainer.processing_class)
    ctx = advantage_context(trainer, rollout, "rlcsd")
    got = make_plugin("rlcsd").reshape_advantages(rollout.advantages, ctx)
    contrast, hinted = make_plugin("rlcsd").contrast(ctx)
    a = rollout.advantages.unsqueeze(1) * hinted
    residual = 0.5 * torch.tanh(contrast / 0.02)
    selected = (residual.abs() > 0.02) & hinted.bool()
    shifted = torch.where(a > 0, (a + residual).clamp_min(0), (a + residual).clamp_max(0))
    total, n = hinted.sum(), selected.sum()
    expected = torch.where(selected, shifted * total / n, a * total / (total - n)) * hinted
    assert torch.allclose(got, expected, atol=1e-5)
    assert 0 < n < total and (a + residual)[selected].sign().ne(a[selected].sign()).any(), "the clamp is exercised"
    assert (got * a >= 0).all(), "no token moves against its outcome"
    assert rollout.excluded == {4, 5, 6, 7}


def test_the_contrast_backs_the_right_answer_and_opposes_the_wrong_one(trainer):
    """Summed over the final answer's digits, the correct hint beats the wrong one for the right rows and loses for the
    wrong rows: swapping the two hints flips both."""
    rollout = right_and_wrong_rollout(trainer.processing_class)
    contrast, _ = make_plugin("rlcsd", **LEGACY).contrast(advantage_context(trainer, rollout, "rlcsd"))
    for row, sign in [(0, 1), (1, -1), (2, 1), (3, -1)]:
        ids = rollout.completion_ids[row]
        answer_digits = len(trainer.processing_class(rollout.completions[row].split("is ")[-1].rstrip("."),
                                                     add_special_tokens=False)["input_ids"])
        last = contrast[row, len(ids) - 1 - answer_digits : len(ids) - 1]  # the digits before the final "."
        assert sign * last.sum() > 1.0, (row, last)


@pytest.mark.mechanism
def test_the_contrast_points_to_the_right_answer_and_accuracy_holds():
    """The mechanism on the built-in model, short (the full figures come from benchmarks/mechanism.py)."""
    mechanism = load_script(BENCHMARK)
    shares = mechanism.signal_shares(problems=32, seed=0)
    assert shares["answer_correct"] > 1.0 > -1.0 > shares["answer_wrong"], shares
    assert_accuracy_holds(mechanism.RECIPE, steps=8, heldout=64, seed=0)
