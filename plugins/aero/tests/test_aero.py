"""AERO: the normalised answer entropy and its zones, the counterfactual correction's rule, the generator's and the
solver's rewards on a hand-built rollout (the solver's answers and the corrections scripted), the staggered release
of labelled questions (with the refiner's retry rows) to the pool, and the queue across a checkpoint."""

import math
from types import SimpleNamespace

import pytest
import torch

from stackrl import Generation, RewardContext, Rollout
from stackrl.answers import group_answers
from stackrl.pool import CATEGORY_COLUMN
from stackrl.testing.conformance import PluginConformance
from stackrl_aero import AERO, AEROConfig
from stackrl_aero.correction import Verdict, counterfactual_label, refine_text, top_two
from stackrl_aero.plugin import LABEL_COLUMN
from stackrl_aero.zone import Zone, normalised_entropy, zone


class TestConformance(PluginConformance):
    plugin_name = "aero"
    refused_settings = [
        ({"low": 0.8, "high": 0.7}, r"0 <= low <= high <= 1"),
        ({"high": 1.5}, r"0 <= low <= high <= 1"),
        ({"stagger": -1}, "0 or more"),
        ({"solver_samples": 1}, "at least 2"),
    ]


# -- the zones --------------------------------------------------------------------------------------------------

def _group(*answers):
    return group_answers(list(answers), math_verify=False)


def test_the_normalised_entropy_is_the_answer_entropy_over_log_n_by_hand():
    three_one = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25)) / 2  # 0.4056
    assert normalised_entropy(_group("2", "2", "2", "3")) == pytest.approx(three_one)
    assert normalised_entropy(_group("1", "2", "3", "4")) == pytest.approx(1.0)
    assert normalised_entropy(_group("2", "2", "2", "2")) == 0.0
    # Unanswered rows are left out of the shares but count in n: two answers of four, split, are 1 bit of 2.
    assert normalised_entropy(_group("2", "3", None, None)) == pytest.approx(0.5)
    six_two = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25)) / 3  # 0.2704 with 8 samples
    five_three = -(5 / 8 * math.log2(5 / 8) + 3 / 8 * math.log2(3 / 8)) / 3  # 0.3181
    assert normalised_entropy(_group(*"aaaaaabb")) == pytest.approx(six_two)
    assert normalised_entropy(_group(*"aaaaabbb")) == pytest.approx(five_three)


def test_the_zones_below_within_and_above_the_band_with_both_bounds_in():
    assert zone(_group(*"aaaaaabb"), 0.3, 0.7) == Zone.mastery  # 0.270
    assert zone(_group(*"aaaaabbb"), 0.3, 0.7) == Zone.zpd  # 0.318
    assert zone(_group("2", "2", "2", "3"), 0.3, 0.7) == Zone.zpd
    assert zone(_group("1", "2", "3", "3"), 0.3, 0.7) == Zone.chaos  # 0.75
    assert zone(_group("1", "2", "3", "4"), 0.3, 0.7) == Zone.chaos
    assert zone(_group(None, None, None, None), 0.3, 0.7) == Zone.chaos  # nothing answered: too hard
    assert zone(_group("2", "3", None, None), 0.3, 0.7) == Zone.zpd  # a cluster of "none" would make it 0.75
    split = _group("1", "1", "2", "2")  # exactly 0.5
    assert zone(split, 0.5, 0.5) == Zone.zpd
    assert zone(split, 0.51, 0.7) == Zone.mastery and zone(split, 0.3, 0.49) == Zone.chaos


# -- the counterfactual correction's rule -------------------------------------------------------------------------

def test_the_two_largest_clusters_a_tie_to_the_first_answered():
    assert top_two(_group("5", "4", "5", "4", "6")) == [0, 1]
    assert top_two(_group("6", "4", "5", "4", "5")) == [1, 2]
    assert top_two(_group("6", "6", "6")) == [0]


def test_converged_corrections_label_the_question_and_mark_the_clusters_that_differ():
    assert counterfactual_label(["5", "4"], ["4", "4"], False) == Verdict("4", (True, False))
    assert counterfactual_label(["4", "5"], ["4", "4"], False) == Verdict("4", (False, True))
    assert counterfactual_label(["4", "5"], ["6", "6"], False) == Verdict("6", (True, True))  # both wrong
    assert counterfactual_label(["4", "5"], ["4", "5"], False) is None  # each defends its own: no label
    assert counterfactual_label(["4", "5"], [None, "4"], False) is None
    assert counterfactual_label(["1/2", "3"], ["0.5", "0.5"], True) == Verdict("0.5", (False, True))


# -- the reward stage on a hand-built rollout ---------------------------------------------------------------------

QUESTIONS = ["What is 1 + 1?", "What is 2 + 2?", "What is 3 + 3?", "What is 4 + 4?"]
# The solver's four answers: unanimous (mastery), an even split 5/4 (ZPD, 0.5), three to one (ZPD, 0.41), all
# different (chaos). None: a reply without an answer.
SOLVER = {
    "What is 1 + 1?": ["2", "2", "2", "2"],
    "What is 2 + 2?": ["5", "4", "5", "4"],
    "What is 3 + 3?": ["6", "6", "6", "7"],
    "What is 4 + 4?": ["8", "9", "10", "11"],
}
RETRY = "\nTry again.\n"
# The corrections of each ZPD question's first attempt of its two largest clusters: 2 + 2's agree on 4 (the 5s were
# wrong), 3 + 3's each defend their own answer (no label).
CORRECTIONS = {
    "What is 2 + 2?\nThe answer is 5." + RETRY: "The answer is 4.",
    "What is 2 + 2?\nThe answer is 4." + RETRY: "The answer is 4.",
    "What is 3 + 3?\nThe answer is 6." + RETRY: "The answer is 6.",
    "What is 3 + 3?\nThe answer is 7." + RETRY: "The answer is 7.",
}


class Prompts:
    """The run's prompt format: the question and its newline."""

    ending = "\n"

    def text(self, question):
        return question + "\n"

    def __call__(self, question):
        return question + "\n"


def _ctx(training=True, proposer_texts=None, solver_texts=None):
    calls = []

    def generate(prompts, model="policy", caller="", **sampling):
        calls.append((list(prompts), sampling))
        answers = {q: iter(a) for q, a in SOLVER.items()}
        out = []
        for p in prompts:
            if p.endswith(RETRY):
                out.append(Generation([], [], CORRECTIONS[p]))
            else:
                out.append(Generation([], [], f"The answer is {next(answers[p.strip()])}."))
        return out

    proposer_texts = proposer_texts or [f" {q}\n5. What is 9 - 9?\n" for q in QUESTIONS]
    solver_texts = solver_texts or ["The answer is 3.", "The answer is 4.", "none", "The answer is 3."]
    columns = {CATEGORY_COLUMN: ["aero/propose"] * 4 + ["aero/solve"] * 4, LABEL_COLUMN: [None] * 4 + ["3"] * 4}
    rollout = Rollout(["topic"] * 4 + ["q"] * 4, proposer_texts + solver_texts, [[1]] * 8, [[2]] * 8, columns,
                      group_size=4)
    ctx = RewardContext(step=0, tokenizer=None, policy=SimpleNamespace(generate=generate), _log=lambda *_: None,
                        _plugin="aero", rollout=rollout, training=training)
    return ctx, calls


def _plugin(**settings):
    plugin = AERO(AEROConfig(answer_extractor="answer_is", math_verify=False, solver_samples=4, **settings))
    plugin.name = "aero"
    plugin.prompts = Prompts()
    return plugin


def test_the_generator_earns_the_zpd_and_converged_corrections_label_the_question():
    plugin = _plugin()
    ctx, calls = _ctx()
    rewards = plugin.reward(ctx)
    assert rewards == [0.0, 1.0, 1.0, 0.0] + [1.0, 0.0, 0.0, 1.0]  # the solver's rows: reaching the label 3
    solve, correct = calls
    assert solve[0] == [q + "\n" for q in QUESTIONS for _ in range(4)]
    # One call for every correction: the first attempt of each of the two largest clusters, retried, at the critic's
    # temperature.
    assert correct == (["What is 2 + 2?\nThe answer is 5." + RETRY, "What is 2 + 2?\nThe answer is 4." + RETRY,
                        "What is 3 + 3?\nThe answer is 6." + RETRY, "What is 3 + 3?\nThe answer is 7." + RETRY],
                       {"temperature": 0.1})
    # 2 + 2 converged on 4 (not its majority, 5, written first); its wrong cluster's attempt is the refiner's.
    assert plugin.pending == [{"question": "What is 2 + 2?", "label": "4", "wrong": ["The answer is 5."]}]
    assert ctx.rollout.pseudo_labels["aero"] == [None] * 4 + ["3"] * 4
    assert [r.zone for r in plugin.rated] == [Zone.mastery, Zone.zpd, Zone.zpd, Zone.chaos]


def test_without_correction_the_majority_labels_every_zpd_question_and_nothing_is_corrected():
    plugin = _plugin(correction=False)
    ctx, calls = _ctx()
    assert plugin.reward(ctx)[:4] == [0.0, 1.0, 1.0, 0.0]
    assert len(calls) == 1
    assert plugin.pending == [{"question": "What is 2 + 2?", "label": "5", "wrong": ["The answer is 4."]},
                              {"question": "What is 3 + 3?", "label": "6", "wrong": ["The answer is 7."]}]


def test_a_reply_without_a_question_leaves_the_loss_and_evaluation_labels_nothing():
    plugin = _plugin()
    texts = [" \n", f" {QUESTIONS[1]}\n", f" {QUESTIONS[0]}\n", f" {QUESTIONS[3]}\n"]
    ctx, calls = _ctx(proposer_texts=texts)
    assert plugin.reward(ctx)[:4] == [0.0, 1.0, 0.0, 0.0]
    assert ctx.rollout.excluded == {0} and len(calls[0][0]) == 12
    evaluation = _plugin()
    assert evaluation.reward(_ctx(training=False)[0])[:4] == [0.0, 1.0, 1.0, 0.0]
    assert evaluation.pending == []


# -- the staggered release to the pool ----------------------------------------------------------------------------

class Released:
    """Stands for the self-play pool: records what post_step adds."""

    def __init__(self):
        self.added = []

    def after_step(self, pool, prompts, questions, columns=None):
        self.added.append(list(zip(questions, [c[LABEL_COLUMN] for c in columns])))
        return list(range(len(questions)))


def _post_step(plugin):
    plugin.post_step(SimpleNamespace(pool=object(), log=lambda *_: None))
    return plugin.selfplay.added[-1]


ITEM = {"question": "What is 2 + 2?", "label": "4", "wrong": ["The answer is 5."]}
RETRY_ROW = "What is 2 + 2?\nThe answer is 5.\nTry again."  # the problem text; the run's format adds the newline


def test_a_labelled_question_joins_the_pool_stagger_steps_later_with_its_refiner_row():
    plugin = _plugin(stagger=1)
    plugin.selfplay = Released()
    plugin.pending = [dict(ITEM)]
    assert _post_step(plugin) == []  # posed at this step: waits one step
    assert _post_step(plugin) == [("What is 2 + 2?", "4"), (RETRY_ROW, "4")]
    assert refine_text(Prompts(), "What is 2 + 2?", "The answer is 5.") == RETRY_ROW
    now = _plugin(stagger=0, refiner=False)
    now.selfplay = Released()
    now.pending = [dict(ITEM)]
    assert _post_step(now) == [("What is 2 + 2?", "4")]
    later = _plugin(stagger=2)
    later.selfplay = Released()
    later.pending = [dict(ITEM)]
    assert [_post_step(later) for _ in range(3)] == [[], [], [("What is 2 + 2?", "4"), (RETRY_ROW, "4")]]


def test_the_waiting_questions_survive_a_weights_only_checkpoint(tmp_path):
    plugin = _plugin(stagger=1)
    plugin.selfplay = Released()
    plugin.pending = [dict(ITEM)]
    _post_step(plugin)
    torch.save(plugin.state_dict(), tmp_path / "state.pt")
    restored = _plugin(stagger=1)
    restored.selfplay = Released()
    restored.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert _post_step(restored) == [("What is 2 + 2?", "4"), (RETRY_ROW, "4")]
