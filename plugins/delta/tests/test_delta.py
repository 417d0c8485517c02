"""Tests of the `delta` plugin: the host's conformance suite, then the coefficient's rules on hand-built features."""

import math

import pytest
import torch

from stackrl.testing.conformance import PluginConformance
from stackrl_delta.coefficients import centroid, group_coefficients, output_gradients, soft_assignment


class TestConformance(PluginConformance):
    plugin_name = "delta"
    refused_settings = [({"temperature": 0.0}, "must be positive, not 0.0"),
                        ({"topk": 0}, "must be a positive integer or null, not 0")]


def sig(x):
    return 1 / (1 + math.exp(-x))


def test_output_gradient_is_the_sampled_one_hot_less_the_distribution():
    probs = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    delta = output_gradients(torch.tensor([0, 2]), probs)
    assert torch.allclose(delta, torch.tensor([[0.5, -0.3, -0.2], [-0.1, -0.1, 0.2]]))


def test_centroid_is_weighted_by_the_advantage():
    # Two positive tokens with features e1 h and e4 h (h = 1), advantages 3 and 1: the centroid is (3 e1 + e4) / 4.
    delta = torch.eye(4)[[0, 3]]
    center = centroid(delta, torch.ones(2, 1), torch.tensor([3.0, 1.0]))
    assert torch.allclose(center[:, 0], torch.tensor([0.75, 0.0, 0.0, 0.25]))
    assert torch.equal(centroid(delta, torch.ones(2, 1), torch.zeros(2)), torch.zeros(4, 1))


def test_soft_assignment_is_one_half_for_a_shared_direction():
    out = soft_assignment(torch.tensor([0.5, 0.5, 0.0, 0.0]), torch.tensor([0.0, 0.5, 0.5, 0.0]), temperature=0.5)
    assert torch.allclose(out, torch.tensor([sig(2.0), 0.5, sig(-2.0), 0.5]))


def hand_group():
    """Positive row [p, s], negative row [n, s]: p and n are side-specific, s (a formatting token) is shared."""
    p, n, s = torch.eye(3)
    delta = torch.stack([p, s, n, s])
    return delta, torch.ones(4, 1), torch.tensor([1.0, 1.0, -1.0, -1.0])


def test_a_shared_token_gets_a_smaller_coefficient_than_a_side_specific_one():
    delta, hidden, advantages = hand_group()
    w = group_coefficients(delta, hidden, advantages, temperature=0.5)
    # c+ = (p + s)/2, c- = (n + s)/2: p projects 1/2 on its side, 0 on the other (score 1); s 1/2 on both (score 0).
    q = sig(2.0)
    expected = torch.tensor([2 * q / (q + 0.5), 1 / (q + 0.5), 2 * q / (q + 0.5), 1 / (q + 0.5)])
    assert torch.allclose(w, expected)
    assert w[0] > 1 > w[1] and w[2] > 1 > w[3]
    # Self-normalised: each side's coefficients sum to its token count.
    assert torch.isclose(w[:2].sum(), torch.tensor(2.0)) and torch.isclose(w[2:].sum(), torch.tensor(2.0))


def test_a_token_that_looks_like_the_other_side_is_downweighted_most():
    p, n, s = torch.eye(3)
    delta = torch.stack([p, n, n, n])  # the positive row holds one token in the negative side's direction
    w = group_coefficients(delta, torch.ones(4, 1), torch.tensor([1.0, 1.0, -1.0, -1.0]), temperature=0.5)
    # c+ = (p + n)/2, c- = n: p scores 1; the positive row's n projects 1/2 on its side, 1 on the other (score -1/3).
    own, q = sig(2.0), sig(-2.0 / 3.0)
    assert torch.allclose(w[:2], torch.tensor([2 * own / (own + q), 2 * q / (own + q)]), atol=1e-4)
    assert w[1] < 1 < w[0]


def test_zero_advantage_tokens_keep_coefficient_one():
    delta, hidden, _ = hand_group()
    w = group_coefficients(delta, hidden, torch.tensor([1.0, 1.0, 0.0, 0.0]), temperature=0.5)
    assert torch.equal(w[2:], torch.ones(2))


@pytest.mark.parametrize("temperature", [0.25, 1.0])
def test_lower_temperature_sharpens_the_contrast(temperature):
    delta, hidden, advantages = hand_group()
    sharp = group_coefficients(delta, hidden, advantages, temperature=temperature / 2)
    soft = group_coefficients(delta, hidden, advantages, temperature=temperature)
    assert sharp[0] / sharp[1] > soft[0] / soft[1]


def test_centroids_weigh_each_token_by_its_advantage():
    # Positive: a (advantage 3), b (advantage 1); negative: c in b's direction, d (advantages -1).
    a, b, d = torch.eye(3)
    delta = torch.stack([a, b, b, d])
    w = group_coefficients(delta, torch.ones(4, 1), torch.tensor([3.0, 1.0, -1.0, -1.0]), temperature=0.5)
    # c+ = (3a + b)/4, c- = (b + d)/2: b projects 1/4 on its side and 1/2 on the other (score -1/3); unweighted,
    # c+ = (a + b)/2 would give it 1/2 on both (score 0). a scores 1.
    qa, qb = sig(2.0), sig(-2.0 / 3.0)
    assert torch.allclose(w[:2], torch.tensor([2 * qa / (qa + qb), 2 * qb / (qa + qb)]), atol=1e-4)


def test_top_k_features_match_the_whole_vocabulary_where_k_covers_it():
    from stackrl import Scores
    from stackrl_delta.plugin import features

    torch.manual_seed(0)
    logp = torch.log_softmax(torch.randn(2, 3, 5), -1)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    hidden = torch.randn(2, 3, 4)
    ids = [[0, 3, 4], [2, 2]]
    chosen = mask.bool()
    top, top_ids = logp.topk(5, dim=-1)
    full = Scores(logprobs=logp[..., 0], mask=mask, vocab_logprobs=logp, hidden_states=hidden)
    topk = Scores(logprobs=logp[..., 0], mask=mask, topk_logprobs=top, topk_ids=top_ids, hidden_states=hidden)
    d_full, h_full = features(full, slice(0, 2), chosen, ids)
    d_top, h_top = features(topk, slice(0, 2), chosen, ids)
    assert torch.allclose(d_full, d_top, atol=1e-6) and torch.equal(h_full, h_top)
    # Sampled row 0's first token is id 0: its e_y - p has 1 - p(0) there.
    assert torch.isclose(d_full[0, 0], 1 - logp[0, 0, 0].exp())
    # With k = 1 the subspace is the union of the top ids and the sampled ones; the dropped mass is gone.
    one, one_ids = logp.topk(1, dim=-1)
    d_one, _ = features(Scores(logprobs=logp[..., 0], mask=mask, topk_logprobs=one, topk_ids=one_ids,
                               hidden_states=hidden), slice(0, 2), chosen, ids)
    support = torch.unique(torch.cat([one_ids[chosen].flatten(), torch.tensor([0, 3, 4, 2, 2])]))
    assert d_one.shape == (5, len(support))
