"""RLSD: the outcome sets each token's direction, the teacher's log-ratio its magnitude."""

import dataclasses
from pathlib import Path

import pytest
import torch

from stackrl.blocks.tokensignals import REFERENCE, TokenSignals
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.heldout import advantage_context, assert_accuracy_holds, right_and_wrong_rollout
from stackrl.testing.repository import load_script
from stackrl_rlsd import RlsdConfig

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


class TestConformance(PluginConformance):
    plugin_name = "rlsd"
    refused_settings = [
        ({"clip": 0.0}, "rlsd.clip: must be positive, not 0.0"),
        ({"teacher": "ema"}, "rlsd.teacher: must be one of policy, reference, not 'ema'"),
        ({"form": "linear"}, "rlsd.form: must be one of exponential, bounded, not 'linear'"),
        ({"bound": 1.5}, r"rlsd.bound: must be in \(0, 1\), not 1.5"),
        ({"mix": 2}, r"rlsd.mix: must be in \[0, 1\], not 2"),
        ({"mix_decay_steps": -1}, "rlsd.mix_decay_steps: must be non-negative, not -1"),
    ]


@pytest.fixture
def trainer(built_in_trainer):
    return built_in_trainer(["rlsd"])


def _rollout(tokenizer):
    """A right and a wrong answer to one problem, the wrong one erring at "9"; the second group's advantages 0."""
    return right_and_wrong_rollout(tokenizer, advantages=(0.7, -0.7, 0.0, 0.0))


@pytest.mark.parametrize("normalize", [True, False])
def test_advantages_are_the_outcome_times_the_clipped_exponentiated_gap(trainer, normalize):
    rollout = _rollout(trainer.processing_class)
    ctx = advantage_context(trainer, rollout, "rlsd")
    got = make_plugin("rlsd", clip=1.5, normalize=normalize).reshape_advantages(rollout.advantages, ctx)
    gap, mask = TokenSignals.of(ctx).gap(REFERENCE), TokenSignals.of(ctx).mask
    sign = rollout.advantages.sign().unsqueeze(1)
    weights = torch.exp(sign * gap.clamp(-1.5, 1.5)) * mask
    if normalize:
        weights = weights * mask.sum(1, keepdim=True) / weights.sum(1, keepdim=True)
    assert torch.allclose(got, rollout.advantages.unsqueeze(1) * weights, atol=1e-6)
    assert (got[0] >= 0).all() and (got[1] <= 0).all(), "a weight never flips the outcome's direction"
    assert (got[2:] == 0).all(), "a zero advantage stays zero"
    if normalize:  # each sequence keeps GRPO's total credit
        assert torch.allclose(got.sum(1), rollout.advantages * mask.sum(1), atol=1e-5)


def test_by_default_each_sequence_keeps_its_credit(trainer):
    """``normalize`` defaults to true: with no setting given, each row's token advantages sum to GRPO's total."""
    rollout = _rollout(trainer.processing_class)
    ctx = advantage_context(trainer, rollout, "rlsd")
    got = make_plugin("rlsd").reshape_advantages(rollout.advantages, ctx)
    mask = TokenSignals.of(ctx).mask
    assert torch.allclose(got.sum(1), rollout.advantages * mask.sum(1), atol=1e-5)
    assert not torch.allclose(got, rollout.advantages.unsqueeze(1) * mask), "the weights do move credit"


@pytest.mark.parametrize(("step", "share"), [(0, 0.5), (25, 0.25), (50, 0.0), (80, 0.0)])
def test_the_bounded_form_keeps_weights_near_one_at_a_decaying_share(trainer, step, share):
    """The RLSD baseline of the RLCSD authors' code: clamp(exp(sign(A) gap), 0.8, 1.2) mixed in at half strength,
    the share falling linearly to 0 over 50 steps; no renormalisation."""
    rollout = _rollout(trainer.processing_class)
    ctx = dataclasses.replace(advantage_context(trainer, rollout, "rlsd"), step=step)
    got = make_plugin("rlsd", form="bounded", normalize=False).reshape_advantages(rollout.advantages, ctx)
    gap, mask = TokenSignals.of(ctx).gap(REFERENCE), TokenSignals.of(ctx).mask
    bounded = torch.exp(rollout.advantages.sign().unsqueeze(1) * gap).clamp(0.8, 1.2)
    expected = rollout.advantages.unsqueeze(1) * ((1 - share) + share * bounded) * mask
    assert torch.allclose(got, expected, atol=1e-6)
    if share:  # the bound is exercised: a gap beyond log 1.2 is cut there
        assert (gap[:2].abs() > 1).any() and got[:2].abs().max() <= 0.7 * (1 + 0.2 * share) + 1e-6


def test_the_wrong_rollout_is_blamed_most_where_the_teacher_rejects_it(trainer):
    """On the wrong row (4 * 2 = 9, then 9 + 3 = 12), the teacher shown 4 * 2 = 8 rejects the 9 carried into the
    second line: that token gets the most negative advantage. With the exponent's sign flipped, it would get the
    least."""
    rollout = _rollout(trainer.processing_class)
    got = make_plugin("rlsd").reshape_advantages(rollout.advantages, advantage_context(trainer, rollout, "rlsd"))
    wrong = rollout.completion_ids[1]
    carried = len(trainer.processing_class("4 * 2 = 9\n", add_special_tokens=False)["input_ids"])
    assert trainer.processing_class.decode(wrong[carried]) == "9"
    assert int(got[1, : len(wrong)].argmin()) == carried
    assert got[1, carried] < 3 * got[1, : len(wrong)].mean()


@pytest.mark.mechanism
def test_wrong_rollouts_are_blamed_off_their_correct_steps_and_accuracy_holds():
    """The mechanism on the built-in model, short (the full figures come from benchmarks/mechanism.py)."""
    mechanism = load_script(BENCHMARK)
    shares = mechanism.blame(problems=48, seed=0)
    assert shares["rows"] >= 10
    assert shares["prefix_rlsd"] < 0.8 * shares["prefix_grpo"], shares
    assert shares["rejected_rlsd"] > 2 * shares["rejected_grpo"], shares
    assert_accuracy_holds(mechanism.RECIPE, steps=8, heldout=64, seed=0)


def test_the_default_template_is_the_built_in_reference_layout():
    assert RlsdConfig().teacher_template == REFERENCE_TEMPLATE
