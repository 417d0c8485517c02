"""Advantage Alignment on the built-in game model, one real step of IPD self-play (benchmarks/mechanism.py, short):
the per-token advantages TRL's loss receives are, on every action's tokens, the hand computation from both seats'
turn advantages, and 0 on the observations between."""

from pathlib import Path

import pytest
import torch

from stackrl.blocks.env import EPISODE_COLUMN, SEAT_COLUMN, TURN_REWARDS_COLUMN
from stackrl.blocks.turns import SEGMENTS_COLUMN
from stackrl.testing.repository import load_script
from stackrl.trainer import ROW_INDEX

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def by_hand(rewards, seats, episodes, group_size, *, beta, gamma, scale):
    """Each row's per-turn credit, written out from the definitions: returns to go (discount 1), less the mean of the
    same turn of the other rows of the same seat in the group; plus beta * sum_{k<=t} gamma^(t-k) A_i(k) * A_j(t),
    j the other row of the row's episode."""
    returns = []
    for row in rewards:
        returns.append([sum(r / scale for r in row[t:]) for t in range(len(row))])
    own = []
    for i, row in enumerate(returns):
        group = range(i - i % group_size, i - i % group_size + group_size)
        peers = [j for j in group if j != i and seats[j] == seats[i]]
        own.append([g - sum(returns[j][t] for j in peers if len(returns[j]) > t)
                    / max(1, sum(len(returns[j]) > t for j in peers)) for t, g in enumerate(row)])
    credits = []
    for i, a in enumerate(own):
        (j,) = [j for j in range(len(own)) if j != i and episodes[j] == episodes[i]]
        credits.append([a[t] + beta * sum(gamma ** (t - k) * a[k] for k in range(t + 1))
                        * (own[j][t] if t < len(own[j]) else 0.0) for t in range(len(a))])
    return own, credits


def test_the_loss_receives_own_plus_beta_times_discounted_past_times_the_opponents_advantage():
    # one step of 2 prompts x 4 episodes x 2 seats
    _, trainer = load_script(BENCHMARK).run("advalign", seed=0, steps=1,
                                            overrides=["trainer.per_device_train_batch_size=16"])
    rollout, config = trainer._rollouts["train"], trainer.plugins.plugins["advalign"].config
    columns = rollout.columns
    own, credits = by_hand(columns[TURN_REWARDS_COLUMN], columns[SEAT_COLUMN], columns[EPISODE_COLUMN],
                           rollout.group_size, beta=config.beta, gamma=config.gamma, scale=config.reward_scale)
    shaping = [c - a for row_c, row_a in zip(credits, own) for c, a in zip(row_c, row_a)]
    assert max(abs(s) for s in shaping) > 0.05, "the opponent term moved some action's advantage"
    assert sum(len(row) for row in own) >= 4 * len(own), "episodes of several rounds"

    batch = trainer._buffered_inputs[0]
    order = batch[ROW_INDEX].argsort()
    received = batch["advantages"][order]
    assert received.dim() == 2, "per-token advantages reach the loss"
    for row, segments in enumerate(columns[SEGMENTS_COLUMN]):
        want = torch.zeros(len(rollout.completion_ids[row]))
        for segment, value in zip(segments, credits[row], strict=True):
            want[segment.start : segment.end] = value
        got = received[row, : len(want)]
        assert torch.allclose(got, want, atol=1e-5), (row, got, want)
