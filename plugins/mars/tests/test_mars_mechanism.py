"""MARS's mechanism in a real step: one step of configs/recipes/mars-cpu.yaml (stackrl/arith-games playing
tic-tac-toe against itself), and the per-token advantages TRL's loss received, computed again by hand from the
rollout's columns. The full benchmark (win rates against GRPO) is benchmarks/mechanism.py."""

import statistics
from pathlib import Path

import pytest
import torch

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
GAMMA = 0.8  # not the authors' 1.0: a discount that was ignored would change every earlier move's advantage


def by_hand(turn_rewards, seats, spans, gamma):
    """Each row's per-token advantages: every move of a seat gets its discounted return from that move on, less the
    mean of that seat's move returns over the batch, over their (unbiased) deviation + 1e-4; other tokens 0."""
    returns = []
    for rewards in turn_rewards:
        row = [sum(gamma ** (j - k) * rewards[j] for j in range(k, len(rewards))) for k in range(len(rewards))]
        returns.append(row)
    stats = {}
    for seat in set(seats):
        pooled = [g for row, s in zip(returns, seats) if s == seat for g in row]
        stats[seat] = (statistics.mean(pooled), statistics.stdev(pooled))
    rows = []
    for row, seat, row_spans in zip(returns, seats, spans):
        mean, std = stats[seat]
        rows.append([((g - mean) / (std + 1e-4), start, end) for g, (start, end) in zip(row, row_spans)])
    return rows


def test_trl_receives_each_moves_return_normalised_within_its_seat():
    rollout, seen = load_script(BENCHMARK).traced_step(seed=0, overrides=[f"mars.gamma={GAMMA}"])
    turn_rewards, seats = rollout.columns["env_turn_rewards"], rollout.columns["env_seat"]
    spans = [[(s.start, s.end) for s in row] for row in rollout.columns["segments"]]
    # The step tells the rules apart: both seats, rows of several moves, and seats whose results differ.
    assert set(seats) == {0, 1} and max(len(r) for r in turn_rewards) >= 3
    returns = {seat: [sum(r) for r, s in zip(turn_rewards, seats) if s == seat] for seat in (0, 1)}
    assert statistics.mean(returns[0]) != statistics.mean(returns[1]), returns
    want = by_hand(turn_rewards, seats, spans, GAMMA)

    # TRL may shuffle and split the batch, and two rows can hold the same tokens (a one-move row of each of two
    # episodes that ended alike on the board but not in the result): each row TRL trained must take up one unused
    # row of the rollout with its tokens and the advantages computed by hand for it.
    unused = {}
    for j, row in enumerate(want):
        expected = torch.zeros(rollout.completion_mask().size(1))
        for value, start, end in row:
            expected[start:end] = value
        unused.setdefault((tuple(rollout.prompt_ids[j]), tuple(rollout.completion_ids[j])), []).append(expected)
    trained = 0
    for inputs in seen:
        for i in range(inputs["completion_ids"].size(0)):
            prompt = tuple(inputs["prompt_ids"][i][inputs["prompt_mask"][i].bool()].tolist())
            n = int(inputs["completion_mask"][i].sum())
            candidates = unused.get((prompt, tuple(inputs["completion_ids"][i, :n].tolist())), [])
            got = inputs["advantages"][i]
            match = next((k for k, e in enumerate(candidates) if torch.allclose(got[: e.numel()], e, atol=1e-5)), None)
            assert match is not None, (got[:n], candidates)
            assert not got[candidates[match].numel():].any()  # padding
            candidates.pop(match)
            trained += 1
    assert trained == len(rollout)
    # Each seat's moves average to 0 within the seat: the other seat's results are not its baseline.
    for seat in (0, 1):
        moves = [value for row, s in zip(want, seats) if s == seat for value, _, _ in row]
        assert abs(statistics.mean(moves)) < 1e-6
