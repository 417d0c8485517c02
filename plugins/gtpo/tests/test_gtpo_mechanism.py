"""GTPO on the built-in code model, one real step of multi-turn episodes with the session interpreter
(benchmarks/mechanism.py, short): the per-token advantages TRL's loss receives are, on every action's tokens, the
hand computation of the normalised discounted return of its turn, with the failed rows' outcomes shaped by their
code's similarity to the group's successful code, and 0 on the observations between."""

from pathlib import Path

import pytest
import torch

from stackrl.blocks.env import RETURN_COLUMN, TURN_REWARDS_COLUMN
from stackrl.blocks.turns import SEGMENTS_COLUMN
from stackrl.testing.repository import load_script
from stackrl.trainer import ROW_INDEX

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def lcs(a, b):
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


def by_hand(paid, totals, codes, group_size, *, gamma, weight, success):
    """Each row's per-turn advantages, written out from the definitions."""
    import re

    tokens = [re.findall(r"\w+|[^\w\s]", code) for code in codes]
    sim = lambda a, b: 2 * lcs(a, b) / (len(a) + len(b)) if a and b else 0.0  # noqa: E731
    rewards, shaped = [], []
    for i, row in enumerate(paid):
        group = range(i - i % group_size, i - i % group_size + group_size)
        good = [j for j in group if totals[j] >= success]
        term = weight * sum(sim(tokens[i], tokens[j]) for j in good) / len(good) if good and totals[i] < success else 0.0
        shaped.append(term)
        last = totals[i] - sum(row[:-1]) + term
        rewards.append(list(row[:-1]) + [last])
    returns = [[sum(gamma ** (k - t) * r[k] for k in range(t, len(r))) for t in range(len(r))] for r in rewards]
    advantages = []
    for i, row in enumerate(returns):
        group = range(i - i % group_size, i - i % group_size + group_size)
        out = []
        for t, value in enumerate(row):
            peers = torch.tensor([returns[j][t] for j in group if len(returns[j]) > t])
            out.append(0.0 if len(peers) < 2 else ((value - peers.mean()) / (peers.std() + 1e-4)).item())
        advantages.append(out)
    return advantages, shaped, returns


def test_the_loss_receives_each_turns_normalised_discounted_return_with_the_shaped_outcome():
    # one step of 4 prompts x 8 episodes, up to 3 cells each
    _, trainer = load_script(BENCHMARK).run("gtpo", seed=0, steps=1,
                                            overrides=["trainer.per_device_train_batch_size=32"])
    rollout, config = trainer._rollouts["train"], trainer.plugins.plugins["gtpo"].config
    columns = rollout.columns
    actions = [[s for s in row if s.kind == "action"] for row in columns[SEGMENTS_COLUMN]]
    paid = columns[TURN_REWARDS_COLUMN]
    totals = [float(r) for r in columns[RETURN_COLUMN]]  # the recipe's only reward component (env, weight 1)
    codes = ["\n".join(s.text for s in row) for row in actions]
    advantages, shaped, returns = by_hand(paid, totals, codes, rollout.group_size, gamma=config.gamma,
                                          weight=config.shaping_weight, success=config.success)
    # the step exercises every rule: several-turn episodes whose last turn pays, shaped failures, successes
    assert sum(s > 0.05 for s in shaped) >= 2, "some failed episodes were shaped by their code"
    assert any(len(r) > 1 and r[0] != r[-1] for r in returns), "a discounted return differs across an episode's turns"
    assert 0 < sum(t >= 1.0 for t in totals) < len(totals), "groups of successes and failures"

    batch = trainer._buffered_inputs[0]
    order = batch[ROW_INDEX].argsort()
    received = batch["advantages"][order]
    assert received.dim() == 2, "per-token advantages reach the loss"
    for row, segments in enumerate(actions):
        want = torch.zeros(len(rollout.completion_ids[row]))
        for segment, value in zip(segments, advantages[row], strict=True):
            want[segment.start : segment.end] = value
        got = received[row, : len(want)]
        assert torch.allclose(got, want, atol=1e-4), (row, got, want)
