"""SEIF: the alternation, the Filter's rules, the Judger and the Instructor's reward (1 - adherence) on hand-built
rollouts with the evaluator's answers scripted, the loss left to the role that trains, the instructions that join
the pool (the draw in a real run: tests/test_seif_mechanism.py)."""

from types import SimpleNamespace

import pytest

from stackrl import Generation, RewardContext, Rollout
from stackrl.blocks.selfinstruct import SelfInstructSettings
from stackrl.pool import CATEGORY_COLUMN
from stackrl.testing.conformance import PluginConformance
from stackrl_seif import SEIF, SEIFConfig
from stackrl_seif.plugin import ANSWER_COLUMN, SNAPSHOT
from stackrl_seif.roles import Role, Schedule, instructor_reward, judged, rejection

PROPOSE, SOLVE = "seif/propose", "seif/solve"


class TestConformance(PluginConformance):
    plugin_name = "seif"
    refused_settings = [
        ({"instructor_steps": 0}, "at least 1"),
        ({"follower_steps": 0}, "at least 1"),
        ({"first_follower_steps": 0}, "at least 1"),
        ({"follower_samples": 0}, "at least 1"),
        ({"topic_examples": 0}, "at least 1 without a topic"),
        ({"topic": "  "}, "is empty"),
    ]


# -- the formulas ---------------------------------------------------------------------------------------------------

def test_the_schedule_alternates_with_a_longer_first_follower_stage():
    schedule = Schedule(instructor_steps=2, follower_steps=3, first_follower_steps=5)
    roles = "".join("I" if schedule.role(s) == Role.instructor else "F" for s in range(18))
    assert roles == "IIFFFFF" + "IIFFF" + "IIFFF" + "I"
    assert [s for s in range(18) if schedule.turn_starts(s)] == [0, 7, 12, 17]


RULES = SelfInstructSettings()


@pytest.mark.parametrize("question, reason", [
    ("What is (3 + 4) * 2?", None),
    (None, "empty"),
    ("  ", "empty"),
    ("What is 7?", "length"),  # three words
    ("Draw a picture of 3 + 4 please", "banned"),
    ("(3 + 4) * 2 is what number?", "form"),
    ("What is 3 - 9 + 1?", "invalid"),  # a value below 0: no problem of the task
    ("What is (3 + 4) * 12?", "invalid"),  # a multiplier outside 2-9
    ("What is 3 + 4 + 5?", "invalid"),  # not the chain the task writes: (3 + 4) + 5
    ("Add three and four for me", "invalid"),
    ("What is  (1 + 2) * 3?", "repeat"),  # a known question, spaced differently
])
def test_the_filter_refuses_what_no_follower_could_follow(question, reason):
    assert rejection(question, {"What is (1 + 2) * 3?"}, RULES) == reason


def test_the_judger_accepts_the_instructions_answer_only():
    assert judged("14", "14") and not judged("15", "14") and not judged(None, "14")


def test_the_instructor_earns_the_followers_failure_rate():
    assert instructor_reward([True, False, False, False]) == 0.75
    assert instructor_reward([True] * 4) == 0.0
    assert instructor_reward([False] * 3) == 1.0
    assert instructor_reward([True]) == 0.0  # the authors' single answer
    with pytest.raises(ValueError):
        instructor_reward([])


# -- the reward stage on a hand-built rollout ------------------------------------------------------------------------

# The evaluator's four answers to each instruction that passes the Filter.
EVALUATOR = {
    "What is (3 + 4) * 2?": ["14", "15", "14", "16"],  # two of four right: 0.5
    "What is 5 + 6?": ["11", "11", "11", "11"],  # all right: 0
    "What is (9 - 2) * 3?": ["20", "22", "none", "24"],  # none right: 1
}
INSTRUCTOR = [" What is (3 + 4) * 2?\n5. What is 1 + 1?\n", " What is 5 + 6?\n", " What is 3 - 9 + 1?\n",
              " What is (1 + 2) * 3?\n", " What is (9 - 2) * 3?\n", "\n"]


def _ctx(step, training=True):
    asked = []

    def generate(prompts, model="policy", caller="", **sampling):
        asked.append((model, list(prompts), sampling))
        answers = {q: iter(a) for q, a in EVALUATOR.items()}
        return [Generation([], [], f"3 + 4 = 7\nThe answer is {next(answers[p.strip()])}.") for p in prompts]

    follower = ["The answer is 21.", "The answer is 20.", "no answer", "The answer is 21."]
    texts = INSTRUCTOR + ["x", "x"] + follower
    columns = {CATEGORY_COLUMN: [PROPOSE] * 8 + [SOLVE] * 4, ANSWER_COLUMN: [None] * 8 + ["21"] * 4}
    rollout = Rollout(["topic"] * 8 + ["q"] * 4, texts, [[1]] * 12, [[2]] * 12, columns, group_size=4)
    ctx = RewardContext(step=step, tokenizer=None, policy=SimpleNamespace(generate=generate), _log=lambda *_: None,
                        _plugin="seif", rollout=rollout, training=training)
    return ctx, asked


def _plugin(**settings):
    settings = {"instructor_steps": 2, "follower_steps": 2, **settings}
    plugin = SEIF(SEIFConfig(answer_extractor="answer_is", math_verify=False, **settings))
    plugin.name = "seif"
    plugin.prompts = lambda question: question + "\n"  # the run's format: the question and its newline
    plugin.known = {"What is (1 + 2) * 3?"}
    return plugin


def test_the_instructor_earns_the_failure_rate_of_the_evaluators_answers_and_0_when_filtered():
    plugin = _plugin(follower_sampling={"max_new_tokens": 48})
    ctx, asked = _ctx(step=0)
    rewards = plugin.reward(ctx)
    # Filtered (0, never asked): a negative value, a known question, an empty reply; the rows "x" pose "x" (length).
    assert rewards[:8] == [0.5, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    assert [r.rejected for r in plugin.rated] == [None, None, "invalid", "repeat", None, "empty", "length", "length"]
    passed = ["What is (3 + 4) * 2?", "What is 5 + 6?", "What is (9 - 2) * 3?"]
    assert asked == [(SNAPSHOT, [q + "\n" for q in passed for _ in range(4)], {"max_new_tokens": 48})]
    # The Follower's rows: 1 for the instruction's answer (21).
    assert rewards[8:] == [1.0, 0.0, 0.0, 1.0]
    # An Instructor step: the Follower's rows stay out of the loss, and the passed instructions wait with their answers.
    assert ctx.rollout.excluded == {8, 9, 10, 11}
    assert plugin.pending == [(passed[0], "14"), (passed[1], "11"), (passed[2], "21")]


def test_a_follower_step_leaves_the_instructor_rows_out_of_the_loss_and_sends_nothing_to_the_pool():
    plugin = _plugin(evaluator="policy")
    ctx, asked = _ctx(step=2)
    rewards = plugin.reward(ctx)
    assert rewards == [0.5, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert asked[0][0] == "policy"
    assert ctx.rollout.excluded == set(range(8))
    assert plugin.pending == []


def test_evaluation_scores_but_neither_masks_nor_sends_to_the_pool():
    plugin = _plugin()
    ctx, _ = _ctx(step=0, training=False)
    assert plugin.reward(ctx)[8:] == [1.0, 0.0, 0.0, 1.0]
    assert ctx.rollout.excluded == set() and plugin.pending == []
