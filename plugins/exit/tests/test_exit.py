"""ExIt: the learnability score, the choice of groups, the buffer's weights and capacity, and the rules on the pool."""

import random
from types import SimpleNamespace

import pytest
import torch
from datasets import Dataset

from stackrl import ConfigError
from stackrl.context import Rollout
from stackrl.pool import POOL_ROW, Pool, PoolAccess
from stackrl.run import validate
from stackrl.tasks import retry_prompt
from stackrl.testing.conformance import PluginConformance
from stackrl_exit import Exit, ExitConfig, draw_weights, learnability, most_learnable, overflow, self_iteration_prompt


class TestConformance(PluginConformance):
    plugin_name = "exit"
    refused_settings = [
        ({"per_batch": 0}, "exit.per_batch: must be at least 1"),
        ({"min_score": -0.1}, "exit.min_score: must be a number >= 0"),
        ({"capacity": 0}, "exit.capacity: must be at least 1"),
        ({"replay_weight": 0.0}, "exit.replay_weight: must be a positive number"),
        ({"max_depth": 0}, "exit.max_depth: must be at least 1"),
    ]


@pytest.mark.parametrize(
    ("rewards", "score"),
    [
        ([1.0, 0.0], 0.25),  # p(1 - p) at p = 1/2: the population variance, not the sample one (0.5)
        ([1.0, 0.0, 0.0, 0.0], 0.1875),  # 1/4 x 3/4
        ([1.0, 1.0, 1.0, 1.0], 0.0),
        ([float("nan"), 1.0, 0.0, float("nan")], 0.25),  # unscored completions left out
        ([float("nan")] * 2, 0.0),
        ([0.0, 0.5, 1.0], 1 / 6),  # a graded reward: its variance, not a pass rate's p(1 - p)
    ],
)
def test_learnability_is_the_population_variance_of_the_scored_rewards(rewards, score):
    assert learnability(torch.tensor(rewards)) == pytest.approx(score)


def test_the_most_learnable_groups_are_the_highest_scores_above_the_floor():
    scores = [0.1875, 0.0, 0.25, 0.25, 0.09]
    assert most_learnable(scores, 2, 0.0) == [2, 3]  # ties: the earlier group first
    assert most_learnable(scores, 3, 0.0) == [2, 3, 0]  # not the first groups, nor the lowest
    assert most_learnable(scores, 9, 0.1) == [2, 3, 0]  # nothing at or under the floor
    assert most_learnable([0.0, float("-inf")], 2, 0.0) == []


def test_draw_weights_scale_the_buffer_to_its_most_learnable_task():
    assert draw_weights({5: 0.25, 6: 0.125, 7: 0.0625}, 2.0) == {5: 2.0, 6: 1.0, 7: 0.5}
    assert draw_weights({}, 1.0) == {}


def test_a_full_buffer_retires_its_lowest_scores():
    assert overflow({5: 0.25, 6: 0.1, 7: 0.2, 8: 0.1}, 2) == [6, 8]
    assert overflow({5: 0.25, 6: 0.1}, 2) == []


def test_a_self_iteration_task_shows_one_attempt_of_the_group_then_asks_again():
    completions = ["3 + 4 = 8\nThe answer is 16.", "3 + 4 = 7\nThe answer is 14."]
    shown = [self_iteration_prompt("Q\n", completions, random.Random(seed)) for seed in range(40)]
    assert {text for text, _ in shown} == {retry_prompt("Q\n", c) for c in completions}  # drawn, both shown
    assert all(text == "Q\n" + completions[i] + "\nTry again.\n" for text, i in shown)


def test_a_chat_run_is_refused(make_config):
    with pytest.raises(ConfigError, match="exit: a self-iteration task continues a text prompt"):
        validate(make_config(["exit"], data={"chat": True}))


SOLUTIONS = {
    "What is (3 + 4) * 2?\n": "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14.",
    "What is (2 + 5) * 3?\n": "2 + 5 = 7\n7 * 3 = 21\nThe answer is 21.",
    "What is (9 - 1) - 2?\n": "9 - 1 = 8\n8 - 2 = 6\nThe answer is 6.",
    "What is (8 - 2) * 2?\n": "8 - 2 = 6\n6 * 2 = 12\nThe answer is 12.",
}
QUESTIONS = list(SOLUTIONS)


def _pool():
    columns = {"prompt": QUESTIONS, "answer": ["14", "21", "6", "12"], "solution": list(SOLUTIONS.values()),
               POOL_ROW: [0, 1, 2, 3]}
    return Pool(Dataset.from_dict(columns), seed=0, answer_column="answer")


def _step(plugin, pool, step, rows, rewards, acted=None):
    """Record a batch of ``rows`` (groups of four; completion j of a group is "attempt j of <row>") with ``rewards``
    per group, and call the plugin's post_step on it, as the host would."""
    prompts = [pool.row(row)["prompt"] for row in rows for _ in range(4)]
    completions = [f"attempt {j} of {row}" for row in rows for j in range(4)]
    rollout = Rollout(prompts=prompts, completions=completions, prompt_ids=[[1]] * len(prompts),
                      completion_ids=[[2]] * len(prompts), columns={}, group_size=4,
                      rewards={"exact_match": torch.tensor([r for group in rewards for r in group])})
    pool.record(rows, [None] * len(rows), [0.0] * len(rows))
    ctx = SimpleNamespace(step=step, pool=PoolAccess(pool, "exit", step), rollout=rollout, log=lambda *_: None,
                          acted=lambda n, of: (acted if acted is not None else []).append((n, of)))
    plugin.post_step(ctx)


def test_the_most_learnable_groups_give_tasks_that_show_one_of_their_attempts():
    """Of four groups (variances 0.1875, 0.25, 0, 0.25), the two most learnable give a task each, weighted by their
    score; the task is the group's prompt, one of its attempts and the retry instruction, with the row's answer."""
    pool, plugin, acted = _pool(), Exit(), []
    _step(plugin, pool, 1, [0, 1, 2, 3], [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1]], acted)
    added = list(range(4, len(pool)))
    assert len(added) == 2 and sorted(plugin.buffer) == added
    assert [plugin.buffer[row].parent for row in added] == [1, 3]
    assert [plugin.buffer[row].score for row in added] == [0.25, 0.25]
    for row in added:
        parent = plugin.buffer[row].parent
        assert pool.row(row)["prompt"] in {retry_prompt(QUESTIONS[parent], f"attempt {j} of {parent}") for j in range(4)}
        assert pool.row(row)["answer"] == pool.row(parent)["answer"]
        assert plugin.buffer[row].depth == 1 and pool.stats(row).weight == 1.0
    assert [pool.stats(row).weight for row in range(4)] == [1.0] * 4  # the dataset's problems keep weight 1
    assert acted == [(2, 4)]


def test_a_drawn_task_is_rescored_weighs_by_its_score_and_retires_when_its_group_agrees():
    pool, plugin = _pool(), Exit(ExitConfig(per_batch=2, replay_weight=2.0))
    _step(plugin, pool, 1, [0, 1, 2, 3], [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]])
    first, second = 4, 5  # from groups 1 (0.25) and 0 (0.1875)
    assert [plugin.buffer[first].parent, plugin.buffer[second].parent] == [1, 0]
    assert pool.stats(first).weight == 2.0 and pool.stats(second).weight == pytest.approx(2.0 * 0.1875 / 0.25)
    # The first task's group varies (1 of 4 right: 0.1875); the second's agrees.
    _step(plugin, pool, 2, [first, second], [[1, 0, 0, 0], [0, 0, 0, 0]])
    assert pool.stats(second).retired and second not in plugin.buffer
    assert plugin.buffer[first].score == 0.1875
    grandchild = max(plugin.buffer)
    assert plugin.buffer[grandchild].parent == first and plugin.buffer[grandchild].depth == 2
    assert pool.row(grandchild)["prompt"].startswith(pool.row(first)["prompt"])
    assert pool.row(grandchild)["prompt"].count("Try again.") == 2


def test_no_task_grows_beyond_max_depth_and_a_full_buffer_retires_its_lowest():
    pool, plugin = _pool(), Exit(ExitConfig(per_batch=4, max_depth=1, capacity=2))
    _step(plugin, pool, 1, [0, 1, 2, 3], [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0], [0, 1, 0, 1]])
    # four tasks (0.1875, 0.25, 0.1875, 0.25), two kept: the 0.25 ones
    assert sorted(task.parent for task in plugin.buffer.values()) == [1, 3]
    assert [pool.stats(row).retired for row in range(4, 8)] == [False, False, True, True]
    kept = sorted(plugin.buffer)
    _step(plugin, pool, 2, kept, [[1, 1, 0, 0], [1, 1, 0, 0]])
    assert sorted(plugin.buffer) == kept  # depth 1 is the limit: no grandchild


def test_it_acts_once_per_generation_batch():
    pool, plugin, acted = _pool(), Exit(), []
    _step(plugin, pool, 1, [0, 1], [[1, 0, 0, 0], [1, 1, 1, 1]], acted)
    ctx = SimpleNamespace(step=2, pool=PoolAccess(pool, "exit", 2), rollout=None, log=lambda *_: None,
                          acted=lambda n, of: acted.append((n, of)))
    plugin.post_step(ctx)
    assert acted == [(1, 2)]


def test_the_buffer_survives_a_checkpoint_and_a_resumed_plugin_continues_as_an_uninterrupted_one(tmp_path):
    """The plugin's state and the pool's, saved after step 1 (``torch.load(weights_only=True)``) and restored into a
    fresh plugin and pool, give at step 2 the buffer, rows and weights an uninterrupted run has: the buffered
    tasks' scores and depths ride in the checkpoint (a fresh plugin would neither re-score nor retire them)."""
    batch_1 = ([0, 1, 2, 3], [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1]])
    batch_2 = ([4, 5, 0], [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0]])
    pool, plugin = _pool(), Exit()
    _step(plugin, pool, 1, *batch_1)
    torch.save({"plugin": plugin.state_dict(), "pool": pool.state_dict()}, tmp_path / "checkpoint.pt")
    _step(plugin, pool, 2, *batch_2)

    saved = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    resumed_pool, resumed = _pool(), Exit()
    resumed_pool.load_state_dict(saved["pool"])
    resumed.load_state_dict(saved["plugin"])
    _step(resumed, resumed_pool, 2, *batch_2)
    assert resumed.state_dict() == plugin.state_dict()
    assert 4 not in resumed.buffer and resumed_pool.stats(4).retired  # its group agreed at step 2
    assert [resumed_pool.stats(row).weight for row in range(len(pool))] == [pool.stats(row).weight for row in range(len(pool))]
    assert [resumed_pool.row(row) for row in range(len(pool))] == [pool.row(row) for row in range(len(pool))]


def test_a_task_another_plugin_retired_leaves_the_buffer():
    pool, plugin = _pool(), Exit()
    _step(plugin, pool, 1, [0, 1], [[1, 0, 0, 0], [1, 1, 0, 0]])
    pool.retire([4], "other", 1)
    _step(plugin, pool, 2, [2], [[1, 1, 1, 1]])
    assert sorted(plugin.buffer) == [5] and pool.stats(5).weight == 1.0
