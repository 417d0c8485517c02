"""TRACE: spans, the routed clipped KL on them alone, the advantage scaling, and the schedule that ends it."""

from types import SimpleNamespace

import pytest
import torch

from stackrl import ConfigError, PluginError, Rollout
from stackrl.blocks.teacher import forward_kl, reverse_kl, score_student, score_teacher, teacher_prompts
from stackrl.policy import PolicyAccess
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl_trace import (
    RowSpans,
    Trace,
    TraceConfig,
    capped_positions,
    kl_weight,
    parse_annotation,
    scale_span_advantages,
    span_divergence,
    span_loss,
)
from stackrl_trace.config import teacher_template
from stackrl_trace.loss import routed_divergence
from stackrl_trace.spans import reached_spans_line

RULE = {"spans": "rule", "span_pattern": ".", "teacher_template": REFERENCE_TEMPLATE}


class TestConformance(PluginConformance):
    plugin_name = "trace"


# -- spans -----------------------------------------------------------------------------------------------------------


def test_annotation_is_read_from_the_last_spans_and_type_lines():
    answer = "Let me look.\nSPANS: 9\n...\n**SPANS:** 3, 5-6, 2 to 2\nTYPE: Missed case analysis."
    assert parse_annotation(answer, num_segments=6) == ([(2, 2), (4, 5), (1, 1)], "Missed case analysis")
    assert parse_annotation("spans = 4–9", num_segments=6) == ([(3, 5)], None), "a range is cut at the end"


@pytest.mark.parametrize(
    "answer",
    [
        "",
        None,
        "I cannot tell which segments matter.",
        "SPANS: none\nTYPE:",
        "SPANS: 0, 99, 5-2",  # outside the response, reversed
        "SPANS: " + "9" * 5000,  # no segment number (int() of it would raise)
        "SPANS: 123456789012345678901234567890",
        "TYPE: arithmetic slip",  # a label but no spans
        "SPANS\n3",  # the numbers not on the SPANS line
        "\x00\ufffd SPANS: ⅷ ٣ 4-",  # odd characters and digits
    ],
)
def test_malformed_annotations_give_no_spans(answer):
    spans, _ = parse_annotation(answer, num_segments=6)
    assert spans == [] or all(0 <= a <= b < 6 for a, b in spans)
    assert capped_positions(spans, [(0, 2)] * 6, budget=0) == []


def test_cap_takes_spans_in_priority_order_and_cuts_the_last_to_its_first_tokens():
    bounds = [(0, 4), (4, 6), (6, 10), (10, 12)]
    # Priority: segment 3 (tokens 6-9), then segments 1-2 (0-5); the budget of 6 leaves 2 tokens for the second.
    assert capped_positions([(2, 2), (0, 1)], bounds, budget=6) == [0, 1, 6, 7, 8, 9]
    # A span overlapping one already taken costs only its new tokens.
    assert capped_positions([(1, 1), (1, 2)], bounds, budget=5) == [4, 5, 6, 7, 8]
    assert capped_positions([(3, 3)], bounds, budget=10) == [10, 11]


# -- formulas on hand-built tensors ---------------------------------------------------------------------------------


def _direct_kl(p_logps, q_logps):
    """sum_v p_v (log p_v - log q_v), term by term."""
    return sum(torch.tensor(lp).exp().item() * (lp - lq) for lp, lq in zip(p_logps.tolist(), q_logps.tolist()))


def test_forward_kl_on_key_and_reverse_kl_on_error_positions_match_a_direct_computation():
    torch.manual_seed(0)
    student = torch.log_softmax(torch.randn(4, 5) * 2, dim=-1)
    teacher = torch.log_softmax(torch.randn(4, 5) * 2, dim=-1)
    is_key = torch.tensor([True, False, True, False])
    got = routed_divergence(student, teacher, is_key, clip=None)
    expected = [
        _direct_kl(teacher[i], student[i]) if is_key[i] else _direct_kl(student[i], teacher[i]) for i in range(4)
    ]
    assert torch.allclose(got, torch.tensor(expected), atol=1e-6)


# The teacher's top token (0.23) that the student all but ignores (0.008): forward KL must lift it. Clamping each
# vocabulary term at 0.05 would zero that token's own term and leave a gradient of +0.003 on its logit (descent
# lowers it); unclipped the gradient is p - q = -0.222.
LIFT_TEACHER = [0.23, 0.20, 0.20, 0.20, 0.17]
LIFT_STUDENT = [0.008, 0.30, 0.30, 0.20, 0.192]


@pytest.mark.parametrize("clip", [None, 0.05])
def test_clipped_forward_kl_still_lifts_the_teachers_token_the_student_under_weights(clip):
    logits = torch.tensor([LIFT_STUDENT]).log().requires_grad_(True)
    teacher = torch.tensor([LIFT_TEACHER]).log()
    routed_divergence(torch.log_softmax(logits, -1), teacher, torch.tensor([True]), clip).sum().backward()
    gradient = logits.grad[0]
    assert gradient[0].item() == pytest.approx(-0.222 if clip is None else -0.05, abs=1e-6), "descent raises it"
    assert gradient.abs().max().item() == pytest.approx(-gradient[0].item()), "the largest push, at most the clip"


def test_clipped_reverse_kl_still_lowers_the_students_token_the_teacher_rejects():
    # Error span: the student puts 0.6 on a token the teacher gives 0.01; descent must lower that logit.
    logits = torch.tensor([[0.6, 0.2, 0.2]]).log().requires_grad_(True)
    teacher = torch.tensor([[0.01, 0.49, 0.5]]).log()
    routed_divergence(torch.log_softmax(logits, -1), teacher, torch.tensor([False]), 0.05).sum().backward()
    assert logits.grad[0, 0].item() == pytest.approx(0.05, abs=1e-6)
    assert (logits.grad[0, 1:] < 0).all()


def test_span_loss_is_each_spans_mean_times_its_share_of_the_response():
    spans = [RowSpans("key", [1, 2], "k"), RowSpans("error", [0], "e")]
    divergence = torch.tensor([0.2, 0.4, 0.9])
    # Row 0: mean 0.3 x 2/8; row 1: 0.9 x 1/3; over a micro-batch of 4 rows (two without spans).
    assert span_loss(divergence, spans, lengths=[8, 3], batch_rows=4).item() == pytest.approx((0.075 + 0.3) / 4)


def test_advantage_scaling_hits_exactly_the_span_tokens():
    spans = [RowSpans("key", [1, 3], "k"), None, RowSpans("error", [0], "e")]
    advantages = torch.tensor([2.0, -1.0, -0.5])
    got = scale_span_advantages(advantages, spans, width=4, lam=0.2, w0=0.5)
    expected = advantages.unsqueeze(1).repeat(1, 4)
    expected[0, [1, 3]] *= 0.6
    expected[2, 0] *= 0.6
    assert torch.equal(got, expected)
    per_token = torch.arange(12.0).view(3, 4)
    assert torch.equal(scale_span_advantages(per_token, spans, 4, lam=0.5, w0=0.5)[0], torch.tensor([0.0, 0, 2, 0]))


def test_schedule_holds_w0_then_falls_linearly_to_zero():
    config = TraceConfig()
    expected = {0: 0.5, 9: 0.5, 10: 0.5, 25: 0.25, 39: 0.5 / 30, 40: 0.0, 100: 0.0}
    assert {step: kl_weight(step, config) for step in expected} == pytest.approx(expected)
    abrupt = TraceConfig(decay_steps=0)  # no decay: the KL stops at the end of the warm-up
    assert [kl_weight(step, abrupt) for step in (9, 10, 11)] == [0.5, 0.0, 0.0]


# -- on a real model -------------------------------------------------------------------------------------------------


def _rollout(tokenizer):
    prompts = ["What is 2 + 3?\n", "What is 4 * 2?\n"]
    completions = ["2 + 3 = 5\nThe answer is 5.", "4 * 2 = 9\nThe answer is 9."]
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    return Rollout(
        prompts=prompts, completions=completions, prompt_ids=[encode(p) for p in prompts],
        completion_ids=[encode(c) for c in completions],
        columns={"solution": ["2 + 3 = 5\nThe answer is 5.", "4 * 2 = 8\nThe answer is 8."]}, group_size=2,
    )


def test_distill_gradient_is_zero_outside_the_spans(make_config):
    """The student's last hidden states get gradient at the span positions and nowhere else."""
    trainer = build_trainer(make_config(["trace"], trace=RULE))
    rollout = _rollout(trainer.processing_class)
    spans = [RowSpans("key", [1, 2], "a key step"), RowSpans("error", [0, 4], "an error")]
    captured = []

    def keep_student_hidden(module, args, out):
        if out.requires_grad:  # the student's forward; the teacher's runs without gradient
            out.retain_grad()
            captured.append(out)

    handle = trainer.model.model.norm.register_forward_hook(keep_student_hidden)
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model)
    divergence = span_divergence(policy, rollout, spans, TraceConfig(**RULE), teacher="policy", grad=True)
    handle.remove()
    span_loss(divergence, spans, [len(c) for c in rollout.completion_ids], batch_rows=2).backward()
    (hidden,) = captured
    context_len = max(len(p) for p in rollout.prompt_ids)  # contexts end at one column (stackrl.policy)
    touched = hidden.grad.abs().sum(-1).nonzero().tolist()
    assert touched == [[row, context_len - 1 + t] for row, s in enumerate(spans) for t in s.positions]


def test_key_spans_get_forward_kl_and_error_spans_reverse_kl(make_config):
    """The divergence at each span position is the one its kind is routed to, not the other. On the built-in model,
    which follows a reference solution, so that teacher and student differ enough to tell the two apart."""
    trainer = build_trainer(make_config(["trace"], trace=RULE, model={"name_or_path": "stackrl/arith-tiny"}))
    rollout = _rollout(trainer.processing_class)
    spans = [RowSpans("key", [0, 1, 2], "a key step"), RowSpans("error", [0, 1, 2], "an error")]
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model)
    config = TraceConfig(**{**RULE, "kl_clip": None})
    got = span_divergence(policy, rollout, spans, config, teacher="policy", grad=False)

    common = dict(positions=[s.positions for s in spans], rollout=rollout, full_vocab=True)
    teacher = score_teacher(
        policy, teacher_template(config), model="policy", extra_columns={"label": [s.label for s in spans]}, **common
    ).vocab_logprobs
    student = score_student(policy, grad=False, **common).vocab_logprobs
    forward, reverse = forward_kl(student, teacher), reverse_kl(student, teacher)
    expected = torch.cat([forward[:3], reverse[3:]])
    swapped = torch.cat([reverse[:3], forward[3:]])
    assert torch.allclose(got, expected, atol=1e-5)
    assert (got - swapped).abs().max() > 100 * (got - expected).abs().max() + 1e-3, "the two routings differ here"


def test_loss_term_is_lambda_times_the_span_loss(make_config):
    trainer = build_trainer(make_config(["trace"], trace=RULE, model={"name_or_path": "stackrl/arith-tiny"}))
    rollout = _rollout(trainer.processing_class)
    spans = [RowSpans("key", [0, 1, 2], "a key step"), None]
    rollout.columns["trace_spans"] = spans
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model)
    ctx = SimpleNamespace(rollout=rollout, step=25, training=True, score=policy.score)  # lambda(25) = 0.25
    plugin = Trace(TraceConfig(**RULE, teacher="policy"))
    plugin.name = "trace"
    divergence = span_divergence(policy, rollout.select([0]), spans[:1], plugin.config, teacher="policy", grad=False)
    span_only = span_loss(divergence, spans[:1], [len(rollout.completion_ids[0])], batch_rows=2)
    assert span_only > 1e-3
    assert plugin.loss_term(ctx).item() == pytest.approx(0.25 * span_only.item(), rel=1e-5)


def test_route_picks_key_spans_of_correct_and_error_spans_of_incorrect_rollouts(make_config):
    tokenizer = build_trainer(make_config(["trace"], trace=RULE)).processing_class
    rollout = _rollout(tokenizer)  # row 0 is correct (2 + 3 = 5), row 1 is not (4 * 2 = 9)
    rollout.rewards["exact_match"] = torch.tensor([1.0, 0.0])
    ctx = SimpleNamespace(rollout=rollout, step=0, tokenizer=tokenizer)
    kinds = {}
    for route in ("key_fkl", "error_rkl", "both"):
        found = Trace(TraceConfig(**{**RULE, "route": route})).find_spans(ctx)
        kinds[route] = [None if s is None else s.kind for s in found]
    assert kinds == {"key_fkl": ["key", None], "error_rkl": [None, "error"], "both": ["key", "error"]}


def test_teacher_sees_the_label_and_not_the_solution_unless_asked():
    columns = {"solution": ["2 + 3 = 5"], "label": ["carry slip"]}
    (label_only,) = teacher_prompts(["What is 2 + 3?"], columns, teacher_template(TraceConfig()))
    assert "What is 2 + 3?" in label_only and "carry slip" in label_only and "2 + 3 = 5" not in label_only
    solution_template = teacher_template(TraceConfig(teacher_context="solution"))
    (with_solution,) = teacher_prompts(["What is 2 + 3?"], columns, solution_template)
    assert "carry slip" in with_solution and "2 + 3 = 5" in with_solution
    assert teacher_template(TraceConfig(teacher_template="{solution}\n\n{prompt}")) == "{solution}\n\n{prompt}"


def _spy(monkeypatch, method: str, calls: list):
    """Record the training step of every call of ``PolicyAccess.<method>``, then run it."""
    original = getattr(PolicyAccess, method)

    def spy(self, *args, **kwargs):
        calls.append((self._trainer.state.global_step, args, kwargs))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(PolicyAccess, method, spy)


def test_no_teacher_forward_or_sync_once_lambda_is_zero(make_config, monkeypatch):
    scores, syncs = [], []
    _spy(monkeypatch, "score", scores)
    _spy(monkeypatch, "update_snapshot", syncs)
    trace = {**RULE, "route": "error_rkl", "warmup_steps": 1, "decay_steps": 1, "sync_every": 1}
    train_steps(make_config(["trace"], trace=trace, trainer={"max_completion_length": 16}), steps=4)
    assert [kl_weight(step, TraceConfig(**trace)) for step in range(4)] == [0.5, 0.5, 0.0, 0.0]
    assert {step for step, _, _ in scores} == {0, 1}, "teacher and student are scored while lambda > 0 only"
    assert [step for step, _, _ in syncs] == [0, 1], "copied at train_begin, synced after step 1, then never"


def test_real_run_caps_coverage_and_zeroes_the_span_tokens_advantage(make_config, hook_recorder):
    """At lambda = w0 (the warm-up) the span tokens get no GRPO signal; every other token keeps its advantage."""
    trace = {**RULE, "route": "error_rkl"}
    trainer = train_steps(
        make_config(["trace"], trace=trace, trainer={"max_completion_length": 16}), steps=1, monitor=hook_recorder
    )
    rollout = trainer._rollouts["train"]
    spans = rollout.columns["trace_spans"]
    assert any(s is not None for s in spans)
    (advantages,) = [c.result for c in hook_recorder.calls if c.hook == "reshape_advantages"]
    mask = rollout.completion_mask().bool()
    for row, (row_spans, ids) in enumerate(zip(spans, rollout.completion_ids)):
        positions = [] if row_spans is None else row_spans.positions
        assert len(positions) <= int(0.25 * len(ids))
        on_span = torch.zeros_like(mask[row])
        on_span[positions] = True
        assert (advantages[row][on_span] == 0).all()
        assert advantages[row][mask[row] & ~on_span].unique().numel() <= 1, "one GRPO advantage per sample"


def test_self_annotation_survives_what_a_random_policy_answers(make_config, monkeypatch):
    """The annotator is the policy itself (here random): its numbered-segment prompt goes out, junk comes back."""
    prompts = []
    _spy(monkeypatch, "generate", prompts)
    trace = {"route": "error_rkl", "annotator_max_new_tokens": 24}
    trainer = train_steps(make_config(["trace"], trace=trace, trainer={"max_completion_length": 16}), steps=2)
    assert trainer.state.global_step == 2
    (_, (asked,), _) = prompts[0]
    assert "[1] " in asked[0] and "SPANS:" in asked[0] and "wrong answer" in asked[0]
    # Every row is incorrect (a random policy) and every junk answer lacks a SPANS line: a warning per row.
    annotated = sum(len(asked) for _, (asked,), _ in prompts)
    assert annotated == 8 and trainer.warnings["trace/no_spans_line"] == annotated
    key = "warnings/trace/no_spans_line"
    assert [entry[key] for entry in trainer.state.log_history if key in entry] == [4, 4]


@pytest.mark.parametrize(
    "answer, reached",
    [("SPANS: 2\nTYPE: x", True), ("**Spans:** none", True), ("<think>the first step is", False), (None, False)],
)
def test_an_answer_without_a_spans_line_is_told_apart(answer, reached):
    assert reached_spans_line(answer) is reached


def test_stacks_with_opsd(make_config):
    """Both add a loss term: both are computed and logged in the same run."""
    config = make_config(
        ["trace", "opsd"], trace={**RULE, "route": "error_rkl"}, opsd={"teacher_template": REFERENCE_TEMPLATE},
        trainer={"max_completion_length": 16},
    )
    trainer = train_steps(config, steps=2)
    logged = {key for entry in trainer.state.log_history for key in entry}
    assert {"loss/trace", "loss/opsd", "trace/coverage"} <= logged


def test_bad_settings_name_the_key():
    with pytest.raises(ConfigError, match="trace.route: must be one of key_fkl, error_rkl, both, not 'fkl'"):
        Trace(TraceConfig(route="fkl"))
    with pytest.raises(ConfigError, match="trace.span_pattern: spans: rule needs a regular expression"):
        Trace(TraceConfig(spans="rule"))
    with pytest.raises(ConfigError, match=r"trace.span_pattern: not a regular expression"):
        Trace(TraceConfig(spans="rule", span_pattern="(["))
    with pytest.raises(ConfigError, match=r"trace.max_coverage: must lie in \(0, 1\], not 1.5"):
        Trace(TraceConfig(max_coverage=1.5))


def test_missing_spans_column_is_named(make_config):
    config = make_config(["trace"], trace={"spans": "column", "spans_column": "marks", "route": "error_rkl"})
    with pytest.raises(PluginError, match="trace.spans_column: no column 'marks' in the rollout at step 0; columns: "):
        train_steps(config, steps=1)


def test_column_annotations_are_an_annotator_answer_or_segment_numbers():
    plugin = Trace(TraceConfig(spans="column", spans_column="marks"))
    rollout = SimpleNamespace(columns={"marks": ["SPANS: 2-3\nTYPE: sign error", [1, 4, 9, "x"], None]})
    ctx = SimpleNamespace(rollout=rollout, step=0)
    assert plugin._from_column(ctx, 0, num_segments=4) == ([(1, 2)], "sign error")
    assert plugin._from_column(ctx, 1, num_segments=4) == ([(0, 0), (3, 3)], None)
    assert plugin._from_column(ctx, 2, num_segments=4) == ([], None)
