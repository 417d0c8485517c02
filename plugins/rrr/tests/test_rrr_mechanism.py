"""Reflect, Retry, Reward's mechanism on the built-in skills model, short: two steps of the CPU recipe on
stackrl/arith-skills (about 90 reflections). The retry success after training, against the untrained policy,
comes from benchmarks/mechanism.py."""

from pathlib import Path

import pytest
import torch

import pytest

from stackrl.rewards import REFLECT, ROLE_COLUMN
from stackrl.tasks import parse_verdict
from stackrl.testing.fixtures import train_steps
from stackrl.testing.heldout import recipe_config
from stackrl.testing.judging import JudgedSteps, advantage_figures, finds_the_slip, groups_split
from stackrl_rrr.plugin import RETRY_CORRECT

pytestmark = pytest.mark.mechanism

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rrr-cpu.yaml"


def test_reflections_that_find_the_slip_earn_more_and_successful_ones_are_pushed_up(tmp_path):
    config = recipe_config(RECIPE, plugins=True, seed=0, steps=2, output_dir=tmp_path,
                           overrides=["trainer.disable_tqdm=true"])
    steps = JudgedSteps("rrr")
    decode = train_steps(config, monitor=steps).processing_class.decode
    found, rewards, advantages, succeeded, verdicts = [], [], [], [], []
    for rollout in steps.rollouts:
        rows = [i for i, role in enumerate(rollout.columns[ROLE_COLUMN]) if role == REFLECT]
        for i in rows:  # the failed attempt stands between the question and the reflect template's "\nCheck:\n"
            attempt = decode(rollout.prompt_ids[i])[len(rollout.prompts[i]) : -len("\nCheck:\n")]
            found.append(finds_the_slip(rollout.completions[i], attempt))
            verdicts.append(parse_verdict(rollout.completions[i]) is not None)
        rewards.append(rollout.rewards["rrr"][rows])
        advantages.append(rollout.advantages[rows])
        succeeded += [rollout.columns[RETRY_CORRECT][i] for i in rows]
    found, rewards, advantages = torch.tensor(found), torch.cat(rewards), torch.cat(advantages)
    succeeded = torch.tensor(succeeded)
    figures = {
        "reflections": len(found), "slip_found": found.double().mean().item(), "verdicts": sum(verdicts) / len(verdicts),
        "reward_found": rewards[found].mean().item(), "reward_missed": rewards[~found].mean().item(),
        "groups_split": groups_split(rewards, config.host.trainer["num_generations"]),
        **advantage_figures(advantages, succeeded, ~succeeded),
    }
    # What is trained is the reflection, a check of the failed attempt in the judge format, not the retry after it.
    assert figures["verdicts"] > 0.8, figures
    # Reflections on one attempt earn different rewards in many groups: GRPO has something to compare...
    assert figures["groups_split"] >= 0.3, figures
    # ...and a reflection that stops at the attempt's wrong line with its right value (measured at seed 0: 16% of
    # them) lets the retry succeed far more often than one that does not (0.71 against 0.23): the reward favours
    # the reflections worth learning. A reward for failed retries reverses both.
    assert figures["slip_found"] >= 0.08, figures
    assert figures["reward_found"] > figures["reward_missed"] + 0.2, figures
    # GRPO raises the reflections whose retry succeeded and lowers the others (measured 0.72 and -0.32).
    assert figures["advantage_right"] > 0.3 and figures["advantage_wrong"] < -0.1, figures
