"""SDRL's mechanism on the built-in model, short: one step of the CPU recipe on stackrl/arith-skills, every group
debating, on the 1-digit categories where its candidates often disagree. The held-out figures (answers after a
debate context against copying one of its candidates, against plain GRPO) come from benchmarks/mechanism.py."""

from pathlib import Path

import pytest
import torch

import pytest

from stackrl.rewards import extract_answer
from stackrl.testing.fixtures import train_steps
from stackrl.testing.heldout import recipe_config
from stackrl.testing.judging import advantage_figures, groups_split
from stackrl_sdrl.config import CANDIDATE_TEMPLATE

pytestmark = pytest.mark.mechanism

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "sdrl-cpu.yaml"
CATEGORIES = '["3 steps, 1-digit", "4 steps, 1-digit"]'


def debate_signal(trainer) -> dict[str, float]:
    """Over the rollout's debate groups: ``disagreeing`` (groups whose candidates hold a right and a wrong answer),
    ``shown_both`` (the share of those whose context shows a right and a wrong candidate), and over the groups
    that show both: ``groups_split`` (of the rewards), the shares of replies that pick the right candidate
    (``right``; copying a shown one at random would score 0.5) and that follow the wrong one (``follows_wrong``),
    and GRPO's mean advantage of each (``advantage_right``, ``advantage_wrong``)."""
    rollout, decode = trainer._rollouts["train"], trainer.processing_class.decode
    size, separator = rollout.group_size, CANDIDATE_TEMPLATE.format(candidate="")
    disagreeing = shown_both = 0
    rows, follows_wrong = [], []
    for group in range(0, len(rollout.prompts), size):
        replies = [i for i in range(group, group + size) if rollout.columns["role"][i] == "retry"]
        start = replies[0]  # the group's candidates (trained rows before it) are in none of the figures
        answer, pool = rollout.columns["answer"][start], rollout.columns["candidate_answers"][start]
        disagreeing += answer in pool and any(a not in (None, answer) for a in pool)
        shown = rollout.columns["context_correct"][start]
        if all(shown) or not any(shown):
            continue
        shown_both += 1
        context = decode(rollout.prompt_ids[start])[len(rollout.prompts[start]) :].split(separator)[:-1]
        wrong = extract_answer(context[shown.index(False)])
        rows += replies
        follows_wrong += [extract_answer(rollout.completions[i]) == wrong for i in replies]
    rewards = rollout.rewards["exact_match"][rows]
    right, wrong = rewards == 1.0, torch.tensor(follows_wrong) & (rewards != 1.0)
    return {
        "disagreeing": disagreeing,
        "shown_both": shown_both / max(disagreeing, 1),
        "groups_split": groups_split(rewards, len(replies)),
        "right": right.double().mean().item(),
        "follows_wrong": wrong.double().mean().item(),
        **advantage_figures(rollout.advantages[rows], right, wrong),
    }


def test_in_a_debate_between_a_right_and_a_wrong_candidate_picking_the_right_one_is_pushed_up(tmp_path):
    config = recipe_config(RECIPE, plugins=True, seed=0, steps=1, output_dir=tmp_path,
                           overrides=["trainer.disable_tqdm=true", "trainer.per_device_train_batch_size=256",
                                      "sdrl.debate_share=1.0", f"data.options.categories={CATEGORIES}"])  # fmt: skip
    signal = debate_signal(train_steps(config))
    assert signal["disagreeing"] >= 8, signal  # of 32 groups: enough debates for the figures below
    # Distinct answers first: wherever the candidates disagree, the context shows a right and a wrong one (the
    # first two samples would in 8 of the 13 at this seed).
    assert signal["shown_both"] > 0.8, signal
    # Such a debate splits most groups' replies, so GRPO has a signal...
    assert signal["groups_split"] >= 0.5, signal
    # ...and it raises the replies that pick the right candidate, lowers those that follow the wrong one.
    assert signal["advantage_right"] > 0.3 and signal["advantage_wrong"] < -0.3, signal
