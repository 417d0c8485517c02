"""Tests of the `roleanchor` plugin: the anchor's formula by hand, the conformance suite, the pipeline reward."""

import math
from types import SimpleNamespace

import pytest
import torch

from stackrl.testing.conformance import PluginConformance
from stackrl_roleanchor import RoleanchorConfig, anchor_distance, centred_utility, neutral_prompts
from stackrl_roleanchor.plugin import Roleanchor


class TestConformance(PluginConformance):
    plugin_name = "roleanchor"
    refused_settings = [
        ({"top_k": 1}, "must be at least 2"),
        ({"reference": "live"}, "must be one of initial, reference, not 'live'"),
        ({"solver": "oracle"}, "must be one of policy, reference, not 'oracle'"),
        ({"solver_tokens": 0}, "must be at least 1, not 0"),
    ]


def _logs(*rows):
    return torch.log(torch.tensor(rows, dtype=torch.float))


def test_centred_utility_by_hand():
    role, neutral = _logs([0.5, 0.25, 0.25]), _logs([0.25, 0.25, 0.5])
    # u = log 2, 0, -log 2; its mean over all three is 0
    got = centred_utility(role, neutral, torch.tensor([[0, 1, 2]]))
    assert torch.allclose(got, torch.tensor([[math.log(2), 0.0, -math.log(2)]]), atol=1e-6)
    # over the first two only: u = log 2, 0, mean log 2 / 2
    got = centred_utility(role, neutral, torch.tensor([[0, 1]]))
    assert torch.allclose(got, torch.tensor([[math.log(2) / 2, -math.log(2) / 2]]), atol=1e-6)


def test_anchor_is_zero_for_a_common_shift_and_squared_gap_otherwise():
    ref_role, ref_neutral = _logs([[0.5, 0.25, 0.25]]), _logs([[0.25, 0.25, 0.5]])
    mask = torch.ones(1, 1)
    # RL moves both prompts' predictions by the same reweighting: the contrast, hence the loss, is unchanged
    sharpen = torch.tensor([0.7, -0.2, 0.1])
    role = torch.log_softmax(ref_role + sharpen, -1)
    neutral = torch.log_softmax(ref_neutral + sharpen, -1)
    same = anchor_distance(role[None], neutral[None], ref_role[None], ref_neutral[None], mask, None)
    assert same.abs().max() < 1e-10
    # the role prompt stops shifting anything (role == neutral): gap = -(reference's centred utility)
    flat = anchor_distance(ref_neutral[None], ref_neutral[None], ref_role[None], ref_neutral[None], mask, None)
    assert torch.allclose(flat, torch.tensor([[(2 * math.log(2) ** 2) / 3]]), atol=1e-6)
    # top_k = 2: the reference's two likeliest role tokens (0, then 1 or 2): centred u_ref = +-log2/2
    two = anchor_distance(ref_neutral[None], ref_neutral[None], ref_role[None], ref_neutral[None], mask, 2)
    assert torch.allclose(two, torch.tensor([[math.log(2) ** 2 / 4]]), atol=1e-6)
    # masked positions contribute nothing
    assert anchor_distance(ref_neutral[None], ref_neutral[None], ref_role[None], ref_neutral[None],
                           torch.zeros(1, 1), None).item() == 0.0


def test_gradient_pushes_the_role_shift_back_toward_the_reference():
    ref_role, ref_neutral = _logs([0.5, 0.25, 0.25]), _logs([0.25, 0.25, 0.5])  # (1, 3): one row, one token
    logits = torch.zeros(1, 1, 3, requires_grad=True)  # the policy's role logits: no shift left (uniform)
    role = torch.log_softmax(logits, -1)
    loss = anchor_distance(role, ref_neutral[None], ref_role[None], ref_neutral[None], torch.ones(1, 1), None).sum()
    loss.backward()
    # descending raises token 0 (role shift +log 2 in the reference) and lowers token 2 (-log 2)
    step = -logits.grad[0, 0]
    assert step[0] > 0 > step[2]


def test_neutral_prompts_from_columns():
    rollout = SimpleNamespace(prompts=["What is 1 + 2?\nDecompose:\n", "x"],
                              columns={"question": ["What is 1 + 2?\n", None]})
    assert neutral_prompts(rollout, "{question}") == ["What is 1 + 2?\n", None]
    assert neutral_prompts(rollout, "{prompt}|") == ["What is 1 + 2?\nDecompose:\n|", "x|"]
    assert neutral_prompts(rollout, "{missing}") == [None, None]


def test_config_defaults():
    config = RoleanchorConfig()
    assert (config.neutral_template, config.top_k, config.reference, config.solver) == ("{question}", 20, "initial",
                                                                                         "policy")


def test_state_round_trip_keeps_the_snapshot_from_being_retaken():
    plugin = Roleanchor(RoleanchorConfig())
    taken = []
    ctx = SimpleNamespace(update_snapshot=lambda name, **kw: taken.append((name, kw)))
    plugin.train_begin(ctx)
    assert taken == [("roleanchor_initial", {"checkpoint": True})]
    resumed = Roleanchor(RoleanchorConfig())
    resumed.load_state_dict(plugin.state_dict())
    resumed.train_begin(ctx)
    assert len(taken) == 1
