"""Several turns in one completion (stackrl.blocks.turns), generation from token ids, and a KL on chosen tokens
(stackrl.blocks.kl)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from stackrl import ConfigError, PluginError
from stackrl.blocks.kl import reference_kl
from stackrl.blocks.turns import (
    SEGMENTS_COLUMN,
    NewlineTokens,
    Segment,
    Trajectory,
    check_instruction,
    final_answer_rewards,
    judged_segments,
    judged_turns,
    line_spans,
    log_revisions,
    packed_samples,
    rollout_segment_advantages,
    sample_accepted,
    segment_advantages,
    segment_pairs,
    transitions,
    turn_spans,
    verdicts_right,
    verifier_figures,
    verify_then_revise,
)
from stackrl.run import build_trainer
from stackrl.testing.fixtures import Scripted

EOS = Scripted.eos_token_ids[0]


def test_a_trajectory_packs_its_turns_masks_injected_text_and_keeps_only_the_last_eos():
    t = Trajectory([1, 2])
    first = t.add("answer", [5, 6, EOS], "a", [EOS])
    assert t.context() == [1, 2, 5, 6]  # the eos is held back while turns follow
    t.inject([7, 7])
    second = t.add("verify", [8, EOS], "v", [EOS])
    t.inject([7])
    third = t.add("answer", [4, 3], "b", [EOS])  # truncated: no eos to restore
    ids, mask, segments = t.packed()
    assert ids == [5, 6, 7, 7, 8, 7, 4, 3] and mask == [1, 1, 0, 0, 1, 0, 1, 1]
    assert segments == [first, second, third] == [
        Segment("answer", 0, 0, 2, "a"), Segment("verify", 0, 4, 5, "v"), Segment("answer", 1, 6, 8, "b")
    ]
    last = Trajectory([1])
    last.add("answer", [5, EOS], "a", [EOS])
    assert last.packed() == ([5, EOS], [1, 1], [Segment("answer", 0, 0, 2, "a")])  # the row's end keeps its eos
    samples = packed_samples([t, last], {"tag": ["x", "y"]})
    assert samples.prompt_ids == [[1, 2], [1]] and samples.columns["tag"] == ["x", "y"]
    assert samples.loss_mask == [mask, [1, 1]] and samples.columns["segments"][1] == [Segment("answer", 0, 0, 2, "a")]


@pytest.mark.parametrize("verify_last", [False, True])
def test_verify_then_revise_goes_on_after_a_wrong_verdict_only_and_stops_at_the_cap(verify_last):
    wrong, right = "Verdict: wrong", "Verdict: correct"
    replies = {
        "P0|": ["a1", right],  # a "correct" verdict ends the row
        "P1|": ["a1", "no verdict"],  # so does a check without a verdict
        "P2|": ["a1", wrong, "a2", right],
        "P3|": ["a1", wrong, "a2", wrong, "a3", wrong],  # the cap: the third answer is the last
    }
    rows = verify_then_revise(list(replies), Scripted(replies), answers=3, verify="?", revise="!", verify_last=verify_last)
    kinds = [[s.kind for s in row.segments] for row in rows]
    last = ["verify"] if verify_last else []
    assert kinds == [["answer", "verify"], ["answer", "verify"], ["answer", "verify", "answer", "verify"],
                     ["answer", "verify", "answer", "verify", "answer", *last]]
    assert "".join(map(chr, rows[3].packed()[0][:-1])) == "a1?" + wrong + "!a2?" + wrong + "!a3" + ("?" + wrong) * verify_last


def test_sample_accepted_keeps_the_first_accepted_draw_of_each_row_and_gives_up_after_its_tries():
    replies = {"P0|": ["x", "ok"], "P1|": ["ok"], "P2|": ["x", "x", "ok"]}  # P2's third draw is past the tries
    ctx = Scripted(replies)
    rows = [Trajectory(ctx.tokenizer(p)["input_ids"]) for p in replies]
    kept = sample_accepted(rows, "verify", ctx, lambda i, text: text == "ok", tries=2)
    assert [s and s.text for s in kept] == ["ok", "ok", None]
    assert [[s.text for s in row.segments] for row in rows] == [["ok"], ["ok"], []]  # rejected draws are dropped
    assert replies["P2|"] and ctx.replies["P2|"] == ["ok"]  # two draws for P2, none after the tries


def test_segment_pairs_fine_tune_each_chosen_segment_after_everything_before_it():
    t = Trajectory([1, 2])
    t.add("answer", [5, 6, EOS], "a", [EOS])
    t.inject([7])
    t.add("verify", [8, EOS], "v", [EOS])
    twin = t.copy()
    twin.inject([3])  # a copy goes on alone
    assert t.context() == [1, 2, 5, 6, 7, 8] and twin.context() == [1, 2, 5, 6, 7, 8, 3]
    assert segment_pairs(t, lambda s: True) == [([1, 2], [5, 6]), ([1, 2, 5, 6, 7], [8, EOS])]  # the last keeps eos
    assert segment_pairs(t, lambda s: s.kind == "verify") == [([1, 2, 5, 6, 7], [8, EOS])]


@pytest.mark.parametrize(
    "kinds, outcomes, right",
    [
        (["answer", "verify"], [True, True], [True]),
        (["answer", "verify"], [False, True], [False]),  # "correct" to a wrong answer
        (["answer", "verify"], [True, False], [False]),  # "wrong" to a right one
        (["answer", "verify"], [False, None], [False]),  # no verdict
        (["verify"], [True], [False]),  # nothing checked
        # the second check is judged against the answer it checks, the revised one
        (["answer", "verify", "answer", "verify"], [False, False, True, False], [True, False]),
    ],
)
def test_verdicts_right_judge_each_verdict_against_the_answer_before_it(kinds, outcomes, right):
    assert verdicts_right(kinds, outcomes) == right


def test_judged_turns_read_answers_correctness_and_verifications_verdicts():
    a, v = (lambda text: Segment("answer", 0, 0, 1, text)), (lambda text: Segment("verify", 0, 0, 1, text))  # noqa: E731
    rollout = _rollout([[a("4"), v("Verdict: wrong"), a("5")], [a("5"), v("no verdict")]], ["5", "5"], width=2)
    assert judged_turns(rollout, lambda text, answer: text == answer, plugin="x", column="answer") == [
        [False, False, True], [True, None]]


def test_verifier_figures_take_correct_as_the_positive_class():
    correct = [True, True, True, False, False, False]
    verdicts = [True, True, False, True, False, None]
    figures = verifier_figures(correct, verdicts)
    assert figures == {"precision": pytest.approx(2 / 3), "recall": pytest.approx(2 / 3), "recall_negative": pytest.approx(1 / 3)}


def test_segment_advantages_compare_each_segment_with_its_groups_same_kind_and_turn():
    a = lambda turn, start, end: Segment("answer", turn, start, end, "")  # noqa: E731
    v = lambda turn, start, end: Segment("verify", turn, start, end, "")  # noqa: E731
    # One group of three rows: first answers 1, 0, 0; checks 1, 1, 0; one revision alone in its slot.
    segments = [[a(0, 0, 2), v(0, 3, 4)], [a(0, 0, 1), v(0, 2, 4), a(1, 5, 6)], [a(0, 0, 3), v(0, 3, 4)]]
    values = [[1.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0]]
    out = segment_advantages(values, segments, group_size=3, width=6)
    high, low = (2 / 3) / (math.sqrt(1 / 3) + 1e-4), (-1 / 3) / (math.sqrt(1 / 3) + 1e-4)
    expected = [
        [high, high, 0, -low, 0, 0],  # answer 1 of (1, 0, 0); check 1 of (1, 1, 0); token 2 injected
        [low, 0, -low, -low, 0, 0],  # the revision is alone in its slot: 0
        [low, low, low, -high, 0, 0],
    ]
    assert torch.allclose(out, torch.tensor(expected), atol=1e-5)
    with pytest.raises(PluginError, match="row 0 has 2 segments but 1 values"):
        segment_advantages([[1.0], [0.0, 1.0, 1.0], [0.0, 0.0]], segments, group_size=3, width=6)


def _rollout(segments, answers, width):
    return SimpleNamespace(
        columns={"segments": segments, "answer": answers}, group_size=len(segments),
        completion_mask=lambda: torch.ones(len(segments), width),
    )


def test_judged_segments_judge_each_segment_against_its_row_s_answer_in_order():
    a = lambda text: Segment("answer", 0, 0, 1, text)  # noqa: E731
    rollout = _rollout([[a("3"), a("4")], [a("5")]], ["4", "5"], width=2)
    judged = judged_segments(rollout, lambda s, answer: s.text == answer, plugin="x", column="answer", purpose="judge")
    assert judged == [[False, True], [True]]
    with pytest.raises(PluginError, match="x.answer_column: the batch has no column 'target' to judge"):
        judged_segments(rollout, lambda s, answer: True, plugin="x", column="target", purpose="judge")


def test_rollout_segment_advantages_are_segment_advantages_over_the_rollout_s_groups_and_width():
    a = lambda start, end: Segment("answer", 0, start, end, "")  # noqa: E731
    segments = [[a(0, 2)], [a(0, 1)], [a(0, 3)]]
    values = [[1.0], [0.0], [0.0]]
    expected = segment_advantages(values, segments, group_size=3, width=4)
    assert torch.equal(rollout_segment_advantages(_rollout(segments, [None] * 3, width=4), values), expected)


def test_final_answer_rewards_are_the_last_answer_s_correctness_logging_the_first_s():
    logged = {}
    ctx = SimpleNamespace(log=logged.__setitem__)
    assert final_answer_rewards(ctx, [[False, True], [True, False], [True]], first="first_right") == [1.0, 0.0, 1.0]
    assert logged == {"first_right": pytest.approx(2 / 3)}


def test_an_instruction_to_inject_must_hold_text():
    check_instruction("x", "instruction", "\nCheck it.\n")
    with pytest.raises(ConfigError, match="x.instruction: must hold the instruction to inject"):
        check_instruction("x", "instruction", " \n")


def test_transitions_count_fixes_and_breaks_over_all_rows():
    figures = transitions([False, False, True, True], [True, False, False, True])
    assert figures == {"wrong_to_right": 0.25, "right_to_wrong": 0.25, "net_correction": 0.0}
    assert transitions([False, False, True], [True, True, True])["net_correction"] == pytest.approx(2 / 3)


def test_log_revisions_logs_the_first_verdicts_the_right_verdicts_and_the_revised_rows():
    """Row 1: a wrong answer judged wrong, revised right. Row 2: a right answer judged correct. Row 3: a right
    answer judged wrong (a wrong verdict), revised wrong."""
    kinds = [["answer", "verify", "answer"], ["answer", "verify"], ["answer", "verify", "answer"]]
    outcomes = [[False, False, True], [True, True], [True, False, False]]
    answers = [[False, True], [True], [True, False]]
    right = [[True], [True], [False]]
    logged = {}

    class Logs:
        def log(self, key, value):
            logged[key] = value

    revised = log_revisions(Logs(), kinds, outcomes, answers, right, right_key="checks_right", revised_key="fixed")
    assert revised == [[False, True], [True, False]]
    assert logged == {"verify_precision": 1.0, "verify_recall": 0.5, "verify_recall_negative": 1.0,
                      "checks_right": pytest.approx(2 / 3), "fixed": pytest.approx(2 / 3), "fixed_wrong_to_right": 0.5,
                      "fixed_right_to_wrong": 0.5, "fixed_net_correction": 0.0}


def test_generation_from_token_ids_continues_exactly_those_tokens(make_config):
    trainer = build_trainer(make_config(trainer={"generation_kwargs": {"do_sample": False}}))
    policy, tokenizer = trainer._shared_policy, trainer.processing_class
    prompt = "What is (3 + 4) * 2?\n"
    from_text = policy.generate([prompt])[0]
    from_ids = policy.generate([from_text.prompt_ids])[0]
    assert from_ids.prompt_ids == from_text.prompt_ids and from_ids.completion_ids == from_text.completion_ids
    # A context no tokenization of its text gives: generated from as it is.
    odd = tokenizer(prompt, add_special_tokens=False)["input_ids"] + tokenizer("3 +", add_special_tokens=False)["input_ids"]
    assert policy.generate([odd])[0].prompt_ids == odd
    assert policy.eos_token_ids and tokenizer.eos_token_id in policy.eos_token_ids


def test_reference_kl_averages_trl_s_estimate_over_the_marked_trained_tokens():
    policy = torch.log(torch.tensor([[0.5, 0.25, 0.5], [0.5, 0.5, 0.5]])).requires_grad_()
    reference = torch.log(torch.tensor([[0.25, 0.25, 0.5], [0.125, 0.5, 0.5]]))
    ctx = SimpleNamespace(
        policy_logps=policy, loss_mask=torch.tensor([[1, 1, 1], [1, 0, 1]]), sampling_temperature=1.0,
        rollout=SimpleNamespace(prompt_ids=[[1], [1]], completion_ids=[[2, 3, 4], [2, 3, 4]]),
        score=lambda *_, **options: SimpleNamespace(logprobs=reference) if options["model"] == "reference" else None,
    )  # fmt: skip
    k3 = lambda p, r: r / p - math.log(r / p) - 1  # noqa: E731  (exp(r - p) - (r - p) - 1 in probabilities)
    mask = torch.tensor([[1, 0, 0], [1, 1, 0]])  # row 1's second token is marked but not trained
    assert reference_kl(ctx, mask).item() == pytest.approx((k3(0.5, 0.25) + k3(0.5, 0.125)) / 2, rel=1e-5)
    (grad,) = torch.autograd.grad(reference_kl(ctx, mask), policy)
    assert (grad[mask * ctx.loss_mask == 0] == 0).all() and (grad[mask * ctx.loss_mask == 1] != 0).all()
    assert reference_kl(ctx, torch.zeros(2, 3)).item() == 0.0


def test_lines_end_after_newline_tokens():
    newline = 9
    assert line_spans([1, 2, 9, 3, 9, 9, 4], lambda t: t == newline) == [(0, 3), (3, 5), (5, 6), (6, 7)]
    assert line_spans([1, 9], lambda t: t == newline) == [(0, 2)]
    assert line_spans([], lambda t: t == newline) == []


def test_newline_tokens_decode_each_id_once():
    decoded = []
    tokenizer = SimpleNamespace(decode=lambda ids: decoded.append(ids) or {5: "a\n", 6: "b"}[ids[0]])
    is_newline = NewlineTokens(tokenizer)
    assert [is_newline(t) for t in (5, 6, 5, 6)] == [True, False, True, False]
    assert decoded == [[5], [6]]


def test_turns_are_the_generated_segments_where_the_rollout_has_them_else_the_lines():
    segments = [[Segment("answer", 0, 0, 3, "a"), Segment("verify", 0, 5, 7, "b")], [Segment("answer", 0, 0, 2, "c")]]
    with_segments = SimpleNamespace(columns={SEGMENTS_COLUMN: segments}, completion_ids=[[1, 9, 2, 3, 4, 5, 6], [1, 2]])
    newline = lambda t: t == 9  # noqa: E731
    assert turn_spans(with_segments, newline) == [[(0, 3), (5, 7)], [(0, 2)]], "injected tokens 3:5 are in no turn"
    assert turn_spans(with_segments, newline, lines=True) == [[(0, 2), (2, 7)], [(0, 2)]]
    single = SimpleNamespace(columns={}, completion_ids=[[1, 9, 2]])
    assert turn_spans(single, newline) == [[(0, 2), (2, 3)]]
