"""AgentOPSD: each turn's share of the outcome advantage follows how far the privileged teacher's evidence revises a
success belief carried across the turns."""

import dataclasses
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from stackrl.blocks.turns import SEGMENTS_COLUMN, NewlineTokens, Segment, line_spans
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.heldout import advantage_context, completion_logits, right_and_wrong_rollout
from stackrl.testing.repository import load_script
from stackrl_agentopsd import AgentOpsdConfig, beliefs, revisions, token_weights, turn_evidence, turn_scores

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


class TestConformance(PluginConformance):
    plugin_name = "agentopsd"
    refused_settings = [
        ({"turns": "tokens"}, "agentopsd.turns: must be one of auto, lines, not 'tokens'"),
        ({"evidence": "max"}, "agentopsd.evidence: must be one of sum, mean, not 'max'"),
        ({"revision": "abs"}, "agentopsd.revision: must be one of signed, magnitude, not 'abs'"),
        ({"prior": 1.0}, r"agentopsd.prior: must be in \(0, 1\) or null"),
        ({"decay": 1.5}, r"agentopsd.decay: must be in \[0, 1\], not 1.5"),
        ({"band": 0.0}, r"agentopsd.band: must be in \(0, 1\), not 0.0"),
        ({"mix": -0.1}, r"agentopsd.mix: must be in \[0, 1\], not -0.1"),
        ({"mix_decay_steps": -1}, "agentopsd.mix_decay_steps: must be non-negative, not -1"),
        ({"teacher": "ema"}, "agentopsd.teacher: must be one of policy, reference, not 'ema'"),
    ]


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


# -- the formulas ----------------------------------------------------------------------------------------------------


def test_a_turns_evidence_is_the_sum_or_mean_of_its_real_tokens_gaps():
    gap = torch.tensor([0.5, -1.0, 2.0, -3.0, 7.0])
    mask = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0])
    spans = [(0, 2), (2, 5)]
    assert turn_evidence(gap, mask, spans, "sum").tolist() == pytest.approx([-0.5, -1.0])
    assert turn_evidence(gap, mask, spans, "mean").tolist() == pytest.approx([-0.25, -0.5]), "padding is no token"


def test_the_belief_adds_each_turns_evidence_in_log_odds():
    evidence = torch.tensor([2.0, -3.0, 0.5])
    assert beliefs(evidence, 0.5, 1.0).tolist() == pytest.approx(
        [0.5, sigmoid(2.0), sigmoid(-1.0), sigmoid(-0.5)], rel=1e-6)
    prior = 0.2
    start = math.log(prior / (1 - prior))
    assert beliefs(evidence, prior, 0.5).tolist() == pytest.approx(
        [prior, sigmoid(start + 2.0), sigmoid(start + 1.0 - 3.0), sigmoid(start - 1.0 + 0.5)], rel=1e-6)
    assert beliefs(evidence, prior, 0.0).tolist() == pytest.approx(
        [prior, sigmoid(start + 2.0), sigmoid(start - 3.0), sigmoid(start + 0.5)], rel=1e-6), "decay 0: own evidence"
    assert beliefs(torch.tensor([0.0]), 0.0, 1.0)[0].item() == pytest.approx(1e-4), "the prior is clamped"


def test_a_collapsed_belief_is_revised_little_by_more_evidence_against_it():
    """The history dependence the recursion brings: the second turn's evidence is larger, but the belief had
    already fallen at the first, so the first turn is the pivot; weighted by its own evidence the second would be."""
    evidence = torch.tensor([0.2, -6.0, -8.0])
    revision = revisions(beliefs(evidence, 0.5, 1.0))
    assert revision.tolist() == pytest.approx(
        [sigmoid(0.2) - 0.5, sigmoid(-5.8) - sigmoid(0.2), sigmoid(-13.8) - sigmoid(-5.8)], rel=1e-5)
    assert revision.argmin().item() == 1 and evidence.argmin().item() == 2


def test_signed_weights_favour_the_turn_that_moved_the_belief_the_way_the_outcome_went():
    revision = torch.tensor([0.1, -0.6, 0.0, 0.2])
    z = turn_scores(revision, "signed")
    by_hand = (revision - revision.mean()) / (revision.std(unbiased=False) + 1e-6)
    assert z.tolist() == pytest.approx(by_hand.tolist(), rel=1e-6)
    spans = [(0, 2), (2, 3), (3, 4), (5, 6)]  # token 4 lies in no turn (injected text)
    for sign in (1.0, -1.0):
        weights = token_weights(z, spans, torch.full((6,), sign), "signed", 0.2)
        expected = [min(max(1 + 0.2 * sign * v, 0.8), 1.2) for v in by_hand.tolist()]
        assert weights.tolist() == pytest.approx([expected[0]] * 2 + expected[1:3] + [1.0] + [expected[3]], rel=1e-6)
    negative = token_weights(z, spans, -torch.ones(6), "signed", 0.2)
    assert negative[2] == negative.max() and negative[2] > negative[0], "a failure's weight is on the belief's fall"
    assert token_weights(z, spans, torch.zeros(6), "signed", 0.2).tolist() == [1.0] * 6


def test_magnitude_weights_favour_the_largest_move_either_way():
    revision = torch.tensor([0.1, -0.6, 0.3])
    z = turn_scores(revision, "magnitude")
    moved = revision.abs()
    assert z.tolist() == pytest.approx(((moved - moved.mean()) / (moved.std(unbiased=False) + 1e-6)).tolist())
    for sign in (1.0, -1.0):
        weights = token_weights(z, [(0, 1), (1, 2), (2, 3)], torch.full((3,), sign), "magnitude", 0.5)
        assert weights.argmax().item() == 1


def test_one_turn_or_no_revision_leaves_the_weights_at_one():
    assert turn_scores(torch.tensor([0.4]), "signed").tolist() == [0.0]
    assert turn_scores(torch.zeros(3), "signed").tolist() == [0.0] * 3


# -- the plugin on the built-in model ----------------------------------------------------------------------------------


@pytest.fixture
def trainer(built_in_trainer):
    return built_in_trainer(["agentopsd"])


def _by_hand(trainer, rollout, row: int, prior: float, *, band=0.2, mix=0.5) -> list[float]:
    """Row ``row``'s token weights from raw logits: the policy after the solution and the question against the
    policy after the question alone, summed per line, the belief recursion, the signed standardized revisions."""
    tokenizer = trainer.processing_class
    ids = rollout.completion_ids[row]
    token = torch.tensor(ids).unsqueeze(1)
    student = completion_logits(trainer.model, rollout.prompt_ids[row], ids).log_softmax(-1).gather(1, token)
    shown = REFERENCE_TEMPLATE.format(prompt=rollout.prompts[row], solution=rollout.columns["solution"][row])
    teacher_ids = tokenizer(shown, add_special_tokens=False)["input_ids"]
    teacher = completion_logits(trainer.model, teacher_ids, ids).log_softmax(-1).gather(1, token)
    gap = (teacher - student).squeeze(1).tolist()
    lines = line_spans(ids, NewlineTokens(tokenizer))
    belief, path = math.log(prior / (1 - prior)), [prior]
    for start, end in lines:
        belief += sum(gap[start:end])
        path.append(sigmoid(belief))
    moved = [b - a for a, b in zip(path, path[1:])]
    mean = sum(moved) / len(moved)
    std = math.sqrt(sum((m - mean) ** 2 for m in moved) / len(moved))
    sign = math.copysign(1.0, rollout.advantages[row].item())
    weights = []
    for (start, end), m in zip(lines, moved):
        multiplier = min(max(1 + band * sign * (m - mean) / (std + 1e-6), 1 - band), 1 + band)
        weights += [(1 - mix) + mix * multiplier] * (end - start)
    return weights


def test_each_line_is_weighted_by_its_belief_revision_from_raw_logits(trainer):
    """Right and wrong answers to two problems (rewards 1, 0 in each group: the prior is 1/2); every row's tokens
    are reweighted as the recursion over its lines says, the second wrong row's most on its first, wrong, line."""
    rollout = right_and_wrong_rollout(trainer.processing_class)
    acted = []
    ctx = dataclasses.replace(advantage_context(trainer, rollout, "agentopsd"),
                              _acted=lambda _, n, of, hint: acted.append((n, of)))
    got = make_plugin("agentopsd").reshape_advantages(rollout.advantages, ctx)
    for row, ids in enumerate(rollout.completion_ids):
        expected = [rollout.advantages[row].item() * w for w in _by_hand(trainer, rollout, row, 0.5)]
        assert got[row, : len(ids)].tolist() == pytest.approx(expected, rel=1e-4, abs=1e-6)
        assert (got[row, len(ids):] == 0).all()
    # "3 + 5 = 7" slips at its first line; the teacher rejects the carried slip "7 - 2" even harder, but the belief
    # had already fallen: weighted by each line's own evidence the second line would carry the blame.
    wrong = got[3, : len(rollout.completion_ids[3])] / rollout.advantages[3]
    lines = line_spans(rollout.completion_ids[3], NewlineTokens(trainer.processing_class))
    first, second = wrong[lines[0][0]], wrong[lines[1][0]]
    assert first == wrong.max() and first > second + 0.05, wrong
    total = sum(len(ids) for ids in rollout.completion_ids)
    assert acted == [(total, total)]


def test_the_prior_is_the_groups_mean_reward_unless_set():
    ctx = SimpleNamespace(rollout=[0] * 4, group_size=2, total_reward=torch.tensor([1.0, 0.0, 1.0, 1.0]))
    assert make_plugin("agentopsd").priors(ctx) == [0.5, 0.5, 1.0, 1.0]
    assert make_plugin("agentopsd", prior=0.3).priors(ctx) == [0.3] * 4


def test_a_zero_mix_leaves_grpo_and_normalize_keeps_each_rows_credit(trainer):
    rollout = right_and_wrong_rollout(trainer.processing_class)
    mask = torch.zeros(len(rollout), max(map(len, rollout.completion_ids)))
    for row, ids in enumerate(rollout.completion_ids):
        mask[row, : len(ids)] = 1
    grpo = rollout.advantages.unsqueeze(1) * mask
    ctx = advantage_context(trainer, rollout, "agentopsd")
    assert torch.equal(make_plugin("agentopsd", mix=0.0).reshape_advantages(rollout.advantages, ctx), grpo)
    decayed = dataclasses.replace(ctx, step=10)
    assert torch.equal(make_plugin("agentopsd", mix_decay_steps=10).reshape_advantages(rollout.advantages, decayed),
                       grpo), "the mix falls to 0 at mix_decay_steps"
    kept = make_plugin("agentopsd", normalize=True).reshape_advantages(rollout.advantages, ctx)
    assert torch.allclose(kept.sum(1), grpo.sum(1), atol=1e-5)
    assert not torch.allclose(kept, grpo)


def test_a_multi_turn_row_is_credited_by_its_segments_and_its_injected_text_keeps_grpo(trainer):
    """With the turns block's segments column the turns are the generated segments, not the lines; the injected
    tokens between them lie in no turn."""
    rollout = right_and_wrong_rollout(trainer.processing_class)
    lengths = [len(ids) for ids in rollout.completion_ids]
    rollout.columns[SEGMENTS_COLUMN] = [
        [Segment("answer", 0, 0, 4, ""), Segment("verify", 0, 6, n, "")] for n in lengths
    ]
    ctx = advantage_context(trainer, rollout, "agentopsd")
    got = make_plugin("agentopsd").reshape_advantages(rollout.advantages, ctx)
    for row, n in enumerate(lengths):
        weights = got[row, :n] / rollout.advantages[row]
        assert torch.allclose(weights[4:6], torch.ones(2)), "injected tokens keep GRPO's advantage"
        assert torch.allclose(weights[:4], weights[0]) and torch.allclose(weights[6:n], weights[6])
        assert not torch.isclose(weights[0], weights[6])
    lines = make_plugin("agentopsd", turns="lines").reshape_advantages(rollout.advantages, ctx)
    assert not torch.allclose(lines, got), "turns: lines ignores the segments"


def test_a_row_without_the_teachers_context_keeps_grpos_advantage(trainer):
    rollout = right_and_wrong_rollout(trainer.processing_class)
    rollout.columns["solution"][1] = None  # no solution: no teacher context for the wrong row
    ctx = advantage_context(trainer, rollout, "agentopsd")
    got = make_plugin("agentopsd").reshape_advantages(rollout.advantages, ctx)
    n = len(rollout.completion_ids[1])
    assert torch.allclose(got[1, :n], rollout.advantages[1].expand(n))


def test_the_default_template_is_the_built_in_reference_layout():
    assert AgentOpsdConfig().teacher_template == REFERENCE_TEMPLATE


@pytest.mark.mechanism
def test_on_wrong_rollouts_the_largest_weight_is_on_the_first_wrong_line():
    """The mechanism on the built-in model, short (the full figures come from benchmarks/mechanism.py): on the
    wrong rollouts of held-out problems, the line the teacher's evidence moves the belief most, the first wrong
    one, carries the strictly largest weight far more often than a random line would be it."""
    figures = load_script(BENCHMARK).pivots(32, 0)
    assert figures["rows"] >= 20, figures
    assert figures["pivot"] >= 0.7 and figures["pivot"] > 2 * figures["chance"], figures
