"""TRLOO: hand-computed leave-one-out advantages, their difference to GRPO's, and the hook on a hand-built rollout."""

import pytest
import torch

from stackrl.context import AdvantageContext, Rollout
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import grpo_advantages
from stackrl_trloo import Trloo, leave_one_out

NAN = float("nan")


class TestConformance(PluginConformance):
    plugin_name = "trloo"
    refused_settings = [
        ({"lone": "half"}, "trloo.lone: must be one of reward, zero, not 'half'"),
    ]


@pytest.mark.parametrize(
    ("rewards", "size", "expected"),
    [
        # one right of four: 1 - 0 for it, 0 - 1/3 for each wrong one (GRPO centred: 0.75 and -0.25)
        ([1.0, 0.0, 0.0, 0.0], 4, [1.0, -1 / 3, -1 / 3, -1 / 3]),
        # two groups of three: 0.2 - (0.5 + 1.1) / 2, 0.5 - (0.2 + 1.1) / 2, 1.1 - (0.2 + 0.5) / 2; 0 - (3 + 1) / 2, ...
        ([0.2, 0.5, 1.1, 0.0, 3.0, 1.0], 3, [-0.6, -0.15, 0.75, -2.0, 2.5, -0.5]),
    ],
)
def test_each_reward_minus_the_mean_of_the_others(rewards, size, expected):
    torch.testing.assert_close(leave_one_out(torch.tensor(rewards), size), torch.tensor(expected))


def test_all_equal_rewards_give_no_advantage():
    torch.testing.assert_close(leave_one_out(torch.tensor([1.0] * 4 + [0.3] * 4), 4), torch.zeros(8))


def test_a_lone_scored_completion_gets_its_reward_or_nothing():
    """One scored row in its group: the authors' baseline of 0 (its reward), or 0 with lone="zero"; unscored rows
    get 0 and stay out of the others' baselines."""
    rewards = torch.tensor([NAN, 0.7, NAN, NAN, 1.0, NAN, 0.0, NAN])
    torch.testing.assert_close(leave_one_out(rewards, 4), torch.tensor([0.0, 0.7, 0, 0, 1.0, 0, -1.0, 0]))
    torch.testing.assert_close(leave_one_out(rewards, 4, lone="zero"), torch.tensor([0.0, 0, 0, 0, 1.0, 0, -1.0, 0]))


@pytest.mark.parametrize("size", [2, 3, 8])
def test_it_is_grpo_centred_reward_scaled_by_n_over_n_minus_one_and_not_grpo(size):
    """The difference to GRPO: no self-inclusion means GRPO's centred reward times n / (n - 1), without the std."""
    rewards = torch.rand(4 * size, generator=torch.Generator().manual_seed(size))
    groups = rewards.view(-1, size)
    centred = (groups - groups.mean(1, keepdim=True)).flatten()
    advantages = leave_one_out(rewards, size)
    torch.testing.assert_close(advantages, centred * size / (size - 1))
    assert not torch.allclose(advantages, grpo_advantages(rewards, size), atol=1e-3)


def test_the_hook_leaves_unscored_rows_out_and_reports_the_rows_it_compared():
    """Rows no component scored count neither in the baseline nor as acted on; the total reward is what is compared."""
    acted = []
    rollout = Rollout(
        prompts=["q"] * 4, completions=["a"] * 4, prompt_ids=[[1]] * 4, completion_ids=[[2]] * 4, columns={},
        group_size=2,
        rewards={"exact_match": torch.tensor([1.0, 0.0, NAN, 1.0]), "other": torch.tensor([0.5, 0.0, NAN, NAN])},
    )
    ctx = AdvantageContext(step=0, tokenizer=None, policy=None, _log=lambda *_: None, _plugin="trloo",
                           _acted=lambda *args: acted.append(args[1:3]), rollout=rollout,
                           total_reward=torch.tensor([1.5, 0.0, 0.0, 1.0]))
    torch.testing.assert_close(Trloo().estimate_advantages(ctx), torch.tensor([1.5, -1.5, 0.0, 1.0]))
    assert acted == [(2.0, 4.0)]

