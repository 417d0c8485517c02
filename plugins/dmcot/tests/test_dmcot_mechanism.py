"""dmcot's shaping where TRL's loss receives it, on the built-in bandit played by stackrl/arith-games: one real step of
the benchmark's run (plugins/dmcot/benchmarks/mechanism.py, 16 episodes), each episode row's reward component dmcot
computed again by hand from the runner's columns (the bonus once per distinct arm the row paid out on, the penalty
per pull of no arm or turn with no move), the advantages GRPO gave each row from the environment's return plus that
component, and the logged regret, optimal-arm share and coverage from the arms' odds drawn here from the episode's
seed as the bandit draws them."""

import random
from pathlib import Path

import pytest
import torch

from stackrl.blocks.env import INFO_COLUMN, RETURN_COLUMN, SEED_COLUMN
from stackrl.testing.fixtures import HookRecorder
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BONUS, PENALTY, ARMS = 1.0, -5.0, 3


class Rewards(HookRecorder):
    """Keeps the reward stage's rollout of dmcot's call."""

    def __call__(self, hook, plugin, kwargs, result):
        if hook == "reward" and plugin == "dmcot":
            self.rollout, self.result = kwargs["ctx"].rollout, result


def by_hand(infos):
    arms = {info["arm"] for info in infos if "arm" in info}
    refused = sum("invalid" in info or info.get("unparsed", False) for info in infos)
    return BONUS * len(arms) + PENALTY * refused


def figures_by_hand(infos, seed):
    rng = random.Random(seed)
    odds = [rng.random() for _ in range(ARMS)]
    best = odds.index(max(odds)) + 1
    pulls = [info.get("arm") for info in infos if "arm" in info or "invalid" in info]
    regret = sum(max(odds) - (odds[arm - 1] if arm else 0.0) for arm in pulls)
    return regret, sum(arm == best for arm in pulls) / len(pulls), len({a for a in pulls if a}) / ARMS


def test_the_bonus_reaches_grpos_advantages_and_the_figures_match_a_hand_count(tmp_path):
    bench = load_script(Path(__file__).parents[1] / "benchmarks" / "mechanism.py")
    seen = Rewards()
    _, trainer = bench.run(0, 1, folder=tmp_path, monitor=seen, rows=16,
                           overrides=[f"dmcot.bonus={BONUS}", f"dmcot.invalid_penalty={PENALTY}", f"dmcot.arms={ARMS}"])
    rollout = seen.rollout
    infos, seeds = rollout.columns[INFO_COLUMN], rollout.columns[SEED_COLUMN]
    expected = [by_hand(i) for i in infos]
    assert seen.result == pytest.approx(expected)
    assert len(set(expected)) > 1  # rows differ in the arms they tried: the bonus tells them apart
    # GRPO's advantages are the group-normalised sum of the environment's return and the shaping
    total = torch.tensor(rollout.columns[RETURN_COLUMN]) + torch.tensor(expected)
    groups = total.view(-1, rollout.group_size)
    advantages = ((groups - groups.mean(1, keepdim=True)) / (groups.std(1, keepdim=True) + 1e-4)).view(-1)
    assert trainer._rollouts["train"].advantages.view(-1) == pytest.approx(advantages.tolist(), abs=1e-4)
    # the figures the run logged, from the arms' odds drawn here
    hand = [figures_by_hand(i, s) for i, s in zip(infos, seeds) if any("arm" in x or "invalid" in x for x in i)]
    logged = next(e for e in trainer.state.log_history if "dmcot/regret" in e)
    for k, name in enumerate(("regret", "optimal", "coverage")):
        assert logged[f"dmcot/{name}"] == pytest.approx(sum(h[k] for h in hand) / len(hand), abs=1e-4), name
