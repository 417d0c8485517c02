"""The token-signal block: chunked statistics, modulators, derived contexts, and the shared per-batch cache."""

import math
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import torch

from stackrl import AdvantageContext, ConfigError, LossContext, PluginError, Rollout, StackrlError
from stackrl.blocks.tokensignals import (
    REFERENCE,
    STUDENT,
    SignalContext,
    TeacherGapSettings,
    TokenSignals,
    bounded_weights,
    derived_fields,
    entropy_and_topk_mass,
    entropy_gate,
    inverse_sensitivity,
    linear_decay,
    magnitude_weights,
    mean_one,
    mixed,
    reallocate,
    reweight,
    route,
    sigmoid_gate,
)
from stackrl.policy import PolicyAccess
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.repository import load_script

MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]])


# -- statistics ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [1, 3, 1000])
def test_entropy_and_topk_mass_equal_the_direct_sums_whatever_the_chunk(chunk_size):
    logits = torch.randn(2, 5, 11, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    entropy, mass = entropy_and_topk_mass(logits, 3, chunk_size=chunk_size)
    p = logits.softmax(-1)
    assert entropy.shape == mass.shape == (2, 5)
    assert torch.allclose(entropy.double(), -(p * p.log()).sum(-1), atol=1e-5)
    assert torch.allclose(mass.double(), p.sort(-1, descending=True).values[..., :3].sum(-1), atol=1e-6)


def test_statistics_of_hand_built_distributions():
    uniform, certain = torch.zeros(4), torch.tensor([0.0, -1e4, -1e4, -1e4])
    entropy, mass = entropy_and_topk_mass(torch.stack([uniform, certain]), 2)
    assert torch.allclose(entropy, torch.tensor([torch.log(torch.tensor(4.0)).item(), 0.0]), atol=1e-6)
    assert torch.allclose(mass, torch.tensor([0.5, 1.0]))
    with pytest.raises(StackrlError, match=r"k must lie in \[1, 4\]"):
        entropy_and_topk_mass(uniform, 5)


def test_statistics_keep_the_gradient():
    logits = torch.randn(3, 7, requires_grad=True)
    entropy, _ = entropy_and_topk_mass(logits, 2, chunk_size=2)
    entropy.sum().backward()
    assert logits.grad.abs().sum() > 0


# -- modulators ---------------------------------------------------------------------------------------------------


GAP = torch.tensor([[0.5, -3.0, 0.0, 9.0], [-0.2, 0.2, 1.0, -1.0], [2.0, -0.5, 7.0, 7.0]])


def test_magnitude_weights_follow_the_sign_of_the_advantage_and_clip():
    advantages = torch.tensor([1.5, -0.5, 0.0])
    weights = magnitude_weights(GAP, advantages, MASK, clip=2.0)
    expected = torch.tensor([
        [0.5, -2.0, 0.0, 0.0],       # positive advantage: exp(+gap), clipped to [-2, 2]
        [0.2, -0.2, -1.0, 1.0],      # negative: exp(-gap)
        [0.0, 0.0, 0.0, 0.0],        # zero: weight 1
    ]).exp() * MASK
    assert torch.allclose(weights, expected)


def test_mean_one_normalises_each_sequence_over_its_tokens():
    weights = torch.tensor([[1.0, 2.0, 3.0, 50.0], [1.0, 1.0, 1.0, 5.0], [0.0, 0.0, 4.0, 4.0]])
    normalised = mean_one(weights * MASK, MASK)
    assert torch.allclose(normalised[0], torch.tensor([0.5, 1.0, 1.5, 0.0]))
    assert torch.allclose(normalised[1], torch.tensor([0.5, 0.5, 0.5, 2.5]))
    assert torch.allclose(normalised[2], torch.tensor([1.0, 1.0, 0.0, 0.0]))  # all-zero weights: uniform


def test_reallocation_keeps_each_sequences_credit_and_sign():
    advantages = torch.tensor([2.0, -1.0, 0.5])
    weights = torch.tensor([[1.0, 3.0, 0.0, 0.0], [4.0, 1.0, 2.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    out = reallocate(advantages, weights, MASK)
    assert torch.allclose(out[0], torch.tensor([2.0 * 1 * 3 / 4, 2.0 * 3 * 3 / 4, 0.0, 0.0]))
    assert torch.allclose(out[1], -1.0 * weights[1] * 4 / 8)
    assert torch.allclose(out[2], torch.tensor([0.5 * 2, 0.0, 0.0, 0.0]))
    assert torch.allclose(out.sum(1), advantages * MASK.sum(1))  # the budget
    # Per-token advantages: each token's share moves with its weight, the sequence's total stays.
    token_advantages = torch.tensor([[1.0, 2.0, 3.0, 0.0], [-1.0, -1.0, -2.0, -1.0], [0.0, 1.0, 0.0, 0.0]]) * MASK
    out = reallocate(token_advantages, weights, MASK)
    assert torch.allclose(out.sum(1), token_advantages.sum(1))
    assert torch.allclose(out[1], torch.tensor([-4.0, -1.0, -4.0, -1.0]) * 5 / 10)
    with pytest.raises(StackrlError, match="non-negative"):
        reallocate(advantages, -weights, MASK)


def test_bounded_weights_mixed_at_a_decaying_share():
    signal, mask = torch.tensor([[0.1, -3.0, 5.0, 0.0]]), torch.tensor([[1, 1, 1, 0]])
    up, down = bounded_weights(signal, torch.tensor([1.0]), mask, 0.2), bounded_weights(signal, torch.tensor([-1.0]), mask, 0.2)
    assert torch.allclose(up, torch.tensor([[math.exp(0.1), 0.8, 1.2, 0.0]]))   # the weight is bounded, not the signal
    assert torch.allclose(down, torch.tensor([[math.exp(-0.1), 1.2, 0.8, 0.0]]))
    assert torch.allclose(mixed(up, 0.5, mask), torch.tensor([[(1 + math.exp(0.1)) / 2, 0.9, 1.1, 0.0]]))
    assert [linear_decay(0.5, 50, step) for step in (0, 10, 50, 70)] == [0.5, 0.4, 0.0, 0.0]
    assert linear_decay(0.5, 0, 1000) == 0.5
    with pytest.raises(StackrlError, match="bound must be in \\(0, 1\\)"):
        bounded_weights(signal, torch.tensor([1.0]), mask, 1.0)


def test_reweight_rescales_to_each_sequences_credit_only_when_asked():
    advantages, weights, mask = torch.tensor([2.0]), torch.tensor([[1.0, 3.0, 0.0]]), torch.tensor([[1, 1, 0]])
    assert reweight(advantages, weights, mask, normalize=False).tolist() == [[2.0, 6.0, 0.0]]
    assert reweight(advantages, weights, mask, normalize=True).tolist() == [[1.0, 3.0, 0.0]]


def test_route_sensitivity_and_entropy_gate():
    correct = torch.tensor([True, False, True])
    a, b = torch.ones(3, 4), torch.zeros(3, 4)
    assert route(correct, a, b)[:, 0].tolist() == [1.0, 0.0, 1.0]
    weights = inverse_sensitivity(torch.tensor([0.0, 1.0, -3.0]), 0.5)
    assert torch.allclose(weights, torch.tensor([1.0, 1 / 1.5, 1 / 2.5]))
    entropy = torch.tensor([[0.1, 2.0, 0.5, 9.0], [1.0, 0.2, 3.0, 0.0], [0.4, 0.6, 5.0, 5.0]])
    assert entropy_gate(entropy, MASK, 0.5).tolist() == [[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 0]]
    assert entropy_gate(entropy, MASK, 0.5, above=False).tolist() == [[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0, 0]]



def test_sigmoid_gate_opens_on_a_positive_signal_and_closes_softly_on_a_negative_one():
    signal = torch.tensor([[0.0, 0.4, -0.4, 9.0], [2.0, -2.0, 0.0, 0.0], [1.0, -1.0, 5.0, 5.0]])
    gate = sigmoid_gate(signal, MASK, 5.0)
    assert torch.allclose(gate[0, :3], torch.tensor([0.5, 1 / (1 + math.exp(-2)), 1 / (1 + math.exp(2))]))
    assert (gate * (1 - MASK) == 0).all(), "padding is gated shut"
    assert (sigmoid_gate(signal, MASK, 0.0) == 0.5 * MASK).all()
    with pytest.raises(StackrlError, match="sharpness must be non-negative"):
        sigmoid_gate(signal, MASK, -1.0)

# -- contexts -----------------------------------------------------------------------------------------------------


def _rollout(encode=lambda text: [1]):
    """Two problems, two completions each: right, wrong; right, no answer."""
    prompts = ["What is 2 + 3?\n"] * 2 + ["What is (4 * 2) + 6?\n"] * 2
    completions = ["2 + 3 = 5\nThe answer is 5.", "2 + 3 = 6\nThe answer is 6.",
                   "4 * 2 = 8\n8 + 6 = 14\nThe answer is 14.", "4 * 2 = 8\n8 + 6 ="]
    solutions = ["2 + 3 = 5\nThe answer is 5."] * 2 + ["4 * 2 = 8\n8 + 6 = 14\nThe answer is 14."] * 2
    return Rollout(
        prompts=prompts, completions=completions,
        prompt_ids=[encode(p) for p in prompts], completion_ids=[encode(c) for c in completions],
        columns={"solution": solutions, "answer": ["5", "5", "14", "14"]}, group_size=2,
    )


def test_derived_fields_assert_the_rows_own_answer_or_another():
    fields = derived_fields(_rollout(), where="test")
    assert fields["response_answer"] == ["5", "6", "14", ""]
    assert fields["wrong_answer"] == ["14", "6", "5", "5"]     # own wrong answer, else the next problem's
    assert fields["claimed_answer"] == ["5", "6", "14", "5"]
    assert fields["claimed_solution"][0] == "2 + 3 = 5\nThe answer is 5."             # a right row: the reference
    assert fields["claimed_solution"][1] == "2 + 3 = 6\nThe answer is 6."
    assert fields["wrong_solution"][2] == "4 * 2 = 8\n8 + 6 = 5\nThe answer is 5."  # 14 replaced, not 4 or 1
    assert fields["denied_solution"] == [
        "2 + 3 = 14\nThe answer is 14.", "2 + 3 = 5\nThe answer is 5.",
        "4 * 2 = 8\n8 + 6 = 5\nThe answer is 5.", "4 * 2 = 8\n8 + 6 = 14\nThe answer is 14.",
    ]


def test_derived_fields_need_the_reference_and_another_problem():
    rollout = _rollout()
    del rollout.columns["answer"]
    with pytest.raises(PluginError, match="context 'x': .* lacks answer"):
        SignalContext("x", "{wrong_solution}{prompt}").prompts(rollout)
    assert SignalContext("x", "{solution}{prompt}").prompts(rollout)[0].startswith("2 + 3")  # no derived field used
    one_problem = _rollout().select([0, 1])
    assert derived_fields(one_problem, where="test")["wrong_answer"] == ["6", "6"]  # the integer plus one
    one_problem.columns["answer"] = ["five", "five"]
    one_problem.completions = ["2 + 3 = 5", "2 + 3 ="]  # no answer of their own to take
    with pytest.raises(PluginError, match="no other problem of the batch has an answer other than 'five', and it is not"):
        derived_fields(one_problem, where="test")


def test_sibling_fields_are_the_groups_other_rollouts_never_the_rows_own():
    """One group of five: right, wrong, right, no answer, wrong. A row's correct sibling is the next right one after
    it (cyclically), its wrong siblings the other wrong ones that state an answer, in the same order."""
    rollout = _rollout().select([0, 1, 0, 1, 1])
    rollout.group_size = 5
    rollout.completions = ["right A", "2 + 3 = 6\nThe answer is 6.", "right B", "2 + 3 =", "The answer is 7."]
    rollout.completions[0] = rollout.completions[2] = "2 + 3 = 5\nThe answer is 5."
    rollout.completions[2] += " "  # two right answers that differ
    fields = derived_fields(rollout, where="test")
    assert fields["correct_sibling"] == [rollout.completions[j] for j in (2, 2, 0, 0, 0)]
    assert fields["wrong_sibling_1"] == [rollout.completions[j] for j in (1, 4, 4, 4, 1)]
    assert fields["wrong_sibling_2"] == [rollout.completions[4], None, rollout.completions[1], rollout.completions[1],
                                         None]
    assert fields["wrong_sibling"] == fields["wrong_sibling_1"] and fields["wrong_sibling_3"] == [None] * 5
    second = SignalContext("w", "{wrong_sibling}\n\n{prompt}").nth_wrong_sibling(2)
    assert second.template == "{wrong_sibling_2}\n\n{prompt}" and second.rows(rollout) == [0, 2, 3]
    assert SignalContext("c", "{correct_sibling}{prompt}").rows(rollout.select([1, 3])) == []  # no right sibling


def test_rows_without_an_answer_have_no_context_and_give_none_to_the_others():
    rollout = _rollout()
    rollout.columns["answer"][2:] = [None, None]
    fields = derived_fields(rollout, where="test")
    assert fields["wrong_answer"] == ["6", "6", None, None]  # not the None of the other problem: the integer plus one
    wrong = SignalContext("wrong", "{wrong_solution}\n\n{prompt}")
    assert wrong.rows(rollout) == REFERENCE.rows(rollout) == [0, 1] and STUDENT.rows(rollout) == [0, 1, 2, 3]
    assert list(wrong.prompts(rollout)) == [0, 1]
    rollout.columns["answer"][:2] = [None, None]
    assert wrong.prompts(rollout) == {}  # a batch without any answer: no context, and no error


# -- the service on the built-in model ----------------------------------------------------------------------------

TEMPERATURE = 1.3


@pytest.fixture
def trainer(make_config):
    return build_trainer(make_config([], model={"name_or_path": "stackrl/arith-tiny"},
                                     trainer={"temperature": TEMPERATURE}))


def _context(trainer, rollout):
    return trainer._context(AdvantageContext, rollout=rollout, total_reward=torch.zeros(len(rollout)))


def _encode(trainer):
    return lambda text: trainer.processing_class(text, add_special_tokens=False)["input_ids"]


def _direct_logps(trainer, context_text, completion, temperature):
    """log_softmax(logits / temperature) at each completion position, from one plain forward, float64."""
    context = _encode(trainer)(context_text)
    with torch.no_grad():
        logits = trainer.model(torch.tensor([context + completion])).logits[0].double()
    return (logits[len(context) - 1 : len(context) + len(completion) - 1] / temperature).log_softmax(-1)


def test_mixture_logprobs_average_the_probabilities_of_the_contexts_that_apply(trainer):
    rollout = _rollout(_encode(trainer))
    signals = TokenSignals.of(_context(trainer, rollout))
    first, second = REFERENCE, SignalContext("wrong", "{wrong_solution}\n\n{prompt}")
    mixed_logps, count = signals.mixture_logprobs([first, second])
    expected = torch.log((signals.logprobs(first).exp() + signals.logprobs(second).exp()) / 2) * signals.mask
    assert count.tolist() == [2, 2, 2, 2] and torch.allclose(mixed_logps, expected, atol=1e-6)
    rollout.columns["answer"][2:] = [None, None]  # the second problem: no context applies
    signals = TokenSignals.of(_context(trainer, rollout))
    mixed_logps, count = signals.mixture_logprobs([first])
    assert count.tolist() == [1, 1, 0, 0] and (mixed_logps[2:] == 0).all()
    assert torch.allclose(mixed_logps[:2], signals.logprobs(first)[:2])


def test_signals_equal_a_direct_computation(trainer):
    rollout = _rollout(_encode(trainer))
    signals = TokenSignals.of(_context(trainer, rollout))
    wrong = SignalContext("wrong", "{wrong_solution}\n\n{prompt}")
    gap, contrast = signals.gap(REFERENCE), signals.contrast(REFERENCE, wrong)
    entropy, mass = signals.entropy(REFERENCE), signals.topk_mass(REFERENCE, 3)
    fields = derived_fields(rollout, where="test")
    for i, completion in enumerate(rollout.completion_ids):
        n = len(completion)
        at = torch.arange(n)
        token = lambda logps: logps[at, completion]  # noqa: E731
        student = _direct_logps(trainer, rollout.prompts[i], completion, TEMPERATURE)
        teacher = _direct_logps(trainer, f"{rollout.columns['solution'][i]}\n\n{rollout.prompts[i]}", completion,
                                TEMPERATURE)
        spoiled = _direct_logps(trainer, f"{fields['wrong_solution'][i]}\n\n{rollout.prompts[i]}", completion,
                                TEMPERATURE)
        assert torch.allclose(gap[i, :n].double(), token(teacher) - token(student), atol=1e-4)
        assert torch.allclose(contrast[i, :n].double(), token(teacher) - token(spoiled), atol=1e-4)
        assert torch.allclose(entropy[i, :n].double(), -(teacher.exp() * teacher).sum(-1), atol=1e-4)
        assert torch.allclose(mass[i, :n].double(), teacher.exp().topk(3, -1).values.sum(-1), atol=1e-5)
        assert (gap[i, n:] == 0).all() and (entropy[i, n:] == 0).all()
    # At temperature 1 the values differ: the run's sampling temperature is the default.
    assert not torch.allclose(signals.gap(REFERENCE, temperature=1.0), gap, atol=1e-3)


def test_signals_of_rows_without_an_answer_are_zero_and_leave_grpos_advantages(trainer):
    """Row by row, the rows with an answer get the signals they get in a batch of their own; those without get
    none, so every modulator leaves their advantages as GRPO's."""
    mixed = _rollout(_encode(trainer))
    mixed.columns["answer"][2:] = [None, None]
    alone = mixed.select([0, 1])
    signals, own = TokenSignals.of(_context(trainer, mixed)), TokenSignals.of(_context(trainer, alone))
    wrong = SignalContext("wrong", "{wrong_solution}\n\n{prompt}")
    width = own.mask.size(1)
    for name, of in [("gap", lambda s: s.gap(REFERENCE)), ("contrast", lambda s: s.contrast(REFERENCE, wrong)),
                     ("entropy", lambda s: s.entropy(REFERENCE)), ("top-k mass", lambda s: s.topk_mass(REFERENCE, 2))]:
        got, want = of(signals), of(own)
        assert not got[2:].any(), name
        assert torch.allclose(got[:2, :width], want, atol=1e-5) and want.abs().sum() > 0, name
    assert signals.covered(REFERENCE).tolist() == (mixed.completion_mask() * torch.tensor([[1], [1], [0], [0]])).tolist()
    advantages = torch.tensor([1.0, -1.0, 1.0, -1.0])
    weights = magnitude_weights(signals.gap(REFERENCE), advantages, signals.mask, clip=2.0)
    reshaped = reallocate(advantages, weights, signals.mask)
    assert torch.equal(reshaped[2:], (advantages.unsqueeze(1) * signals.mask)[2:])
    assert not torch.equal(reshaped[:2], (advantages.unsqueeze(1) * signals.mask)[:2])


def test_one_forward_per_distinct_context_shared_by_two_plugins(trainer, monkeypatch):
    scored = []
    original = PolicyAccess.score

    def spy(self, contexts, continuation_ids, **options):
        scored.append(len(contexts))
        return original(self, contexts, continuation_ids, **options)

    monkeypatch.setattr(PolicyAccess, "score", spy)
    rollout = _rollout(_encode(trainer))
    ctx = _context(trainer, rollout)
    claimed = SignalContext("claimed", "{claimed_solution}\n\n{prompt}")
    wrong = SignalContext("wrong", "{wrong_solution}\n\n{prompt}")
    first = TokenSignals.of(ctx).gap(REFERENCE)                   # one plugin: student and reference
    assert scored == [4, 4]
    second = TokenSignals.of(ctx).gap(REFERENCE)                  # another plugin, same batch: no forward
    assert scored == [4, 4] and torch.equal(first, second)
    TokenSignals.of(ctx).logprobs(claimed)                        # a right row's claim is the reference itself:
    assert scored == [4, 4, 2]                                    # only the other two rows are scored
    TokenSignals.of(ctx).contrast(REFERENCE, wrong)               # a wrong row's wrong hint is its own claim
    assert scored == [4, 4, 2, 2]
    TokenSignals.of(ctx).logprobs(STUDENT, temperature=1.0)        # another temperature is another score
    assert scored == [4, 4, 2, 2, 4]
    another_batch = _rollout(_encode(trainer))
    TokenSignals.of(_context(trainer, another_batch)).gap(REFERENCE)
    assert scored == [4, 4, 2, 2, 4, 4, 4]


def test_in_a_loss_term_the_service_scores_the_micro_batch(trainer):
    """A loss context's service holds its micro-batch's rows, on the loss's device, with the values the advantage
    stage computes for the same rows."""
    rollout = _rollout(_encode(trainer))
    whole = TokenSignals.of(_context(trainer, rollout)).gap(REFERENCE)
    rows = [1, 3]
    micro = rollout.select(rows)
    ids = torch.nn.utils.rnn.pad_sequence([torch.tensor(c) for c in micro.completion_ids], batch_first=True)
    ctx = trainer._context(LossContext, policy=PolicyAccess(trainer, sharded=False, model=trainer.model),
                           rollout=micro, completion_ids=ids)
    signals = TokenSignals.of(ctx)
    gap = signals.gap(REFERENCE)
    assert gap.shape == signals.mask.shape == (2, max(len(c) for c in micro.completion_ids))
    assert gap.device == ids.device
    assert torch.allclose(gap, whole[rows, : gap.size(1)], atol=1e-5)


def test_three_stacked_methods_score_each_completion_once_per_distinct_context():
    """RLSD, CSCR and RLCSD read five contexts per completion between them, three of them distinct per row: the
    short mode of benchmarks/token_signals.py, a real run, scores exactly three rows per completion trained."""
    benchmark = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "token_signals.py")
    result = benchmark.run(rounds=1, steps=2)
    assert result["teacher_forwards_per_completion"] == 3.0, result


@pytest.mark.parametrize(
    "settings, message",
    [({"form": "both"}, "gap.form: must be one of advantage, loss, not 'both'"), ({"scale": -0.1}, "gap.scale: must be non-negative")],
)
def test_teacher_gap_settings_refuse_an_unknown_form_and_a_negative_scale(settings, message):
    with pytest.raises(ConfigError, match=message):
        _GapSettings(**settings)


def test_teacher_gap_settings_take_any_teacher_and_the_reference_layout():
    settings = _GapSettings(teacher="my_snapshot")
    assert (settings.form, settings.teacher_template) == ("advantage", REFERENCE_TEMPLATE)


@dataclass
class _GapSettings(TeacherGapSettings):
    section: ClassVar[str] = "gap"
