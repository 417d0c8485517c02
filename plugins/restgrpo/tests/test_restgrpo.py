"""ReST-GRPO: the spread filter, the partial-solution prompts and their draw weights, and both on the prompt pool."""

import random

import pytest
import torch

from stackrl import ConfigError
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import DrawnGroups, train_steps
from stackrl_restgrpo import RestGrpo, RestGrpoConfig, group_spread, partial_prompts, prefix_weights

BUILT_IN = {"name_or_path": "stackrl/arith-tiny"}


class TestConformance(PluginConformance):
    plugin_name = "restgrpo"


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
    drawn = [p.count("\n") - 1 for _ in range(2000) for p in partial_prompts("Q\n", "a\nb\nc\nThe answer is 1.", 1.0, 0.5, rng)]
    shares = [drawn.count(k) / len(drawn) for k in (1, 2, 3)]
    assert shares == pytest.approx([1 / 1.75, 0.5 / 1.75, 0.25 / 1.75], abs=0.02)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("std_threshold", -0.1, "must be a number >= 0"),
        ("partial_ratio", 1.5, "must lie in \\[0, 1\\]"),
        ("alpha", 1.0, "must lie in \\(0, 1\\)"),
        ("iteration_steps", 0, "must be at least 1"),
    ],
)
def test_bad_settings_are_refused(key, value, message):
    with pytest.raises(ConfigError, match=f"restgrpo.{key}: {message}"):
        RestGrpoConfig(**{key: value})


def test_a_chat_run_with_partial_solutions_is_refused(make_config):
    with pytest.raises(ConfigError, match="restgrpo.partial_ratio: partial solutions continue text prompts"):
        make_config(["restgrpo"], data={"chat": True})


def _run(make_config, steps, **settings):
    groups = DrawnGroups("exact_match")
    config = make_config(["restgrpo"], model=BUILT_IN, restgrpo=settings,
                         trainer={"max_steps": steps, "per_device_train_batch_size": 32, "num_generations": 4})
    trainer = train_steps(config, monitor=_on_restgrpo(groups))
    return trainer, groups.groups


def _on_restgrpo(groups):
    """Keep each batch's groups, as the plugin's post_step sees them, with their exact_match rewards."""
    def monitor(hook, plugin, kwargs, result):
        if hook == "post_step" and plugin == "restgrpo":
            groups(hook, "exact_match", kwargs, result)
    return monitor


def test_groups_without_spread_leave_their_problem_out_and_right_answers_add_partial_solutions(make_config):
    """On the built-in model: after a step, each problem whose group all agreed weighs 0, every other keeps weight 1,
    and each kept problem with a right completion gave ceil(0.5 x lines) rows continuing that problem's question;
    the partial rows drawn at the next step retire."""
    trainer, groups = _run(make_config, 2, iteration_steps=100)
    pool, plugin = trainer.pool, trainer.plugins.plugins["restgrpo"]
    first = [g for g in groups if g.step == 1]
    flat = [g for g in first if len(set(g.rewards)) == 1]
    spread = [g for g in first if len(set(g.rewards)) > 1]
    assert flat and spread
    assert all(pool.stats(g.row).weight == 0 for g in flat)
    assert all(pool.stats(g.row).weight == 1 for g in spread)
    added = [r for r in range(len(pool)) if pool.stats(r).stage == 0 and r >= 32]
    right = [g for g in spread if max(g.rewards) == 1]
    assert len(added) == sum(-(-len(g.completions[g.rewards.index(1.0)].strip().splitlines()) // 2) for g in right)
    for row in added:
        question = pool.row(row)["prompt"].split("\n")[0]
        assert any(question == g.prompt.split("\n")[0] for g in right)
    drawn_again = [g.row for g in groups if g.step == 2 and g.row in added]
    assert all(pool.stats(r).retired for r in drawn_again)
    assert plugin.partials == set(added) - set(drawn_again)


def test_a_new_iteration_brings_back_every_problem_left_out(make_config):
    trainer, groups = _run(make_config, 2, iteration_steps=1)
    pool = trainer.pool
    assert all(pool.stats(g.row).weight == 1 for g in groups)
    assert all(pool.stats(r).retired for r in range(32, len(pool)))
