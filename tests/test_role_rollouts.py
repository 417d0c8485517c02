"""Per-row columns and the injected-text loss mask from the sample stage, roles, and role-wise advantages.

The multi-process half (columns and mask across gather and scatter) is in tests/test_distributed.py; the
built-in task's judge and retry formats are tested in tests/test_roles.py.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from stackrl import PluginError
from stackrl.blocks.roles import (
    assign_roles,
    broadcast_segments,
    group_advantages,
    reset_prompt,
    rows_of_groups,
    split_steps,
    uniform_reset,
)
from stackrl.errors import ConfigError
from stackrl.testing.fixtures import train_steps
from stackrl.trainer import StackTrainer

INJECTED = " Check it:"


def _losses(trainer) -> list[float]:
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


def test_injected_text_counts_in_no_loss_kl_or_normaliser(make_config):
    """A completion with masked text appended trains exactly as the completion without it: the same loss at every
    step (TRL's dapo loss, whose normaliser is the batch's token count, with a KL term) and the same weights."""
    runs = {}
    for inject in (INJECTED, ""):
        config = make_config(
            ["injected_turn"], injected_turn={"inject": inject}, rewards={"exact_match": None},
            trainer={"beta": 0.1, "loss_type": "dapo"},
        )  # fmt: skip
        runs[inject] = train_steps(config, steps=3)
    injected, plain = runs[INJECTED], runs[""]
    seen = injected.plugins.plugins["injected_turn"].seen_in_loss
    n_injected = len(injected.processing_class(INJECTED, add_special_tokens=False).input_ids)
    assert seen and all(trained == sampled and whole == sampled + n_injected for _, sampled, trained, whole in seen)
    rollout = injected._rollouts["train"]
    assert rollout.loss_mask == [[1] * n + [0] * n_injected for n in rollout.columns["sampled_tokens"]]

    assert len(_losses(injected)) == 3 and any(abs(x) > 1e-6 for x in _losses(injected))
    assert _losses(injected) == pytest.approx(_losses(plain), abs=1e-6)
    for (name, a), (_, b) in zip(injected.model.named_parameters(), plain.model.named_parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-4), name  # Adam magnifies float noise on near-zero gradients


def test_columns_from_the_sample_stage_reach_every_later_stage(make_config):
    trainer = train_steps(make_config(["injected_turn"]), steps=1)
    rollout = trainer._rollouts["train"]
    assert rollout.columns["row_tag"] == [f"row{i}" for i in range(len(rollout))]
    assert "answer" in rollout.columns  # the dataset's columns stay beside them
    tags = [tag for tag, *_ in trainer.plugins.plugins["injected_turn"].seen_in_loss]
    assert sorted(tags) == sorted(rollout.columns["row_tag"])


def test_a_column_the_dataset_has_is_refused(make_config):
    config = make_config(["injected_turn"], injected_turn={"tag_column": "answer"})
    with pytest.raises(PluginError, match="returned column 'answer', which the dataset already has"):
        train_steps(config, steps=1)


def test_a_loss_mask_must_match_its_completion():
    where = "plugin 'p' hook 'generate_rollout' at step 0"
    with pytest.raises(PluginError, match="a loss_mask of 2 tokens for row 1, whose completion has 3"):
        StackTrainer._checked_loss_mask(where, [[1], [1, 0]], [[5], [5, 6, 7]])
    with pytest.raises(PluginError, match="row 0 with values other than 0 and 1"):
        StackTrainer._checked_loss_mask(where, [[2]], [[5]])


def test_outcome_rewards_score_only_solution_rows(make_config):
    config = make_config(["role_rollout"], trainer={"per_device_train_batch_size": 8})
    rollout = train_steps(config, steps=1)._rollouts["train"]
    roles = rollout.columns["role"]
    assert roles == ["solve"] * 4 + ["verify"] * 4
    solve = torch.tensor([role == "solve" for role in roles])
    exact, plugin = rollout.rewards["exact_match"], rollout.rewards["role_rollout"]
    assert not exact[solve].isnan().any() and exact[~solve].isnan().all()
    assert plugin[solve].isnan().all() and not plugin[~solve].isnan().any()


def test_roles_by_share_of_groups():
    assert assign_roles(4, {"solve": 0.5, "verify": 0.5}, key="k") == ["solve", "solve", "verify", "verify"]
    # 5 * (0.3, 0.3, 0.4) = 1.5, 1.5, 2.0: one group left over goes to the largest remainder, the first named
    assert assign_roles(5, {"a": 0.3, "b": 0.3, "c": 0.4}, key="k") == ["a", "a", "b", "c", "c"]
    assert assign_roles(3, {"a": 0.25, "b": 0.75}, key="k") == ["a", "b", "b"]
    assert rows_of_groups(["a", "b"], 2) == ["a", "a", "b", "b"]
    with pytest.raises(ConfigError, match=r"rrpo.roles: role shares must sum to 1, not 0.9"):
        assign_roles(4, {"solve": 0.5, "reset": 0.4}, key="rrpo.roles")
    with pytest.raises(ConfigError, match="rrpo.roles: give each role a positive share"):
        assign_roles(4, {"solve": 1.0, "reset": 0.0}, key="rrpo.roles")


def test_group_advantages_normalise_within_each_role():
    # Two solve groups and one verify group of 2 rows; the verify rewards live on another scale.
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 10.0, 30.0])
    roles = ["solve"] * 4 + ["verify"] * 2
    by_group = group_advantages(rewards, 2, roles, scale="group")
    s = math.sqrt(0.5)  # std (unbiased) of (1, 0)
    assert by_group.tolist() == pytest.approx([0.5 / (s + 1e-4), -0.5 / (s + 1e-4), 0, 0, -10 / (math.sqrt(200) + 1e-4), 10 / (math.sqrt(200) + 1e-4)])
    by_role = group_advantages(rewards, 2, roles, scale="batch")
    solve_std = torch.tensor([1.0, 0.0, 1.0, 1.0]).std().item()  # the solve rows' std, not the batch's
    verify_std = torch.tensor([10.0, 30.0]).std().item()
    expected = [0.5 / (solve_std + 1e-4), -0.5 / (solve_std + 1e-4), 0, 0, -10 / (verify_std + 1e-4), 10 / (verify_std + 1e-4)]
    assert by_role.tolist() == pytest.approx(expected)
    assert group_advantages(rewards, 2, roles, scale="none").tolist() == [0.5, -0.5, 0, 0, -10, 10]
    nan = torch.tensor([1.0, float("nan"), 3.0, 1.0])
    assert group_advantages(nan, 2, ["a"] * 4, scale="none").tolist() == [0.0, 0.0, 1.0, -1.0]
    with pytest.raises(PluginError, match="a group holds rows of several roles"):
        group_advantages(rewards, 2, ["solve", "verify"] * 3)


def test_segment_advantages_are_broadcast_to_their_tokens():
    out = broadcast_segments([[1.0, -2.0], [0.5]], [[(0, 2), (4, 5)], [(1, 3)]], width=6)
    assert out.tolist() == [[1, 1, 0, 0, -2, 0], [0, 0.5, 0.5, 0, 0, 0]]


def test_reset_prompts_keep_the_steps_before_the_reset_point():
    steps = split_steps("3 + 4 = 7\n7 * 2 = 15\nThe answer is 15.")
    assert steps == ["3 + 4 = 7\n", "7 * 2 = 15\n", "The answer is 15."]
    assert reset_prompt("Q?\n", steps, 1) == "Q?\n3 + 4 = 7\n"
    assert reset_prompt("Q?\n", steps, 0) == "Q?\n"


def test_a_uniform_reset_keeps_at_least_one_step_and_never_resets_the_answer():
    """Step 0 would keep an empty prefix: a fresh attempt labelled a reset."""
    rng = random.Random(0)
    steps = split_steps("3 + 4 = 7\n7 * 2 = 15\n15 - 1 = 14\nThe answer is 14.")
    assert {uniform_reset(steps, rng) for _ in range(200)} == {1, 2}
    assert uniform_reset(split_steps("3 + 4 = 8\nThe answer is 8."), rng) is None
    assert uniform_reset(["The answer is 3."], rng) is None
