"""ECHO's formulas on hand-built tensors, the two hooks on a stub batch, and the conformance suite."""

import math
import pytest
import torch

from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_echo import shaping
from stackrl_echo.plugin import Echo


class TestConformance(PluginConformance):
    plugin_name = "echo"
    refused_settings = [({"alpha": -1.0}, "must be at least 0, not -1.0"),
                        ({"s_max": 0.0}, "must be positive, not 0.0"),
                        ({"mult_coeff": 0.5}, r"mult_coeff \* s_max must stay below 1"),
                        ({"confidence_topk": 0}, "must be at least 1, not 0"),
                        ({"tail_window": -1}, "must be at least 0"),
                        ({"eps_min": 0.3}, r"0 <= eps_min <= eps_max <= 1, not \[0.3, 0.2\]"),
                        ({"shaping": False, "adaptive_clip": False}, "the plugin would do nothing")]


def test_whiten_is_the_z_score_with_unbiased_variance_over_the_masked_tokens():
    values = torch.tensor([[1.0, 2.0, 3.0, 50.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    z = shaping.whiten(values, mask)  # mean 2, unbiased variance 1: padding ignored
    assert torch.allclose(z[0, :3], torch.tensor([-1.0, 0.0, 1.0]), atol=1e-6)
    with pytest.raises(ValueError, match="at least two"):
        shaping.whiten(values, torch.tensor([[1, 0, 0, 0]]))


def test_exploration_score_adds_the_entropy_and_unconfidence_z_scores_then_clamps():
    entropy = torch.tensor([[1.0, 2.0, 3.0]])
    confidence = torch.tensor([[0.9, 0.5, 0.1]])  # 1 - C: 0.1, 0.5, 0.9 -> z -1, 0, 1
    mask = torch.ones(1, 3)
    score = shaping.exploration_score(entropy, confidence, mask, alpha=1.0, beta=1.0, s_max=1.5)
    assert torch.allclose(score, torch.tensor([[-1.5, 0.0, 1.5]]), atol=1e-5)  # -2, 0, 2 clamped
    score = shaping.exploration_score(entropy, confidence, mask, alpha=0.5, beta=0.0, s_max=2.0)
    assert torch.allclose(score, torch.tensor([[-0.5, 0.0, 0.5]]), atol=1e-5)


def test_hybrid_advantage_scales_by_one_plus_a_s_and_adds_lambda_times_s_less_its_group_mean():
    advantages = torch.tensor([2.0, -1.0])
    score = torch.tensor([[-1.5, 0.0, 1.5], [1.0, 2.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    group = torch.tensor([0, 0])
    shaped = shaping.hybrid_advantages(advantages, score, mask, group, mult_coeff=0.1, add_coeff=0.0)
    assert torch.allclose(shaped, torch.tensor([[1.7, 2.0, 2.3], [-1.1, -1.2, 0.0]]))
    # The group's mean S over its five tokens is 3 / 5 = 0.6.
    shaped = shaping.hybrid_advantages(advantages, score, mask, group, mult_coeff=0.0, add_coeff=1.0)
    assert torch.allclose(shaped, torch.tensor([[-0.1, 1.4, 2.9], [-0.6, 0.4, 0.0]]), atol=1e-6)
    per_token = shaping.hybrid_advantages(advantages.unsqueeze(1).expand(2, 3), score, mask, group,
                                          mult_coeff=0.1, add_coeff=0.0)
    assert torch.allclose(per_token, torch.tensor([[1.7, 2.0, 2.3], [-1.1, -1.2, 0.0]]))


def test_tail_confidence_is_the_mean_over_the_last_window_tokens_of_each_completion():
    confidence = torch.tensor([[0.2, 0.4, 0.6, 0.8], [0.2, 0.4, 0.9, 0.9], [0.5, 0.5, 0.5, 0.5]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]])
    assert torch.allclose(shaping.tail_confidence(confidence, mask, 2), torch.tensor([0.7, 0.3, 0.0]))
    assert torch.allclose(shaping.tail_confidence(confidence, mask, 0), torch.tensor([0.5, 0.3, 0.0]))
    assert torch.allclose(shaping.tail_confidence(confidence, mask, 16), torch.tensor([0.5, 0.3, 0.0]))


def test_clip_epsilon_widens_as_tail_confidence_falls():
    eps = shaping.clip_epsilon(torch.tensor([1.0, 0.5, 0.0]), eps_min=0.05, eps_max=0.2, kappa=4.0)
    sigmoid = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    expected = [0.05 + 0.15 * sigmoid(4 * (1 - c)) for c in (1.0, 0.5, 0.0)]
    assert torch.allclose(eps, torch.tensor(expected))
    assert eps[0] == pytest.approx(0.125) and eps[2] == pytest.approx(0.1973, abs=1e-4)


class Rows:
    """A rollout of n rows in groups of two."""

    def __init__(self, n):
        self.n, self.group_index = n, torch.arange(n) // 2

    def __len__(self):
        return self.n


class Batch:
    """The advantage stage's context for two groups of two rows, its token signals given by hand."""

    def __init__(self, lengths=(3, 3, 2, 3)):
        self.rollout = Rows(len(lengths))
        self.training, self.logged, self.acted_on = True, {}, None
        self.mask = (torch.arange(3).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).float()

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, *, of, hint=None):
        self.acted_on = (n, of)


ENTROPY = torch.tensor([[0.5, 2.0, 1.0], [0.1, 0.1, 3.0], [1.0, 1.5, 0.0], [0.2, 0.3, 0.4]])
CONFIDENCE = torch.tensor([[0.9, 0.4, 0.6], [0.95, 0.9, 0.2], [0.5, 0.5, 0.0], [0.99, 0.98, 0.97]])


def test_the_hooks_shape_the_advantages_and_set_each_rows_clip_from_its_own_tokens(monkeypatch):
    plugin = make_plugin("echo", tail_window=2)
    batch = Batch()
    monkeypatch.setattr(Echo, "signals", lambda self, ctx: (ENTROPY, CONFIDENCE, batch.mask))
    advantages = torch.tensor([1.0, -1.0, 0.0, 0.5])
    shaped = plugin.reshape_advantages(advantages, batch)
    score = shaping.exploration_score(ENTROPY, CONFIDENCE, batch.mask, alpha=1.0, beta=1.0, s_max=2.0)
    assert torch.allclose(shaped, advantages.unsqueeze(1) * (1 + 0.1 * score) * batch.mask)
    # Uncertain tokens (high entropy, low confidence) weigh more, whatever the advantage's sign.
    assert shaped[0, 1] > 1.0 > shaped[0, 0] and shaped[1, 2] < -1.0 < shaped[1, 0]
    assert shaped[2].abs().sum() == 0  # a zero advantage stays zero
    config = (torch.full((4,), 0.2), torch.full((4,), 0.28))
    low, high = plugin.clip_range(config, batch)
    tails = torch.tensor([(0.4 + 0.6) / 2, (0.9 + 0.2) / 2, 0.5, (0.98 + 0.97) / 2])
    expected = 0.05 + 0.15 * torch.sigmoid(4 * (1 - tails))
    assert torch.allclose(low, expected) and torch.allclose(high, expected)
    assert low[0] > low[1] > low[3]  # the less sure the completion's end, the wider its range
    assert batch.acted_on == (4, 4)


def test_each_part_switches_off_on_its_own(monkeypatch):
    batch = Batch()
    monkeypatch.setattr(Echo, "signals", lambda self, ctx: (ENTROPY, CONFIDENCE, batch.mask))
    advantages = torch.tensor([1.0, -1.0, 0.0, 0.0])
    clip_only = make_plugin("echo", shaping=False)
    assert clip_only.reshape_advantages(advantages, batch) is None
    assert clip_only.clip_range((torch.full((4,), 0.2),) * 2, batch) is not None
    shaping_only = make_plugin("echo", adaptive_clip=False)
    assert shaping_only.reshape_advantages(advantages, batch) is not None
    assert shaping_only.clip_range((torch.full((4,), 0.2),) * 2, batch) is None
    assert batch.acted_on == (2, 4)  # the rows whose advantage changed: the two of nonzero advantage


def test_a_per_token_range_from_an_earlier_plugin_is_replaced_on_every_token_of_a_trained_row(monkeypatch):
    batch = Batch(lengths=(3, 3, 0, 3))
    monkeypatch.setattr(Echo, "signals", lambda self, ctx: (ENTROPY, CONFIDENCE, batch.mask))
    plugin = make_plugin("echo")
    low, high = plugin.clip_range((torch.full((4, 3), 0.2), torch.full((4,), 0.3)), batch)
    assert low.shape == (4, 3) and high.shape == (4,)
    assert (low[2] == 0.2).all() and high[2] == 0.3  # an empty completion keeps the range it had
    assert torch.allclose(low[0], high[0].expand(3)) and 0.125 <= float(high[0]) <= 0.2
