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
    rewards = plugin.reward(ctx)
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
    assert _plugin(min_votes=0).reward(_ctx()[0])[:4] == [0.0, 1.0, 1.0, 1.0]


def test_the_proposer_rows_train_only_every_proposer_every_steps_and_a_reply_without_a_question_never():
    texts = [f" {QUESTIONS[1]}\n", " \n", f" {QUESTIONS[2]}\n", f" {QUESTIONS[0]}\n"]
    for step, excluded in ((5, {1}), (6, {0, 1, 2, 3}), (0, {1})):
        plugin = _plugin()
        ctx, asked = _ctx(step=step, proposer_texts=texts)
        assert plugin.reward(ctx)[:4] == [1.0, 0.0, 1.0, 0.0]  # no question: 0, and not solved
        assert len(asked) == 12 and ctx.rollout.excluded == excluded
        assert plugin.pending == [QUESTIONS[1], QUESTIONS[2]]


def test_evaluation_scores_but_sends_no_question_to_the_pool():
    plugin = _plugin()
    ctx, _ = _ctx(training=False)
    assert plugin.reward(ctx)[:4] == [0.0, 1.0, 1.0, 0.0]
    assert plugin.pending == [] and ctx.rollout.excluded == set()


def test_unanswered_solver_rows_outvoting_the_answers_leave_no_majority_as_the_authors_count():
    texts = ["none", "The answer is 3.", "none", "The answer is 3."]
    assert _plugin().reward(_ctx(solver_texts=texts)[0])[4:] == [0.0] * 4
    plain = _plugin(unanswered_votes=False).reward(_ctx(solver_texts=texts)[0])[4:]
    assert plain == [0.0, 1.0, 0.0, 1.0]


# -- the pool in a run (the tiny model: its questions are noise, the plumbing is the same) -------------------------

def test_a_run_draws_the_topic_row_then_the_posed_questions_never_the_dataset(make_config):
    config = make_config(
        ["sqlm"],
        data={"label_free": True, "size": 8},
        rewards={"exact_match": None},
        trainer={"per_device_train_batch_size": 8, "num_generations": 4, "max_steps": 4, "seed": 0},
        sqlm={"proposer_share": 0.5, "solved": "all", "solver_sampling": {"max_new_tokens": 4}},
    )
    drawn = DrawnGroups("sqlm")
    run = build_trainer(config, monitor=drawn)
    run.train()
    pool, plugin = run.pool, run.plugins.plugins["sqlm"]
    assert [row for row in range(len(pool)) if pool.stats(row).category == PROPOSE] == [8]
    assert pool.row(8)["prompt"].startswith("Continue this list of problems with new ones")
    assert pool.row(8)["prompt"].endswith("\n5.")  # four of the dataset's questions, then the next number
    posed = [row for row in range(len(pool)) if pool.stats(row).category == SOLVE]
    assert posed and all(pool.stats(row).label_free for row in posed)
    assert all(pool.row(row)["question"].endswith("\n") for row in posed)  # as the dataset's questions end
    by_step = {}
    for group in drawn.groups:
        by_step.setdefault(group.step, []).append(group.row)
    assert by_step[1] == [8, 8]  # before any question exists, every problem is the topic prompt
    drawn_posed = [row for step in (2, 3, 4) for row in by_step[step] if row != 8]
    assert drawn_posed and all(row in posed for row in drawn_posed)  # the dataset's rows: never
    assert 8 in by_step[2] + by_step[3] + by_step[4]  # the topic stays in the draw at its share
    # A posed question is solved once, then retires; those not yet drawn wait.
    assert len(drawn_posed) == len(set(drawn_posed))
    assert {row for row in posed if pool.stats(row).retired} == set(drawn_posed)
    assert plugin.pending == []
