"""SQLM: the proposer's band reward and the solver's majority vote on hand-built rollouts (the solver's
sub-rollouts scripted), the loss left to the proposer at every proposer_every-th step, the posed questions that
join the pool, and a run on the built-in posing model: topic row, shares and retirements in the pool."""

from types import SimpleNamespace

import pytest

from stackrl import Generation, RewardContext, Rollout
from stackrl.pool import CATEGORY_COLUMN
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import DrawnGroups
from stackrl.run import build_trainer
from stackrl_sqlm import SQLM, SQLMConfig
from stackrl_sqlm.plugin import PROPOSE, SOLVE


class TestConformance(PluginConformance):
    plugin_name = "sqlm"
    refused_settings = [
        ({"solver_samples": 1}, "at least 2"),
        ({"min_votes": 3}, r"0\.\.solver_samples - 2 \(2\)"),
        ({"proposer_share": 1.0}, "strictly between 0 and 1"),
        ({"proposer_every": 0}, "at least 1"),
        ({"topic": "  "}, "is empty"),
    ]


QUESTIONS = ["What is 1 + 1?", "What is 2 + 2?", "What is 3 + 3?", "What is 4 + 4?"]
# The solver's four answers to each posed question: unanimous, two agree, three agree, all differ.
SOLVER = {
    "What is 1 + 1?": ["2", "2", "2", "2"],
    "What is 2 + 2?": ["4", "5", "4", "6"],
    "What is 3 + 3?": ["6", "6", "7", "6"],
    "What is 4 + 4?": ["8", "9", "10", "11"],
}


def _ctx(step=0, training=True, proposer_texts=None, solver_texts=None):
    asked = []

    def generate(prompts, model="policy", caller="", **sampling):
        asked.extend(prompts)
        answers = {q: iter(a) for q, a in SOLVER.items()}
        return [Generation([], [], f"The answer is {next(answers[p.strip()])}.") for p in prompts]

    proposer_texts = proposer_texts or [f" {q}\n5. What is 9 - 9?\n" for q in QUESTIONS]
    solver_texts = solver_texts or ["The answer is 3.", "The answer is 3.", "none", "The answer is 4."]
    texts = proposer_texts + solver_texts
    columns = {CATEGORY_COLUMN: [PROPOSE] * 4 + [SOLVE] * 4}
    rollout = Rollout(["topic"] * 4 + ["q"] * 4, texts, [[1]] * 8, [[2]] * 8, columns, group_size=4)
    ctx = RewardContext(step=step, tokenizer=None, policy=SimpleNamespace(generate=generate), _log=lambda *_: None,
                        _plugin="sqlm", rollout=rollout, training=training)
    return ctx, asked


def _plugin(**settings):
    plugin = SQLM(SQLMConfig(answer_extractor="answer_is", math_verify=False, **settings))
    plugin.name = "sqlm"
    plugin.prompts = lambda question: question + "\n"  # the run's format: the question and its newline
    return plugin


def test_the_proposer_earns_the_band_and_the_solver_its_majority():
    plugin = _plugin()
    ctx, asked = _ctx()
    rewards = plugin.reward(ctx).tolist()
    # Each question asked four times, in one call: 1 + 1 unanimous (0), 2 + 2 two agree (1), 3 + 3 three agree (1),
    # 4 + 4 no two agree (0). The solver group: 3 twice, one without an answer, 4 once: 3 is the majority.
    assert asked == [q + "\n" for q in QUESTIONS for _ in range(4)]
    assert rewards == [0.0, 1.0, 1.0, 0.0] + [1.0, 1.0, 0.0, 0.0]
    assert plugin.pending == ["What is 2 + 2?", "What is 3 + 3?"]  # only questions in the band go to the solver
    assert ctx.rollout.pseudo_labels["sqlm"] == [None] * 4 + ["3"] * 4
    assert ctx.rollout.excluded == set()  # step 0: the proposer trains


def test_every_posed_question_joins_the_pool_with_solved_all():
    plugin = _plugin(solved="all")
    plugin.reward(_ctx()[0])
    assert plugin.pending == QUESTIONS


def test_a_wider_band_rewards_a_question_whose_answers_all_differ():
    assert _plugin(min_votes=0).reward(_ctx()[0]).tolist()[:4] == [0.0, 1.0, 1.0, 1.0]


def test_the_proposer_rows_train_only_every_proposer_every_steps_and_a_reply_without_a_question_never():
    texts = [f" {QUESTIONS[1]}\n", " \n", f" {QUESTIONS[2]}\n", f" {QUESTIONS[0]}\n"]
    for step, excluded in ((5, {1}), (6, {0, 1, 2, 3}), (0, {1})):
        plugin = _plugin()
        ctx, asked = _ctx(step=step, proposer_texts=texts)
        assert plugin.reward(ctx).tolist()[:4] == [1.0, 0.0, 1.0, 0.0]  # no question: 0, and not solved
        assert len(asked) == 12 and ctx.rollout.excluded == excluded
        assert plugin.pending == [QUESTIONS[1], QUESTIONS[2]]


def test_evaluation_scores_but_sends_no_question_to_the_pool():
    plugin = _plugin()
    ctx, _ = _ctx(training=False)
    assert plugin.reward(ctx).tolist()[:4] == [0.0, 1.0, 1.0, 0.0]
    assert plugin.pending == [] and ctx.rollout.excluded == set()


def test_unanswered_solver_rows_outvoting_the_answers_leave_no_majority_as_the_authors_count():
    texts = ["none", "The answer is 3.", "none", "The answer is 3."]
    assert _plugin().reward(_ctx(solver_texts=texts)[0]).tolist()[4:] == [0.0] * 4
    plain = _plugin(unanswered_votes=False).reward(_ctx(solver_texts=texts)[0]).tolist()[4:]
    assert plain == [0.0, 1.0, 0.0, 1.0]


# -- in a run of the built-in posing model ------------------------------------------------------------------------

def test_a_run_draws_the_topic_row_then_the_posed_questions_at_their_share(make_config):
    config = make_config(
        ["sqlm"],
        model={"name_or_path": "stackrl/arith-skills"},
        data={"label_free": True, "size": 8},
        rewards={"exact_match": None},
        trainer={"per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 48,
                 "max_steps": 3, "temperature": 1.0, "seed": 0},
        sqlm={"answer_extractor": "answer_is", "math_verify": False, "proposer_share": 0.5, "proposer_every": 1,
              "solver_samples": 3, "min_votes": 0, "solver_sampling": {"max_new_tokens": 48}},
    )
    drawn = DrawnGroups("sqlm")
    run = build_trainer(config, monitor=drawn)
    run.train()
    pool, plugin = run.pool, run.plugins.plugins["sqlm"]
    topic = [row for row in range(len(pool)) if pool.stats(row).category == PROPOSE]
    assert topic == [8] and pool.row(8)["prompt"].startswith("Continue this list of problems")
    assert all(pool.stats(row).weight == 1.0 for row in range(8))
    posed = [row for row in range(len(pool)) if pool.stats(row).category == SOLVE]
    assert posed, "the model posed no question in the band in two steps"
    assert all(pool.row(row)["question"].endswith("?\n") and pool.stats(row).label_free for row in posed)
    by_step = {}
    for group in drawn.groups:
        by_step.setdefault(group.step, []).append(group.row)
    assert by_step[1] == [8] * 2  # before any question exists, every problem is the topic prompt
    assert all(row in topic + posed for rows in by_step.values() for row in rows)  # the dataset's rows never
    # A posed question is solved once, then retires.
    solved = [row for rows in by_step.values() for row in rows if row in posed]
    assert len(solved) == len(set(solved)) and all(pool.stats(row).retired for row in solved)
    assert plugin.pending == []
