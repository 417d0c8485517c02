"""Tests of the `lanpo` plugin: the host's conformance suite, then the method's own."""

from stackrl.testing.conformance import PluginConformance


class TestConformance(PluginConformance):
    plugin_name = "lanpo"
    refused_settings = [({"reflect_share": 1.5}, r"must lie in \[0, 1\], not 1.5"),
                        ({"reflect_share": 0.6, "abstract_share": 0.6}, "the shares exceed 1"),
                        ({"reflect_share": 0.0, "abstract_share": 0.0}, "no row is ever shown a trial"),
                        ({"reflection": "oracle"}, "must be one of retry, check, not 'oracle'"),
                        ({"abstraction": "all"}, "must be one of trajectory, policy, not 'all'"),
                        ({"related": 0}, "must be at least 1, not 0"),
                        ({"min_relevance": -0.1}, "must be non-negative"),
                        ({"reflection_template": "{prompt} again"}, "must contain {attempt}"),
                        ({"abstraction_template": "{prompt}"}, "must contain {lessons}"),
                        ({"summary_template": "summarise"}, "must contain {trials}"),
                        ({"experience": {"capacity": 0}}, "capacity must be at least 1, not 0")]


import io
from types import SimpleNamespace

import pytest
import torch

from stackrl.testing.fixtures import make_plugin
from stackrl.tasks import checked_retry_prompt, judge_prompt, retry_prompt
from stackrl_lanpo.contexts import ABSTRACT, PLAIN, REFLECT, SUMMARY_TEMPLATE, row_modes

A, B, C = "What is (3 + 4) * 2?\n", "What is (3 + 4) - 5?\n", "What is 9 - 8?\n"


def tokenizer(text, add_special_tokens=False):
    return {"input_ids": [ord(c) for c in text]}


class Sample:
    """The sample stage's context: the policy answers every request with ``reply`` and keeps the requests."""

    def __init__(self, group_size=4, reply="3 + 4 = 7 | 7 yes\nVerdict: correct", training=True):
        self.group_size, self.training, self.tokenizer, self.reply = group_size, training, tokenizer, reply
        self.requests, self.logged, self.acted_on, self.train_on_original = [], {}, None, False

    def generate(self, prompts):
        self.requests.extend(prompts)
        return [SimpleNamespace(text=self.reply) for _ in prompts]

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, *, of, hint=None):
        self.acted_on = (n, of)


def stored_step(plugin, questions, completions, rewards, step=1):
    """``post_step`` of a rollout of ``questions`` (each repeated per its completions) with those rewards."""
    prompts = [q for q, texts in zip(questions, completions) for _ in texts]
    texts = [t for group in completions for t in group]
    rollout = SimpleNamespace(prompts=prompts, completions=texts, completion_ids=[[ord(t[0])] for t in texts],
                              rewards={"exact_match": torch.tensor([r for g in rewards for r in g])})
    rollout.__len__ = lambda: len(texts)
    plugin.post_step(SimpleNamespace(rollout=Rollout(rollout), step=step, tokenizer=tokenizer))


class Rollout(SimpleNamespace):
    def __init__(self, inner):
        super().__init__(**vars(inner))

    def __len__(self):
        return len(self.prompts)


def test_row_modes_split_each_group_reflect_then_abstract_then_plain():
    assert row_modes(4, 0.25, 0.25) == [REFLECT, ABSTRACT, PLAIN, PLAIN]
    assert row_modes(4, 0.5, 0.5) == [REFLECT, REFLECT, ABSTRACT, ABSTRACT]
    assert row_modes(2, 0.25, 0.25) == [REFLECT, ABSTRACT]  # half up
    assert row_modes(3, 0.5, 0.5) == [REFLECT, REFLECT, ABSTRACT]  # never more rows than the group has
    assert row_modes(4, 0.0, 0.1) == [PLAIN] * 4  # a share below half a row gives none


def test_a_reflection_row_shows_its_questions_newest_trial_in_the_retry_format_and_nothing_before_the_first():
    plugin = make_plugin("lanpo", reflect_share=0.5, abstract_share=0.0)
    ctx = Sample()
    assert plugin.transform_prompts([A] * 4, ctx) == [A] * 4  # an empty pool: every row plain
    assert ctx.acted_on == (0, 4)
    stored_step(plugin, [A, B], [["A old\n", "A new\n"], ["B new\n", "B newer\n"]], [[1.0, 0.0], [0.0, 1.0]])
    out = plugin.transform_prompts([A] * 4 + [B] * 4, ctx)
    # Rows 0 and 1 of each group reflect on the question's own trials, newest first; never another question's.
    assert out == [retry_prompt(A, "A new\n"), retry_prompt(A, "A old\n"), A, A,
                   retry_prompt(B, "B newer\n"), retry_prompt(B, "B new\n"), B, B]
    assert ctx.acted_on == (4, 8)


def test_an_abstraction_row_shows_the_most_relevant_trial_of_another_question_not_the_newest_nor_its_own():
    plugin = make_plugin("lanpo", reflect_share=0.0, abstract_share=0.25)
    # B is closer to A than C (ROUGE-L 0.8 against 0.36); C's trial is the newest; A's own is closest of all.
    stored_step(plugin, [B, A, C], [["b"], ["a"], ["c"]], [[0.0], [1.0], [1.0]])
    out = plugin.transform_prompts([A] * 4, Sample())
    assert out == [f"{B}b\n\n{A}", A, A, A]
    assert plugin.shown[0][0] == ABSTRACT and plugin.library.get(plugin.shown[0][1][0]).prompt == B


def test_min_relevance_leaves_a_question_without_a_related_trial_plain():
    plugin = make_plugin("lanpo", reflect_share=0.0, abstract_share=0.25, min_relevance=0.9)
    stored_step(plugin, [B], [["b\n"]], [[1.0]])
    ctx = Sample()
    assert plugin.transform_prompts([A] * 4, ctx) == [A] * 4 and ctx.acted_on == (0, 4)


def test_contexts_are_reward_agnostic_the_same_trials_with_other_rewards_give_the_same_prompts():
    prompts = [A] * 4 + [B] * 4 + [C] * 4
    built = []
    for rewards in ([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]]):
        plugin = make_plugin("lanpo", reflect_share=0.5, abstract_share=0.25)
        stored_step(plugin, [A, B, C], [["a1\n", "a2\n"], ["b1\n", "b2\n"], ["c1\n", "c2\n"]], rewards)
        built.append(plugin.transform_prompts(prompts, Sample()))
    assert built[0] == built[1]
    assert all(word not in text for text in built[0] for word in ("1.0", "0.0", "correct", "wrong", "reward"))


def test_check_reflection_has_the_policy_check_its_trial_before_the_retry():
    plugin = make_plugin("lanpo", reflect_share=0.25, abstract_share=0.0, reflection="check")
    stored_step(plugin, [A], [["3 + 4 = 8\n"]], [[0.0]])
    ctx = Sample(reply=" 3 + 4 = 7 | 8 no\nVerdict: wrong\n")
    out = plugin.transform_prompts([A] * 4, ctx)
    assert ctx.requests == [judge_prompt(A, "3 + 4 = 8\n")]
    assert out[0] == checked_retry_prompt(A, "3 + 4 = 8\n", "3 + 4 = 7 | 8 no\nVerdict: wrong") and out[1:] == [A] * 3


def test_policy_abstraction_puts_the_policys_lessons_from_the_related_trials_before_the_question():
    plugin = make_plugin("lanpo", reflect_share=0.0, abstract_share=0.5, abstraction="policy")
    stored_step(plugin, [B], [["b"]], [[1.0]])
    ctx = Sample(reply="Work the brackets first.")
    out = plugin.transform_prompts([A] * 4, ctx)
    assert ctx.requests == [SUMMARY_TEMPLATE.format(trials=f"{B}b\n")]  # one request for the group
    assert out == [f"Work the brackets first.\n\n{A}"] * 2 + [A, A]


def test_every_row_goes_into_the_pool_under_its_dataset_question_once_per_rollout():
    plugin = make_plugin("lanpo")
    stored_step(plugin, [A, B], [["a1\n", "a2\n"], ["b1\n", "b2\n"]], [[1.0, 0.0], [0.0, 1.0]])
    assert [(r.prompt, r.completion, r.rewards["exact_match"]) for r in plugin.library] == [
        (A, "a1\n", 1.0), (A, "a2\n", 0.0), (B, "b1\n", 0.0), (B, "b2\n", 1.0)]
    rollout = plugin._stored
    plugin.post_step(SimpleNamespace(rollout=rollout, step=2, tokenizer=tokenizer))  # the same rollout again
    assert len(plugin.library) == 4


def test_train_on_original_is_set_only_where_asked_and_never_cleared():
    for asked, before, after in ((True, False, True), (False, True, True), (False, False, False)):
        plugin, ctx = make_plugin("lanpo", train_on_original=asked), Sample()
        ctx.train_on_original = before
        plugin.transform_prompts([A] * 4, ctx)
        assert ctx.train_on_original is after


def test_evaluation_is_left_alone():
    plugin = make_plugin("lanpo")
    stored_step(plugin, [A], [["a\n"]], [[1.0]])
    assert plugin.transform_prompts([A] * 4, Sample(training=False)) is None


def test_a_restored_pool_gives_the_same_contexts():
    plugin = make_plugin("lanpo", reflect_share=0.5, abstract_share=0.25)
    stored_step(plugin, [A, B, C], [["a1\n", "a2\n"], ["b1\n", "b2\n"], ["c1\n", "c2\n"]], [[1, 0], [0, 1], [1, 1]])
    buffer = io.BytesIO()
    torch.save(plugin.state_dict(), buffer)
    restored = make_plugin("lanpo", reflect_share=0.5, abstract_share=0.25)
    restored.load_state_dict(torch.load(io.BytesIO(buffer.getvalue()), weights_only=True))
    prompts = [A] * 4 + [B] * 4 + [C] * 4
    assert restored.transform_prompts(prompts, Sample()) == plugin.transform_prompts(prompts, Sample())


def test_a_resumed_run_retrieves_the_records_the_interrupted_one_kept(make_config, tmp_path):
    """Stopped after step 2 with a checkpoint, resumed for step 3: the pool comes back record for record, and the
    contexts of step 3 show the trials the interrupted run's pool gives those prompts."""
    from stackrl.run import build_trainer
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.fixtures import StopAt

    trainer = {"per_device_train_batch_size": 8, "max_completion_length": 8, "max_steps": 3,
               "save_strategy": "steps", "save_steps": 2}
    config = make_config(["lanpo"], data={"size": 4}, trainer=trainer,
                         lanpo={"reflect_share": 0.5, "abstract_share": 0.25})
    def records(plugin):
        return [(r.key, r.prompt, r.completion, r.step, r.tags, r.rewards) for r in plugin.library]

    batches = []
    monitor = lambda hook, plugin, kwargs, result: (  # noqa: E731
        batches.append((list(kwargs["prompts"]), result, records(resumed.plugins.plugins["lanpo"])))
        if hook == "transform_prompts" and plugin == "lanpo" else None)
    with one_thread():
        first = build_trainer(config, callbacks=[StopAt(2)])
        first.train()
        resumed = build_trainer(config, monitor=monitor)
        resumed.train(resume_from_checkpoint=True)
    kept = first.plugins.plugins["lanpo"]
    assert len(batches) == 1 and batches[0][2] == records(kept) and len(kept.library) == 16  # two steps' rows
    prompts, contexts, _ = batches[0]
    assert contexts != prompts  # step 3 showed trials
    ctx = Sample(group_size=4)
    ctx.tokenizer = resumed.processing_class
    assert kept.transform_prompts(prompts, ctx) == contexts
