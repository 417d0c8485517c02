"""SDAR's gated term: g_t (log pi_T - log pi_S) with g_t = sigmoid(sharpness * gap), gate and teacher detached."""

import math
from pathlib import Path

import pytest
import torch

from stackrl import LossContext
from stackrl.blocks.teacher import teacher_prompts
from stackrl.policy import PolicyAccess
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import completion_logits, written_rollout
from stackrl.testing.repository import load_script
from stackrl_sdargate import SdarGate, SdarGateConfig, gated_distillation

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


class TestConformance(PluginConformance):
    plugin_name = "sdargate"
    refused_settings = [
        ({"sharpness": -1.0}, "sdargate.sharpness: must be non-negative"),
        ({"coef": -0.1}, "sdargate.coef: must be non-negative"),
        ({"teacher": "ema"}, "sdargate.teacher: must be one of policy, reference"),
    ]


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def test_the_term_is_the_gap_times_its_sigmoid_and_only_the_student_moves():
    teacher = torch.tensor([[-1.0, -3.0, -0.5, 0.0]], requires_grad=True)
    gaps = torch.tensor([[0.4, -0.4, 2.0, 0.0]])
    student = (teacher.detach() - gaps).requires_grad_()
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    loss, gate = gated_distillation(student, teacher, mask, sharpness=5.0)
    expected_gate = [sigmoid(2.0), sigmoid(-2.0), sigmoid(10.0), 0.0]
    assert gate[0].tolist() == pytest.approx(expected_gate, rel=1e-6)
    by_hand = (0.4 * sigmoid(2.0) - 0.4 * sigmoid(-2.0) + 2.0 * sigmoid(10.0)) / 3
    assert loss.item() == pytest.approx(by_hand, rel=1e-6)
    loss.backward()
    # d/d log pi_S of g (log pi_T - log pi_S) with g held: -g / (tokens); a teacher-endorsed token is raised ~7x
    # harder than a rejected one at sharpness 5 and gap 0.4, and padding not at all.
    assert student.grad[0].tolist() == pytest.approx([-g / 3 for g in expected_gate], rel=1e-6)
    assert teacher.grad is None or (teacher.grad == 0).all()


def test_sharpness_zero_is_ungated_opsd_at_half_strength():
    student, teacher = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-2.0, -1.0]])
    loss, gate = gated_distillation(student, teacher, torch.ones(1, 2), sharpness=0.0)
    assert (gate == 0.5).all() and loss.item() == pytest.approx(0.0)


@pytest.fixture
def trainer(make_config):
    return build_trainer(make_config(["sdargate"], model={"name_or_path": "stackrl/arith-tiny"}))


def test_the_loss_term_gates_the_built_in_teachers_gap_from_raw_logits(trainer):
    """The teacher is the policy after the solution and the question; the student the policy after the question
    alone; the term is coef times the gated gap's token mean, and its rows report as distilled."""
    tokenizer = trainer.processing_class
    rollout = written_rollout(tokenizer, ["(4 * 2) + 3", "(3 + 5) - 2"],
                              ["4 * 2 = 9\n9 + 3 = 12\nThe answer is 12.", "3 + 5 = 8\n8 - 2 = 6\nThe answer is 6."])
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model)
    scores = policy.score(rollout.prompt_ids, rollout.completion_ids, grad=True)
    acted = []
    ctx = LossContext(step=0, tokenizer=tokenizer, policy=policy, _log=lambda *_: None, _plugin="sdargate",
                      _acted=lambda _, n, of, hint: acted.append((n, of)), rollout=rollout,
                      completion_ids=torch.zeros_like(scores.mask, dtype=torch.long), policy_logps=scores.logprobs,
                      loss_mask=scores.mask)
    plugin = SdarGate(SdarGateConfig(coef=0.5))
    plugin.name = "sdargate"
    got = plugin.loss_term(ctx)
    shown = teacher_prompts(rollout.prompts, rollout.columns, REFERENCE_TEMPLATE)
    total, count = 0.0, 0
    for prompt_ids, teacher_text, ids in zip(rollout.prompt_ids, shown, rollout.completion_ids):
        token = torch.tensor(ids).unsqueeze(1)
        s = completion_logits(trainer.model, prompt_ids, ids).log_softmax(-1).gather(1, token).squeeze(1)
        teacher_ids = tokenizer(teacher_text, add_special_tokens=False)["input_ids"]
        t = completion_logits(trainer.model, teacher_ids, ids).log_softmax(-1).gather(1, token).squeeze(1)
        gap = t - s
        total, count = total + (torch.sigmoid(5.0 * gap) * gap).sum().item(), count + len(ids)
    assert got.item() == pytest.approx(0.5 * total / count, rel=1e-4)
    assert acted == [(count, count)]
    got.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in trainer.model.parameters())


@pytest.mark.mechanism
def test_the_gate_raises_the_tokens_the_teacher_endorses_on_the_built_in_model():
    """The mechanism on the built-in model, short (the full figures come from benchmarks/mechanism.py): a few steps
    of the term alone raise the student's log-prob of teacher-endorsed sampled tokens far more than of rejected
    ones, a separation the ungated term (every gate 1/2) does not make."""
    figures = load_script(BENCHMARK).endorsement(16, 0)
    assert figures["endorsed_tokens"] >= 10 and figures["rejected_tokens"] >= 10, figures
    gated = figures["gated_endorsed"] - figures["gated_rejected"]
    ungated = figures["ungated_endorsed"] - figures["ungated_rejected"]
    assert figures["gated_endorsed"] > 0 and gated > 2 * ungated, figures
