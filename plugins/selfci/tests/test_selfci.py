"""SELFCI: the loss is the weighted sum of two reverse KLs, to a utility teacher and a privacy teacher, written
through their product of experts; the two teacher contexts come from the row's feedback columns."""

import pytest
import torch

from stackrl import ConfigError
from stackrl.blocks.teacher import reverse_kl
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.conformance import PluginConformance
from stackrl.policy import _SNAPSHOTS
from stackrl.run import build_trainer
from stackrl.testing.fixtures import StopAt, make_plugin, train_steps
from stackrl_selfci import Selfci, SelfciConfig, complementary_kl, product_of_experts

CPU_SETTINGS = {"utility_template": REFERENCE_TEMPLATE,
                "privacy_template": "Do not state the result of the first step.\n\n{prompt}"}


class TestConformance(PluginConformance):
    plugin_name = "selfci"
    plugin_settings = {"selfci": CPU_SETTINGS}
    refused_settings = [
        ({"utility_weight": -1.0}, "must be >= 0"),
        ({"teacher": "ema"}, "must be one of initial, reference, policy"),
    ]


# -- the product of experts, by hand ------------------------------------------------------------------------------


def test_the_product_of_two_opposite_teachers_is_their_normalised_geometric_mean():
    utility = torch.tensor([[0.8, 0.2]]).log()
    privacy = torch.tensor([[0.2, 0.8]]).log()
    # sqrt(0.8 * 0.2) = 0.4 for both tokens: renormalised, one half each.
    assert torch.allclose(product_of_experts(utility, privacy, 0.5).exp(), torch.tensor([[0.5, 0.5]]))
    # Utility weighted 2, privacy 1: 0.8^(2/3) 0.2^(1/3) against 0.2^(2/3) 0.8^(1/3), i.e. odds 4^(1/3) : 1.
    odds = 4 ** (1 / 3)
    want = torch.tensor([[odds / (1 + odds), 1 / (1 + odds)]])
    assert torch.allclose(product_of_experts(utility, privacy, 2 / 3).exp(), want, atol=1e-6)


def test_the_product_is_zero_where_either_teacher_is():
    utility = torch.tensor([[0.5, 0.5, 0.0]]).log()
    privacy = torch.tensor([[0.0, 0.5, 0.5]]).log()
    assert torch.allclose(product_of_experts(utility, privacy, 0.5).exp(), torch.tensor([[0.0, 1.0, 0.0]]))


@pytest.mark.parametrize("utility_weight, privacy_weight", [(1.0, 1.0), (2.0, 1.0), (0.3, 0.2), (0.0, 1.0), (1.0, 0.0)])
def test_the_loss_is_the_weighted_sum_of_the_two_reverse_kls(utility_weight, privacy_weight):
    generator = torch.Generator().manual_seed(0)
    student, utility, privacy = (torch.randn(5, 7, generator=generator).log_softmax(-1) for _ in range(3))
    got = complementary_kl(student, utility, privacy, utility_weight=utility_weight, privacy_weight=privacy_weight)
    total = utility_weight + privacy_weight
    want = (utility_weight * reverse_kl(student, utility) + privacy_weight * reverse_kl(student, privacy)) / max(total, 1)
    assert torch.allclose(got, want, atol=1e-5)


def test_the_gradient_points_at_the_product_and_vanishes_there():
    generator = torch.Generator().manual_seed(1)
    utility, privacy = (torch.randn(4, 6, generator=generator).log_softmax(-1) for _ in range(2))
    logits = torch.randn(4, 6, generator=generator, requires_grad=True)
    loss = complementary_kl(logits.log_softmax(-1), utility, privacy, utility_weight=2.0, privacy_weight=1.0).sum()
    (got,) = torch.autograd.grad(loss, logits)
    # The normalised p_u^(2/3) p_p^(1/3), written out in probability space.
    product = utility.exp() ** (2 / 3) * privacy.exp() ** (1 / 3)
    product = product / product.sum(-1, keepdim=True)
    toward = logits.detach().clone().requires_grad_(True)
    # (2 KL_u + 1 KL_p) / max(3, 1) = (2/3) KL_u + (1/3) KL_p = KL(. || product) - log Z.
    (want,) = torch.autograd.grad(reverse_kl(toward.log_softmax(-1), product.log()).sum(), toward)
    assert torch.allclose(got, want, atol=1e-5)
    at_target = product.log().clone().requires_grad_(True)
    loss = complementary_kl(at_target.log_softmax(-1), utility, privacy, utility_weight=2.0, privacy_weight=1.0).sum()
    (still,) = torch.autograd.grad(loss, at_target)
    assert still.abs().max() < 1e-5
    # Neither teacher alone, nor their arithmetic mean, is where it vanishes.
    for other in (utility, privacy, ((utility.exp() + privacy.exp()) / 2).log()):
        at_other = other.clone().requires_grad_(True)
        loss = complementary_kl(at_other.log_softmax(-1), utility, privacy, utility_weight=2.0, privacy_weight=1.0)
        (away,) = torch.autograd.grad(loss.sum(), at_other)
        assert away.abs().max() > 1e-3


# -- settings ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"utility_weight": -0.5}, "selfci.utility_weight: must be >= 0"),
        ({"privacy_weight": -1.0}, "selfci.privacy_weight: must be >= 0"),
        ({"utility_weight": 0.0, "privacy_weight": 0.0}, "selfci.privacy_weight: utility_weight \\+ privacy_weight"),
        ({"privacy_template": SelfciConfig().utility_template}, "selfci.privacy_template: is the utility_template"),
        ({"teacher": "ema"}, "selfci.teacher: must be one of initial, reference, policy"),
        ({"temperature": 0.0}, "selfci.temperature: must be positive"),
    ],
)
def test_bad_settings_name_their_key(settings, message):
    with pytest.raises(ConfigError, match=message):
        Selfci(SelfciConfig(**settings))


# -- the frozen teacher --------------------------------------------------------------------------------------------


class Steps:
    """A step context that records the snapshots it is asked to take."""

    def __init__(self, step):
        self.step, self.taken = step, []

    def update_snapshot(self, name, decay=0.0, *, checkpoint=False):
        self.taken.append((name, decay, checkpoint))


@pytest.mark.parametrize("teacher", ["initial", "reference", "policy"])
def test_the_initial_teacher_is_taken_once_checkpointed_and_not_retaken_on_resume(teacher):
    plugin = make_plugin("selfci", teacher=teacher)
    start, resumed = Steps(0), Steps(7)
    plugin.train_begin(start)
    plugin.train_begin(resumed)
    assert start.taken == ([("selfci", 0.0, True)] if teacher == "initial" else [])
    assert resumed.taken == []  # the checkpointed copy comes back with the checkpoint
    assert plugin.teacher_model == ("selfci" if teacher == "initial" else teacher)


def test_a_resumed_run_distils_toward_the_weights_training_began_with(make_config, tmp_path):
    """Stopped after step 2 and resumed: the teacher is still the starting weights, not those of step 2."""
    config = make_config(["selfci"], selfci=CPU_SETTINGS, output_dir=str(tmp_path / "run"),
                         trainer={"save_strategy": "steps", "save_steps": 2, "max_steps": 4, "learning_rate": 1e-3})
    start = {n: p.detach().clone() for n, p in build_trainer(config).model.named_parameters()}
    train_steps(config, callbacks=[StopAt(2)])
    trainer = train_steps(config, resume=True)
    moved = max((p.detach() - start[n]).abs().max().item() for n, p in trainer.model.named_parameters())
    assert moved > 1e-4, "the policy moved"
    kept = dict(_SNAPSHOTS[trainer]["selfci"].model.named_parameters())
    for name, weights in start.items():
        assert torch.equal(kept[name], weights), name
