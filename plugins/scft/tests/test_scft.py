"""SCFT + RLERR: the critique filter, the phase's mix, the reflection reward's cases, and the plugin's state."""

import json
from types import SimpleNamespace

import pytest

from stackrl.blocks.turns import Segment
from stackrl.context import Rollout
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import Scripted, make_plugin
from stackrl_scft import critique_kind, phase_rows, reflection_case

EOS = Scripted.eos_token_ids[0]
# A right attempt of (3 + 4) * 2, a slipped one (its first line wrong), and the checks the built-in judge writes.
RIGHT = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14."
SLIPPED = "3 + 4 = 8\n8 * 2 = 16\nThe answer is 16."
CHECK_RIGHT = "3 + 4 = 7 | 7 yes\n7 * 2 = 14 | 14 yes\n14 | 14 yes\nVerdict: correct"
CHECK_SLIPPED = "3 + 4 = 7 | 8 no\nVerdict: wrong"  # stops at the wrong line
CHECK_SLIPPED_LATE = "3 + 4 = 8 | 8 yes\n8 * 2 = 15 | 16 no\nVerdict: wrong"  # a right "wrong" at the wrong line
CHECK_RIGHT_WRONG = "3 + 4 = 7 | 7 yes\n7 * 2 = 15 | 14 no\nVerdict: wrong"  # calls a right attempt wrong
CHECK_SLIPPED_CORRECT = "3 + 4 = 8 | 8 yes\n8 * 2 = 16 | 16 yes\n16 | 16 yes\nVerdict: correct"
OTHER_WRONG = "3 + 4 = 7\n7 * 2 = 15\nThe answer is 15."


class TestConformance(PluginConformance):
    plugin_name = "scft"
    refused_settings = [
        ({"every": 0}, "scft.every: must be at least 1"),
        ({"sft_learning_rate": 0.0}, "scft.sft_learning_rate: must be positive"),
        ({"confirm_per_fix": -1.0}, "scft.confirm_per_fix: must be 0 or more, or null"),
        ({"reflection_weight": -0.5}, "scft.reflection_weight: must be 0 or more"),
        ({"outcome_weight": 0.0, "reflection_weight": 0.0}, "scft.reflection_weight: outcome_weight and reflection_weight are both 0"),
        ({"score_corrected": 11.0}, "scft.score_corrected: must lie in the judge's range 0-10"),
        ({"score_superficial": 1.0}, "scft.score_superficial: must be above score_hallucinated"),
        ({"critique_instruction": " "}, "scft.critique_instruction: must hold the instruction"),
        ({"metric": "scft"}, "scft.metric: must be a built-in outcome reward"),
    ]


def test_the_filter_keeps_critiques_that_end_right_and_with_strict_verdict_only_true_verdicts():
    # (first answer right, verdict, critique's final answer right) -> kept kind
    assert critique_kind(False, False, True, strict=True) == "fix"  # i->c
    assert critique_kind(True, True, True, strict=True) == "confirm"  # c->c
    assert critique_kind(False, False, False, strict=True) is None  # found the error, did not fix it
    assert critique_kind(False, True, False, strict=True) is None  # confirmed a wrong answer
    assert critique_kind(True, None, True, strict=True) is None  # no verdict
    assert critique_kind(True, False, True, strict=True) is None  # a right answer called wrong, rewritten right
    assert critique_kind(True, False, True, strict=False) == "confirm"  # the literal Acc(c) = 1 keeps it
    assert critique_kind(True, False, False, strict=False) is None  # ... not when the rewrite breaks it


def test_the_phase_trains_every_fix_and_confirmations_up_to_their_share():
    fixes, confirms = ["f1", "f2", "f3", "f4"], ["c1", "c2", "c3"]
    assert phase_rows(fixes, confirms, 0.5) == fixes + ["c1", "c2"]  # 2 : 1
    assert phase_rows(fixes[:1], confirms, 0.5) == ["f1"]
    assert phase_rows(fixes, confirms, None) == fixes + confirms
    assert phase_rows([], confirms, 2.0) == []


def test_the_rollout_is_answer_then_critique_and_only_kept_critiques_are_collected_without_their_answer():
    replies = {
        "Q0|": [SLIPPED, CHECK_SLIPPED, RIGHT],  # i->c: kept, check and correction trained
        "Q1|": [RIGHT, CHECK_RIGHT],  # c->c: kept, the check trained
        "Q2|": [SLIPPED, CHECK_SLIPPED, OTHER_WRONG],  # error found, not fixed: dropped
        "Q3|": [RIGHT, CHECK_RIGHT_WRONG, RIGHT],  # a right answer called wrong: dropped (strict_verdict)
        "Q4|": [SLIPPED, CHECK_SLIPPED_CORRECT],  # a wrong answer confirmed: dropped
        "Q5|": [SLIPPED, CHECK_SLIPPED, RIGHT],  # no reference answer: dropped
    }
    ctx = Scripted(replies)
    ctx.training, ctx.rollout_columns = True, {"answer": ["14"] * 5 + [None]}
    plugin = make_plugin("scft", critique_instruction="?", revise_instruction="!")
    samples = plugin.generate_rollout(list(replies), ctx)
    text = lambda ids: "".join(chr(i) if i != EOS else "<eos>" for i in ids)  # noqa: E731
    assert [text(ids) for ids in samples.completion_ids][:2] == [
        SLIPPED + "?" + CHECK_SLIPPED + "!" + RIGHT + "<eos>", RIGHT + "?" + CHECK_RIGHT + "<eos>"]
    assert samples.loss_mask[1] == [1] * len(RIGHT) + [0] + [1] * (len(CHECK_RIGHT) + 1)  # the instruction masked
    pairs = {k: [[(text(c), text(t)) for c, t in row] for row in rows] for k, rows in plugin.kept.items()}
    assert pairs == {
        "fix": [[("Q0|" + SLIPPED + "?", CHECK_SLIPPED),
                 ("Q0|" + SLIPPED + "?" + CHECK_SLIPPED + "!", RIGHT + "<eos>")]],
        "confirm": [[("Q1|" + RIGHT + "?", CHECK_RIGHT + "<eos>")]],
    }
    plain = make_plugin("scft", critique_instruction="?", revise_instruction="!", strict_verdict=False)
    ctx = Scripted({"Q3|": [RIGHT, CHECK_RIGHT_WRONG, RIGHT]})
    ctx.training, ctx.rollout_columns = True, {"answer": ["14"]}
    plain.generate_rollout(["Q3|"], ctx)
    assert len(plain.kept["confirm"]) == 1  # the literal filter keeps it


def test_the_reflection_case_follows_the_rubric():
    assert reflection_case(False, False, True, True) == "corrected"
    assert reflection_case(False, False, True, False) == "superficial"  # fixed, but not where the error is
    assert reflection_case(False, False, False, True) == "superficial"  # found, not fixed
    assert reflection_case(True, False, True, True) == "hallucinated"  # P1: a right answer called wrong
    assert reflection_case(False, True, False, True) == "hallucinated"  # P1: a wrong answer confirmed
    assert reflection_case(True, True, True, True) == "confirmed"
    assert reflection_case(True, None, True, True) == "silent"


def _reward(rows, answer="14", **settings):
    segments = []
    for row in rows:
        kinds = ["answer", "verify", "answer"][: len(row)]
        segments.append([Segment(kind, 0, 0, 1, text) for kind, text in zip(kinds, row)])
    rollout = Rollout(prompts=["q"] * len(rows), completions=[""] * len(rows), prompt_ids=[[1]] * len(rows),
                      completion_ids=[[2]] * len(rows), group_size=len(rows),
                      columns={"segments": segments, "answer": [answer] * len(rows)})
    logged, acted = {}, []
    ctx = SimpleNamespace(rollout=rollout, log=logged.__setitem__, acted=lambda n, of, hint=None: acted.append((n, of)))
    return make_plugin("scft", **settings).reward(ctx), logged, acted


def test_the_reward_is_the_outcome_plus_the_scored_reflection():
    rows = [
        [SLIPPED, CHECK_SLIPPED, RIGHT],  # corrected at the wrong line: 1 + 0.7
        [SLIPPED, CHECK_SLIPPED_LATE, RIGHT],  # fixed, but the check stopped at a line that holds: 1 + 0.4
        [SLIPPED, CHECK_SLIPPED, OTHER_WRONG],  # found, not fixed: 0 + 0.4
        [RIGHT, CHECK_RIGHT],  # confirmed: 1 + 0.7
        [RIGHT, CHECK_RIGHT_WRONG, RIGHT],  # P1 failed, the rewrite stays right: 1 + 0.1
        [SLIPPED, CHECK_SLIPPED_CORRECT],  # P1 failed, stops on the wrong answer: 0 + 0.1
        [SLIPPED, "no verdict"],  # silent: 0
    ]
    rewards, logged, acted = _reward(rows)
    assert rewards == pytest.approx([1.7, 1.4, 0.4, 1.7, 1.1, 0.1, 0.0])
    assert acted == [(6, 7)]
    assert logged["case_corrected"] == pytest.approx(1 / 7) and logged["case_superficial"] == pytest.approx(2 / 7)
    assert logged["err"] == pytest.approx(4 / 6) and logged["first_answer_correct"] == pytest.approx(2 / 7)
    assert logged["wrong_to_right"] == pytest.approx(2 / 7)
    unlocated = _reward(rows, locate=False, reflection_weight=2.0, score_corrected=9.0)[0]
    assert unlocated == pytest.approx([2.8, 2.8, 0.8, 2.4, 1.2, 0.2, 0.0])
    assert _reward(rows, outcome_weight=0.0)[0] == pytest.approx([0.7, 0.4, 0.4, 0.7, 0.1, 0.1, 0.0])
    assert _reward([[RIGHT, CHECK_RIGHT]], answer=None)[0] == [None]


def test_the_reward_waits_for_the_first_phase_by_default():
    assert make_plugin("scft", every=6).reward_weight() == {0: 0.0, 6: 1.0}
    assert make_plugin("scft", rl_after_phase=False).reward_weight() == 1.0


def test_kept_critiques_and_the_buffer_survive_a_resume():
    plugin = make_plugin("scft")
    plugin.kept["fix"].append([([1, 2], [3]), ([1, 2, 3, 4], [5, 9])])
    plugin.kept["confirm"].append([([6], [7, 9])])
    plugin.buffer.add([1], [2, 9])
    again = make_plugin("scft")
    again.load_state_dict(json.loads(json.dumps(plugin.state_dict())))
    assert again.kept == plugin.kept and again.buffer.pairs == plugin.buffer.pairs


def test_a_phase_at_every_step_gets_the_fixes_and_a_capped_share_of_confirmations():
    plugin = make_plugin("scft", every=2, confirm_per_fix=0.5)
    plugin.kept = {"fix": [[([1], [2])], [([3], [4])]], "confirm": [[([5], [6])], [([7], [8])]]}
    phases, logged, warned = [], {}, []
    ctx = SimpleNamespace(step=1, log=logged.__setitem__, warn=warned.append,
                          supervised_phase=lambda name, contexts, targets, **options: phases.append((name, contexts, targets)))
    plugin.post_step(ctx)
    assert not phases and len(plugin.kept["fix"]) == 2  # not yet
    ctx.step = 2
    plugin.post_step(ctx)
    assert phases == [("scft", [[1], [3], [5]], [[2], [4], [6]])]
    assert logged["kept_fix"] == 2 and logged["kept_confirm"] == 1 and plugin.kept == {"fix": [], "confirm": []}
    ctx.step = 4
    plugin.post_step(ctx)
    assert warned == ["no_critiques_kept"] and len(phases) == 1
