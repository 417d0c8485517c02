"""ReST-GRPO: the spread filter, the partial-solution prompts and their draw weights, and both on the prompt pool."""

import random
from types import SimpleNamespace

import pytest
import torch
from datasets import Dataset

from stackrl import ConfigError
from stackrl.context import Rollout
from stackrl.pool import POOL_ROW, Pool, PoolAccess
from stackrl.run import validate
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import StopAt, train_steps
from stackrl_restgrpo import RestGrpo, RestGrpoConfig, group_spread, partial_prompts, prefix_weights

class TestConformance(PluginConformance):
    plugin_name = "restgrpo"
    refused_settings = [
        ({"std_threshold": -0.1}, "restgrpo.std_threshold: must be a number >= 0"),
        ({"partial_ratio": 1.5}, "restgrpo.partial_ratio: must lie in \\[0, 1\\]"),
        ({"alpha": 1.0}, "restgrpo.alpha: must lie in \\(0, 1\\)"),
        ({"iteration_steps": 0}, "restgrpo.iteration_steps: must be at least 1"),
    ]


@pytest.mark.parametrize(
    ("rewards", "spread"),
    [
        ([1.0, 0.0], 0.5),  # the population std (numpy's, as the authors'), not the sample std 0.707
        ([1.0, 0.0, 0.0, 0.0], 0.75**0.5 / 2),
        ([1.0, 1.0, 1.0, 1.0], 0.0),
        ([float("nan"), 1.0, 0.0, float("nan")], 0.5),  # unscored completions left out
        ([float("nan")] * 2, 0.0),
    ],
)
def test_the_spread_is_the_population_std_of_the_scored_rewards(rewards, spread):
    assert group_spread(torch.tensor(rewards)) == pytest.approx(spread)


def test_prefix_weights_decay_from_the_shortest_prefix():
    assert prefix_weights(4, 0.5) == [1.0, 0.5, 0.25, 0.125]


def test_partial_prompts_are_the_question_and_the_first_lines_never_the_answer_line():
    completion = "3 + 4 = 7\n7 * 2 = 14\n14 - 1 = 13\nThe answer is 13."
    prompts = partial_prompts("What is ((3 + 4) * 2) - 1?\n", completion, 0.5, 0.95, random.Random(0))
    assert len(prompts) == 2  # ceil(0.5 x 4 lines)
    allowed = {"What is ((3 + 4) * 2) - 1?\n" + "".join(completion.splitlines(keepends=True)[:k]) for k in (1, 2, 3)}
    assert set(prompts) <= allowed
    assert partial_prompts("Q\n", "The answer is 3.", 0.5, 0.95, random.Random(0)) == []
    assert partial_prompts("Q\n", completion, 0.0, 0.95, random.Random(0)) == []


def test_prefixes_are_drawn_with_weights_alpha_to_the_k_minus_one():
    """Three reasoning lines at alpha 0.5: one line with probability 1/1.75, two 0.5/1.75, three 0.25/1.75 (uniform
    draws, or long prefixes first, give other shares)."""
    rng = random.Random(0)
    completion = "a\nb\nc\nThe answer is 1."
    drawn = [p.count("\n") - 1 for _ in range(2000) for p in partial_prompts("Q\n", completion, 1.0, 0.5, rng)]
    shares = [drawn.count(k) / len(drawn) for k in (1, 2, 3)]
    assert shares == pytest.approx([1 / 1.75, 0.5 / 1.75, 0.25 / 1.75], abs=0.02)


def test_a_chat_run_with_partial_solutions_is_refused(make_config):
    with pytest.raises(ConfigError, match="restgrpo.partial_ratio: partial solutions continue text prompts"):
        validate(make_config(["restgrpo"], data={"chat": True}))


SOLUTIONS = {
    "What is (3 + 4) * 2?\n": "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14.",
    "What is (2 + 5) * 3?\n": "2 + 5 = 7\n7 * 3 = 21\nThe answer is 21.",
    "What is (9 - 1) - 2?\n": "9 - 1 = 8\n8 - 2 = 6\nThe answer is 6.",
}
QUESTIONS = list(SOLUTIONS)


def _pool():
    columns = {"prompt": QUESTIONS, "answer": ["14", "21", "6"], "solution": list(SOLUTIONS.values()),
               POOL_ROW: [0, 1, 2]}
    return Pool(Dataset.from_dict(columns), seed=0, answer_column="answer")


def _step(plugin, pool, step, rows, rewards, acted=None):
    """Record a batch of ``rows`` (groups of two, each completion its problem's solution, ``rewards`` per group) and
    call the plugin's post_step on it, as the host would."""
    prompts = [pool.row(row)["prompt"] for row in rows for _ in range(2)]
    completions = [SOLUTIONS[QUESTIONS[0]] if p not in SOLUTIONS else SOLUTIONS[p] for p in prompts]
    rollout = Rollout(prompts=prompts, completions=completions, prompt_ids=[[1]] * len(prompts),
                      completion_ids=[[2]] * len(prompts), columns={}, group_size=2,
                      rewards={"exact_match": torch.tensor([r for group in rewards for r in group])})
    pool.record(rows, [None] * len(rows), [0.0] * len(rows))
    ctx = SimpleNamespace(step=step, pool=PoolAccess(pool, "restgrpo", step), rollout=rollout, log=lambda *_: None,
                          acted=lambda n, of: (acted if acted is not None else []).append((n, of)))
    plugin.post_step(ctx)


def test_groups_without_spread_leave_their_problem_out_and_right_answers_add_partial_solutions():
    """A group that agreed weighs its problem 0; a spread group whose best completion reaches accept_threshold adds
    ceil(0.5 x 3 lines) = 2 partial solutions of it; one whose best stays under it (0.5) adds none."""
    pool, plugin, acted = _pool(), RestGrpo(), []
    _step(plugin, pool, 1, [0, 1, 2], [[1.0, 1.0], [0.0, 1.0], [0.0, 0.5]], acted)
    assert [pool.stats(row).weight for row in (0, 1, 2)] == [0.0, 1.0, 1.0]
    added = list(range(3, len(pool)))
    assert len(added) == 2 and plugin.partials == set(added)
    steps = SOLUTIONS[QUESTIONS[1]].splitlines(keepends=True)
    assert {pool.row(row)["prompt"] for row in added} <= {QUESTIONS[1] + "".join(steps[:k]) for k in (1, 2)}
    assert all(pool.row(row)["answer"] == "21" for row in added)
    assert acted == [(2, 3)]


def test_a_partial_solution_is_drawn_once_and_an_iteration_brings_every_problem_back():
    pool, plugin = _pool(), RestGrpo(RestGrpoConfig(iteration_steps=3))
    _step(plugin, pool, 1, [0, 1, 2], [[1.0, 1.0], [0.0, 1.0], [0.0, 1.0]])
    first, *others = sorted(plugin.partials)
    _step(plugin, pool, 2, [1, first], [[0.0, 1.0], [1.0, 1.0]])
    assert pool.stats(first).retired and pool.stats(0).weight == 0.0
    _step(plugin, pool, 3, [2], [[1.0, 1.0]])  # the iteration ends: every problem back, partial solutions retired
    assert [pool.stats(row).weight for row in (0, 1, 2)] == [1.0, 1.0, 1.0]
    assert pool.active_rows() == [0, 1, 2] and not plugin.left_out and not plugin.partials


def test_an_iteration_begins_early_when_every_problem_is_left_out():
    pool, plugin = _pool(), RestGrpo(RestGrpoConfig(partial_ratio=0.0))
    _step(plugin, pool, 1, [0, 1], [[1.0, 1.0], [0.0, 0.0]])
    assert plugin.left_out == {0, 1}
    _step(plugin, pool, 2, [2], [[0.0, 0.0]])
    assert [pool.stats(row).weight for row in (0, 1, 2)] == [1.0, 1.0, 1.0] and plugin.iteration_start == 2


def test_it_acts_once_per_generation_batch():
    """With steps_per_generation > 1, optimizer steps that share the rollout do not act on it again."""
    pool, plugin, acted = _pool(), RestGrpo(), []
    _step(plugin, pool, 1, [0, 1, 2], [[1.0, 1.0], [0.0, 1.0], [0.0, 0.5]], acted)
    ctx = SimpleNamespace(step=2, pool=PoolAccess(pool, "restgrpo", 2), rollout=None, log=lambda *_: None,
                          acted=lambda n, of: acted.append((n, of)))
    plugin.post_step(ctx)
    assert acted == [(2, 3)]


def test_a_run_resumed_inside_an_iteration_matches_an_uninterrupted_one(make_config, tmp_path):
    """Stopped after step 2 and resumed, a run draws, leaves out and adds the rows an uninterrupted one does: the
    problems left out and the partial solutions not yet drawn ride in the checkpoint (a fresh plugin would bring the
    left-out problems back too late, and never retire the partial solutions)."""
    trainer = {"per_device_train_batch_size": 16, "max_completion_length": 48, "max_steps": 4,
               "save_strategy": "steps", "save_steps": 2}
    sections = dict(model={"name_or_path": "stackrl/arith-tiny"}, data={"size": 8}, trainer=trainer,
                    restgrpo={"iteration_steps": 8})

    def run(name, **how):
        return train_steps(make_config(["restgrpo"], output_dir=str(tmp_path / name), **sections), **how)

    straight = run("straight")
    first = run("resumed", callbacks=[StopAt(2)]).plugins.plugins["restgrpo"].state_dict()
    assert first["left_out"] and first["partials"], f"nothing to carry across the resume: {first}"
    resumed = run("resumed", resume=True)
    assert resumed.plugins.plugins["restgrpo"].state_dict() == straight.plugins.plugins["restgrpo"].state_dict()
    pool, want_pool = resumed.pool.state_dict(), straight.pool.state_dict()
    assert torch.equal(pool.pop("generator"), want_pool.pop("generator"))
    assert pool == want_pool  # the row weights, the rows added and retired, the pass rates
    want = dict(straight.model.named_parameters())
    assert all(torch.equal(p, want[n]) for n, p in resumed.model.named_parameters())
