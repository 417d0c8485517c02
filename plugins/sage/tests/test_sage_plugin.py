"""SAGE in real training runs: what is hinted, what is trained on, what evaluation sees, and what a checkpoint
keeps. The tiny random model solves nothing, so every group needs hints; the built-in model solves some groups
unhinted and some only under a hint, which is what shows where hinting stops."""

import pytest

from stackrl import PluginError
from stackrl.data import load_prompts
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import StopAt, train_steps
from stackrl_sage import solution_hints
from stackrl_sage.hints import LEVELS

MARK = "HINT "
FOUR_STEPS = {"source": "arithmetic", "size": 1, "seed": 0, "options": {"categories": ["4 steps, 1-digit"]}}
SOLUTION_HINTS = {"hint_source": "solution", "hinted_prompt_template": "{prompt}" + MARK + "{hint}\n"}

# The built-in model on 16 four-step problems, one group of 8 each, all in one batch. It solves some of them
# unhinted, some only under a level-1 or level-2 hint, and some not even at level 3. The CPU recipe's template:
# the hint, a prefix of the solution (level k reveals k of the 4 steps), continues the question.
BUILT_IN = {
    "model": {"name_or_path": "stackrl/arith-tiny"},
    "data": {"source": "arithmetic", "size": 16, "seed": 0, "options": {"categories": ["4 steps, 1-digit"]}},
    "trainer": {"per_device_train_batch_size": 128, "num_generations": 8, "max_completion_length": 64,
                "learning_rate": 2e-5},
}
RECIPE_HINTS = {"hint_source": "solution", "hinted_prompt_template": "{prompt}{hint}\n"}


class TestConformance(PluginConformance):
    plugin_name = "sage"
    plugin_settings = {"sage": {"hint_max_new_tokens": 8, "hint_attempts": 2}}
    refused_settings = [
        ({"mode": "sage-light"}, r"sage\.mode"),
        ({"hint_source": "oracle"}, r"sage\.hint_source"),
        ({"metric": "bleu"}, r"sage\.metric"),
        ({"level_up_at": 0.5, "level_down_above": 0.35}, r"sage\.level_up_at"),
        ({"hint_attempts": 0}, r"sage\.hint_attempts"),
        ({"hint_max_new_tokens": 0}, r"sage\.hint_max_new_tokens"),
        ({"hinted_prompt_template": "{prompt}"}, r"sage\.hinted_prompt_template"),
    ]


class TestConformanceLight(PluginConformance):
    plugin_name = "sage"
    plugin_settings = {"sage": {"mode": "light", **SOLUTION_HINTS}, "data": FOUR_STEPS}


class Calls:
    """A run monitor keeping each call of the sage plugin with its context and result."""

    def __init__(self):
        self.calls = []

    def __call__(self, hook, plugin, kwargs, result):
        if plugin == "sage":
            self.calls.append((hook, kwargs, result))

    def of(self, hook):
        return [(kwargs, result) for h, kwargs, result in self.calls if h == hook]


def the_problem(config):
    return load_prompts(config.host.data)[0]


def trained_prompts(calls, tokenizer):
    return [tokenizer.decode(ids) for kwargs, _ in calls.of("post_step") for ids in kwargs["ctx"].rollout.prompt_ids]


def rollouts(calls):
    return [kwargs["ctx"].rollout for kwargs, _ in calls.of("post_step")]


def by_prompt(rollout, values):
    return dict(zip(rollout.prompts[:: rollout.group_size], values))


def shown_levels(rollout, tokenizer) -> list[int]:
    """The hint level of each group's trained prompt (0: the original), under the CPU recipe's template."""
    levels = []
    for first in range(0, len(rollout), rollout.group_size):
        question = rollout.prompts[first]
        hinted = [question + hint + "\n" for hint in solution_hints(rollout.columns["solution"][first])]
        levels.append([question, *hinted].index(tokenizer.decode(rollout.prompt_ids[first])))
    return levels


def accuracies(rollout) -> list[float]:
    """Each group's share of completions the run's reward (exact_match, computed by the host) counts correct."""
    return (rollout.rewards["exact_match"].view(-1, rollout.group_size) > 0).float().mean(dim=1).tolist()


@pytest.mark.parametrize("train_on_original", [False, True])
def test_unsolved_groups_are_rerolled_up_to_the_top_hint(make_config, train_on_original):
    config = make_config(["sage"], sage={**SOLUTION_HINTS, "train_on_original": train_on_original}, data=FOUR_STEPS)
    calls = Calls()
    trainer = train_steps(config, steps=1, monitor=calls)
    row = the_problem(config)
    top = row["question"] + MARK + solution_hints(row["solution"])[2] + "\n"
    want = row["question"] if train_on_original else top
    assert trained_prompts(calls, trainer.processing_class) == [want] * 4
    logged = trainer.state.log_history[0]
    assert logged["sage/unsolved_groups"] == 1.0 and logged["sage/hint_level"] == 3.0


def test_hinting_stops_at_the_level_that_solves_a_group(make_config):
    config = make_config(["sage"], sage=RECIPE_HINTS, **BUILT_IN)
    calls = Calls()
    trainer = train_steps(config, steps=1, monitor=calls)
    [rollout] = rollouts(calls)
    levels = shown_levels(rollout, trainer.processing_class)
    solved = [accuracy > 0 for accuracy in accuracies(rollout)]
    # Every group left below the top level is solved at the level it was left at: unsolved ones go on up.
    assert all(ok for ok, level in zip(solved, levels) if level < LEVELS), (levels, solved)
    # Groups solved unhinted keep their unhinted samples; groups solved at level 1 or 2 stop there. Re-hinting
    # solved groups, or escalating past the level that solved a group, would leave no group at these levels.
    assert levels.count(0) >= 2, f"no group was kept unhinted: {levels}"
    assert levels.count(1) + levels.count(2) >= 2, f"no group stopped at level 1 or 2: {levels}"
    assert trainer.state.log_history[0]["sage/unsolved_groups"] == sum(lv > 0 for lv in levels) / len(levels)


def test_light_mode_hints_the_prompts_that_failed_their_last_visit(make_config):
    config = make_config(["sage"], sage={"mode": "light", **RECIPE_HINTS}, **BUILT_IN)
    calls = Calls()
    trainer = train_steps(config, steps=2, monitor=calls)
    first, second = rollouts(calls)  # the same 16 prompts, in another order
    assert shown_levels(first, trainer.processing_class) == [0] * first.num_groups  # first visits: no hint
    shown = by_prompt(second, shown_levels(second, trainer.processing_class))
    assert shown == {prompt: int(accuracy <= 0.1) for prompt, accuracy in by_prompt(first, accuracies(first)).items()}
    assert 0 < sum(shown.values()) < len(shown), f"all or none hinted, the test would prove little: {shown}"

    def after(level, accuracy):
        return min(level + 1, LEVELS) if accuracy <= 0.1 else max(level - 1, 0) if accuracy > 0.35 else level

    scored = by_prompt(second, accuracies(second))
    want = {prompt: after(shown[prompt], accuracy) for prompt, accuracy in scored.items()}
    assert trainer.plugins.plugins["sage"].tracker.levels == want


def test_light_mode_raises_the_level_of_a_failing_prompt_visit_by_visit(make_config):
    config = make_config(["sage"], sage={"mode": "light", **SOLUTION_HINTS}, data=FOUR_STEPS)
    calls = Calls()
    trainer = train_steps(config, steps=4, monitor=calls)
    row = the_problem(config)
    hints = solution_hints(row["solution"])
    want = [row["question"], *(row["question"] + MARK + hint + "\n" for hint in hints)]
    assert [result[0] for _, result in calls.of("transform_prompts")] == want
    assert trained_prompts(calls, trainer.processing_class)[::4] == want
    assert trainer.plugins.plugins["sage"].tracker.levels == {row["prompt"]: 3}


def test_light_mode_counts_a_visit_without_a_hint_at_level_0(make_config):
    # The random model cannot write hints: each visit due a hint goes unhinted and counts as a visit at level 0,
    # so a failing prompt is due level 1 again instead of climbing.
    policy_hints = {"mode": "light", "hint_source": "policy", "hint_max_new_tokens": 8, "hint_attempts": 1}
    config = make_config(["sage"], sage=policy_hints, data=FOUR_STEPS)
    calls = Calls()
    trainer = train_steps(config, steps=3, monitor=calls)
    row = the_problem(config)
    assert [result[0] for _, result in calls.of("transform_prompts")] == [row["question"]] * 3
    assert trainer.plugins.plugins["sage"].tracker.levels == {row["prompt"]: 1}
    assert [log["sage/hint_failures"] for log in trainer.state.log_history if "sage/hint_failures" in log] == [1, 1]


@pytest.mark.parametrize("mode", ["sage", "light"])
def test_evaluation_sees_no_hint(make_config, mode):
    evaluating = {"eval_strategy": "steps", "eval_steps": 1, "per_device_eval_batch_size": 4, "max_steps": 3}
    config = make_config(["sage"], sage={"mode": mode, **SOLUTION_HINTS}, data=FOUR_STEPS, trainer=evaluating)
    calls = Calls()
    eval_set = load_prompts(config.host.data, split="test", size=2, keep_answer=True)
    train_steps(config, monitor=calls, eval_dataset=eval_set)
    sample_stage = calls.of("transform_prompts") + calls.of("generate_rollout")
    in_eval = [(kwargs, result) for kwargs, result in sample_stage if not kwargs["ctx"].training]
    in_training = [(kwargs, result) for kwargs, result in sample_stage if kwargs["ctx"].training]
    assert in_eval and all(result is None for _, result in in_eval)
    assert all(MARK not in prompt for kwargs, _ in in_eval for prompt in kwargs["prompts"])
    hinted = [r for _, r in in_training if r is not None and (mode == "sage" or MARK in r[0])]
    assert hinted, "training was never hinted: the test would prove nothing"


def test_tracker_and_hints_survive_a_resume(make_config, tmp_path):
    # One problem, visited every step: the visits do not depend on the data order across epochs.
    saving = {"save_strategy": "steps", "save_steps": 2, "max_steps": 4}

    def run(name, **how):
        config = make_config(
            ["sage"], sage={"mode": "light", **SOLUTION_HINTS}, data=FOUR_STEPS, trainer=saving,
            output_dir=str(tmp_path / name),
        )
        return train_steps(config, **how).plugins.plugins["sage"].state_dict()

    straight = run("straight")
    first = run("resumed", callbacks=[StopAt(2)])
    resumed = run("resumed", resume=True)
    assert list(first["levels"].values()) == [2]  # a fresh start would end two visits later at level 2 again
    assert resumed == straight
    assert list(straight["levels"].values()) == [3] and [e["step"] for e in straight["hints"].values()] == [3]


def test_a_missing_solution_column_is_named(make_config):
    config = make_config(["sage"], sage={**SOLUTION_HINTS, "solution_column": "worked_solution"})
    with pytest.raises(PluginError, match=r"sage\.solution_column: the dataset has no column 'worked_solution'"):
        train_steps(config, steps=1)


def test_losing_generate_rollout_to_another_plugin_is_an_error(make_config):
    pytest.importorskip("stackrl_test_plugins", reason="needs the host's fixture plugins (greedy_rollout)")
    config = make_config(["sage", "greedy_rollout"], exclusive={"generate_rollout": "greedy_rollout"})
    with pytest.raises(PluginError, match="exclusive.generate_rollout"):
        train_steps(config, steps=1)
