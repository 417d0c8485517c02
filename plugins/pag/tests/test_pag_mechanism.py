"""PAG's mechanism on the built-in judging model, short: one step of the CPU recipe on stackrl/arith-skills, 16 groups
of 8 trajectories. The held-out figures (verification and revisions after training) come from
benchmarks/mechanism.py."""

from pathlib import Path

import pytest
import torch

from stackrl.rewards import exact_match
from stackrl.tasks import parse_verdict
from stackrl.testing.fixtures import train_steps
from stackrl.testing.heldout import recipe_config
from stackrl.testing.judging import advantage_figures, groups_split, judge_figures

pytestmark = pytest.mark.mechanism

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "pag-cpu.yaml"


def test_checks_are_credited_by_their_verdicts_truth_and_revisions_that_fix_above_those_that_fail(tmp_path):
    config = recipe_config(RECIPE, plugins=True, seed=0, steps=1, output_dir=tmp_path,
                           overrides=["trainer.disable_tqdm=true", "trainer.per_device_train_batch_size=128"])
    rollout = train_steps(config)._rollouts["train"]
    # Each row's truth, read here from the texts and the hidden answers, not from the plugin's rewards.
    first_right, verdicts, check_advantage, revisions = [], [], [], []
    for i, segments in enumerate(rollout.columns["segments"]):
        right = [exact_match(s.text, rollout.columns["answer"][i]) == 1.0 for s in segments if s.kind == "answer"]
        advantage = [rollout.advantages[i, s.start].item() for s in segments]  # a segment's tokens share one
        first_right.append(right[0])
        verdicts.append(parse_verdict(segments[1].text))
        check_advantage.append(advantage[1])
        if len(right) > 1:
            revisions.append((right[0], right[1], advantage[2]))
    first_right = torch.tensor(first_right)
    scores = torch.tensor([float("nan") if v is None else float(v) for v in verdicts])
    judged = judge_figures(scores, first_right, rollout.group_size)
    # The recipe leaves room for a check to reach its verdict, and the checks of a group disagree: a signal.
    assert judged["malformed"] < 0.15 and groups_split(scores, rollout.group_size) > 0.5, judged
    # A check whose verdict is right about the answer it checked is pushed up, one whose verdict is wrong down.
    verdict_right = torch.tensor([v is not None and v == r for v, r in zip(verdicts, first_right.tolist())])
    checks = advantage_figures(torch.tensor(check_advantage), verdict_right, ~torch.isnan(scores) & ~verdict_right)
    assert checks["advantage_right"] > 0.3 and checks["advantage_wrong"] < -0.3, checks

    # The untrained model turns some wrong answers it judged wrong into right ones (seed 0: 8 of 33), and breaks
    # some right ones it misjudged (15 of 24): a revision that fixes is pushed above one that stays wrong, one that
    # keeps a right answer above one that breaks it, and fixes up and breaks down outright.
    def mean_advantage(before: bool, after: bool) -> float:
        values = [a for b, c, a in revisions if (b, c) == (before, after)]
        assert len(values) >= 3, f"too few revisions {before} -> {after} to compare: {revisions}"
        return sum(values) / len(values)

    fixed, stayed_wrong = mean_advantage(False, True), mean_advantage(False, False)
    kept, broken = mean_advantage(True, True), mean_advantage(True, False)
    assert fixed > 0.5 and fixed > stayed_wrong + 0.5, (fixed, stayed_wrong)
    assert broken < -0.3 and kept > broken + 0.5, (kept, broken)
