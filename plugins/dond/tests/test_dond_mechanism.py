"""The mechanism on real self-play: two steps (two rounds) of the CPU recipe at seed 1, stackrl/arith-games negotiating with
itself. Each round's fine-tuning pairs must be exactly the hand application of the authors' rule to the round's
games: a seat is kept where its own return is strictly above the mean of the round's seats, and each of its actions
(a run of loss-mask-1 tokens of its row, the runner's own marking) is a target after everything before it; the
observations (loss mask 0) are never targets. The phases must lower the NLL of what they imitate."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def _hand_round(rollout, eos: int):
    """The kept rows and the (context, target) pairs of one round, from the rollout's columns and loss mask."""
    columns = rollout.columns
    returns = [float(r) for r in columns["env_return"]]  # objective "self": a seat's score is its own return
    mean = sum(returns) / len(returns)
    kept = [row for row, score in enumerate(returns) if score > mean]
    pairs = []
    for row in kept:
        ids, mask = rollout.completion_ids[row], rollout.loss_mask[row]
        start = None
        for t in range(len(ids) + 1):
            if t < len(ids) and mask[t] and start is None:
                start = t
            elif (t == len(ids) or not mask[t]) and start is not None:
                target = list(ids[start:t]) + ([] if ids[t - 1] == eos else [eos])
                pairs.append((list(rollout.prompt_ids[row]) + list(ids[:start]), target))
                start = None
    return kept, pairs


def test_each_round_imitates_exactly_the_actions_of_the_seats_above_the_rounds_mean():
    found = load_script(BENCHMARK).run("dond", seed=1, steps=2, episodes=0)
    tokenizer = found["tokenizer"]
    eos = tokenizer.eos_token_id
    hand = [_hand_round(rollout, eos) for rollout in found["rollouts"]]
    assert len(hand) == 2
    # a real filter: each round keeps some seats and leaves others, and some kept seat acted more than once
    assert all(0 < len(kept) < len(rollout) for (kept, _), rollout in zip(hand, found["rollouts"]))
    assert any(len(pairs) > len(kept) for kept, pairs in hand)
    phases = found["phases"]
    assert [name for name, _, _ in phases] == ["bc", "bc"]
    for (kept, pairs), (_, contexts, targets) in zip(hand, phases):
        assert list(zip(contexts, targets)) == pairs
        for target in targets:  # an action, and nothing of what the environment said
            text = tokenizer.decode(target, skip_special_tokens=True)
            assert text.startswith("move: ") and "\n" not in text and "items:" not in text
    # the phases fit what they imitate
    assert all(log["phase/bc/loss_last"] < log["phase/bc/loss_first"] for log in found["phase_logs"])
