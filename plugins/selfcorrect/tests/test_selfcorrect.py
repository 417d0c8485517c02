"""Self-rewarding correction: rejection-sampled self-correction data, then RL on the final answer and the verdicts."""

from types import SimpleNamespace

import pytest

from stackrl.blocks.turns import Segment
from stackrl.context import Rollout
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import Scripted, make_plugin
from stackrl_selfcorrect import SelfcorrectConfig, collect

A, V = "answer", "verify"
EOS = Scripted.eos_token_ids[0]
RIGHT, WRONG_ANSWER = "The answer is 4.", "The answer is 5."
SAYS_RIGHT, SAYS_WRONG = "Verdict: correct", "Verdict: wrong"


class TestConformance(PluginConformance):
    plugin_name = "selfcorrect"
    refused_settings = [
        ({"turns": 0}, "selfcorrect.turns: must be at least 1"),
        ({"verdict_tries": 0}, "selfcorrect.verdict_tries: must be at least 1"),
        ({"collect_steps": -1}, "selfcorrect.collect_steps: must be at least 0"),
        ({"sft_learning_rate": 0.0}, "selfcorrect.sft_learning_rate: must be positive"),
        ({"sft_batch_size": 0}, "selfcorrect.sft_batch_size: must be at least 1 or null"),
        ({"verdict_weight": -0.5}, "selfcorrect.verdict_weight: must be 0 or more"),
        ({"told_wrong": " "}, "selfcorrect.told_wrong: must hold the instruction"),
        ({"metric": "selfcorrect"}, "selfcorrect.metric: must be a built-in outcome reward"),
    ]


def test_collection_keeps_only_right_verdicts_and_right_revisions_and_trains_no_wrong_turn():
    replies = {
        # a right answer: "wrong" is drawn first and dropped, "correct" kept; told wrong, its revision stays right
        "P0|": [RIGHT, SAYS_WRONG, SAYS_RIGHT, RIGHT],
        # a wrong answer: "correct" dropped, "wrong" kept; a wrong revision dropped, a right one kept
        "P1|": [WRONG_ANSWER, SAYS_RIGHT, SAYS_WRONG, WRONG_ANSWER, RIGHT],
        "P2|": [WRONG_ANSWER, SAYS_RIGHT, SAYS_RIGHT, RIGHT],  # never a right verdict in its tries: dropped
        "P3|": [WRONG_ANSWER, SAYS_WRONG, WRONG_ANSWER, WRONG_ANSWER],  # never a right revision: dropped
    }
    settings = SelfcorrectConfig(verify_instruction="?", revise_instruction="!", told_wrong="T", verdict_tries=2,
                                 revision_tries=2, told_wrong_tries=1)
    collected = collect(list(replies), ["4"] * 4, Scripted(replies), settings)
    text = lambda ids: "".join(chr(i) if i != EOS else "<eos>" for i in ids)  # noqa: E731
    assert collected.kept == {"wrong_to_right": 1, "told_wrong": 1, "stopped": 1}
    assert sorted((text(c), text(k)) for c, k in collected.pairs) == sorted([
        ("P0|", RIGHT),  # the stopped trajectory's right first answer (train_first_answer)
        ("P0|" + RIGHT + "?", SAYS_RIGHT + "<eos>"),  # ... and its right verdict, which ends it
        ("P0|" + RIGHT + "?T!", RIGHT + "<eos>"),  # told wrong (masked): only the revision is trained
        ("P1|" + WRONG_ANSWER + "?", SAYS_WRONG),  # the wrong answer is context only
        ("P1|" + WRONG_ANSWER + "?" + SAYS_WRONG + "!", RIGHT + "<eos>"),
    ])
    assert [[s.text for s in row.segments] for row in collected.rows] == [
        [RIGHT, SAYS_RIGHT], [WRONG_ANSWER, SAYS_WRONG, RIGHT], [WRONG_ANSWER], [WRONG_ANSWER, SAYS_WRONG]]
    plain = SelfcorrectConfig(verify_instruction="?", told_wrong_tries=0, train_first_answer=False)
    alone = collect(["P|"], ["4"], Scripted({"P|": [RIGHT, SAYS_RIGHT]}), plain)
    assert [text(k) for _, k in alone.pairs] == [SAYS_RIGHT + "<eos>"] and alone.kept["told_wrong"] == 0
    unlabelled = collect(["P|"], [None], Scripted({"P|": [WRONG_ANSWER] + [SAYS_WRONG] * 8}), plain)
    assert not unlabelled.pairs  # no truth for a verdict to match: nothing kept


def _reward(rows, weight=0.5, stage=2, answer="4"):
    segments = [[Segment(kind, 0, 0, 1, text) for kind, text in row] for row in rows]
    rollout = Rollout(prompts=["q"] * len(rows), completions=[""] * len(rows), prompt_ids=[[1]] * len(rows),
                      completion_ids=[[2]] * len(rows), group_size=len(rows),
                      columns={"segments": segments, "answer": [answer] * len(rows), "selfcorrect_stage": [stage] * len(rows)})
    logged, acted = {}, []
    ctx = SimpleNamespace(rollout=rollout, log=logged.__setitem__, acted=lambda n, of, hint=None: acted.append((n, of)))
    return make_plugin("selfcorrect", verdict_weight=weight).reward(ctx), logged, acted


def test_the_reward_pays_the_final_answer_and_each_right_verdict_the_one_that_stops_included():
    rows = [
        [(A, WRONG_ANSWER), (V, SAYS_WRONG), (A, RIGHT)],  # a right "wrong", a fix: 1 + 0.5
        [(A, RIGHT), (V, SAYS_RIGHT)],  # a right "correct" stops at a right answer: 1 + 0.5
        [(A, RIGHT), (V, SAYS_WRONG), (A, RIGHT)],  # a wrong "wrong": the revision keeps it, the verdict earns 0
        [(A, WRONG_ANSWER), (V, SAYS_WRONG), (A, WRONG_ANSWER)],  # a right "wrong", no fix: 0 + 0.5
        [(A, WRONG_ANSWER), (V, SAYS_RIGHT)],  # a wrong "correct" stops at a wrong answer: nothing
        [(A, RIGHT), (V, SAYS_WRONG), (A, WRONG_ANSWER)],  # a wrong "wrong" that breaks the answer: nothing
        [(A, WRONG_ANSWER), (V, "no verdict")],
        [(A, WRONG_ANSWER), (V, SAYS_WRONG), (A, RIGHT), (V, SAYS_WRONG)],  # the last verdict judges the revision
    ]
    rewards, logged, acted = _reward(rows)
    assert rewards == [1.5, 1.5, 1.0, 0.5, 0.0, 0.0, 0.0, 1.25]
    assert acted == [(4, 8)]  # rows with a right verdict
    assert logged["first_answer_correct"] == 3 / 8 and logged["revised"] == 5 / 8
    assert logged["verify_recall"] == pytest.approx(1 / 3) and logged["verify_recall_negative"] == 0.6
    assert _reward(rows, weight=0.0)[0] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]  # the paper's PPO reward
    assert _reward(rows, stage=1)[2] == []  # stage 1 reports what it kept, where it collects
    assert _reward([[(A, RIGHT), (V, SAYS_RIGHT)]], answer=None)[0] == [None]  # a row without an answer
