"""π-Distill: the teacher samples and GRPO trains it at weight alpha; the student is trained on the teacher's
tokens by a clipped importance-weighted policy gradient and the KL to the teacher; each KL reaches one side."""

import math
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from stackrl.blocks.teacher import teacher_prompts
from stackrl.context import AdvantageContext, SampleContext
from stackrl.policy import PolicyAccess
from stackrl.run import build_trainer
from stackrl.tasks import arith_tiny_path
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import completion_logits, written_rollout
from stackrl.testing.repository import load_script
from stackrl_pidistill import PiDistill, PiDistillConfig, student_and_teacher_terms
from stackrl_pidistill.objective import joint_loss

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


class TestConformance(PluginConformance):
    plugin_name = "pidistill"
    refused_settings = [
        ({"alpha": 1.5}, "pidistill.alpha: must lie in \\[0, 1\\]"),
        ({"beta": -0.1}, "pidistill.beta: must be non-negative"),
        ({"clip_low": 1.0}, "pidistill.clip_low: must lie in \\[0, 1\\)"),
        ({"clip_high": -0.1}, "pidistill.clip_high: must be non-negative"),
        ({"teacher": "reference"}, "pidistill.teacher: must be one of policy"),
    ]


def _plugin(**settings):
    plugin = PiDistill(PiDistillConfig(**settings))
    plugin.name = "pidistill"
    return plugin


def test_the_student_gradient_is_the_clipped_importance_weighted_advantage():
    """r = exp(log pi_S - sg log pi_T); the loss is -min(r A, clip(r, 0.8, 1.2) A) per token: a positive
    advantage stops pulling once r passes 1.2, a negative one once r falls below 0.8, and the teacher gets no
    gradient from it."""
    ratios = torch.tensor([0.5, 1.0, 1.5, 0.5, 1.5])
    advantages = torch.tensor([1.0, 2.0, 1.0, -1.0, -1.0])
    teacher = torch.tensor([-1.0, -2.0, -0.5, -1.5, -1.0], requires_grad=True)
    student = (teacher.detach() + ratios.log()).requires_grad_()
    terms = student_and_teacher_terms(student, teacher, advantages, clip_low=0.2, clip_high=0.2)
    expected = torch.tensor([-0.5, -2.0, -1.2, 0.8, 1.5])  # -min(rA, clip(r)A), by hand
    assert torch.allclose(terms["student_pg"], expected)
    terms["student_pg"].sum().backward()
    # d/d log pi_S of -r A where the unclipped term is the minimum, else 0
    assert torch.allclose(student.grad, torch.tensor([-0.5, -2.0, 0.0, 0.0, 1.5]))
    assert teacher.grad is None or (teacher.grad == 0).all()


def test_each_kl_is_teacher_to_student_and_reaches_one_side():
    """Both KLs are KL(pi_T || pi_S) (forward: the student's NLL of the teacher's distribution, not KL(pi_S || pi_T));
    the student's reaches only the student, the teacher's only the teacher."""
    s_logits = torch.tensor([[4.0, 0.0, 0.0]], requires_grad=True)
    t_logits = torch.tensor([[0.0, 2.0, -3.0]], requires_grad=True)
    s, t = s_logits.log_softmax(-1), t_logits.log_softmax(-1)
    terms = student_and_teacher_terms(s[:, 0], t[:, 0], torch.zeros(1), clip_low=0.2, clip_high=0.2,
                                      student_vocab=s, teacher_vocab=t)
    p_t, p_s = t.exp(), s.exp()
    forward = (p_t * (t - s)).sum().item()
    reverse = (p_s * (s - t)).sum().item()
    assert abs(forward - reverse) > 1.0
    assert terms["student_kl"].item() == pytest.approx(forward, rel=1e-5)
    assert terms["teacher_kl"].item() == pytest.approx(forward, rel=1e-5)
    (student_grad,) = torch.autograd.grad(terms["student_kl"].sum(), s_logits, retain_graph=True)
    assert torch.autograd.grad(terms["student_kl"].sum(), t_logits, retain_graph=True, allow_unused=True)[0] is None
    assert torch.allclose(student_grad, p_s - p_t, atol=1e-6)  # d KL(T || S) / d student logits
    (teacher_grad,) = torch.autograd.grad(terms["teacher_kl"].sum(), t_logits, retain_graph=True)
    assert teacher_grad.abs().sum() > 0
    assert torch.autograd.grad(terms["teacher_kl"].sum(), s_logits, allow_unused=True)[0] is None


def test_the_joint_loss_weighs_student_by_one_minus_alpha_and_each_kl_by_beta():
    terms = {"student_pg": torch.tensor([1.0, 3.0]), "student_kl": torch.tensor([0.5, 1.5]),
             "teacher_kl": torch.tensor([2.0, 4.0])}
    # (1 - 0.3) * (2 + 0.2 * 1) + 0.3 * 0.2 * 3
    assert joint_loss(terms, alpha=0.3, beta=0.2).item() == pytest.approx(0.7 * 2.2 + 0.06 * 3)
    assert joint_loss(terms, alpha=0.3, beta=0.0).item() == pytest.approx(0.7 * 2.0)
    assert joint_loss(terms, alpha=1.0, beta=0.2).item() == pytest.approx(0.2 * 3)


def _sample_context(training=True):
    columns = {"solution": ["4 * 2 = 8", None], "answer": ["8", "3"]}
    return SampleContext(step=0, tokenizer=None, policy=None, _log=lambda *_: None, training=training,
                         rollout_columns=columns, group_size=1)


def test_training_rollouts_are_sampled_from_the_teacher_prompt_and_evaluation_from_the_student():
    plugin = _plugin()
    prompts = ["What is 4 * 2?\n", "What is 1 + 2?\n"]
    got = plugin.transform_prompts(list(prompts), _sample_context())
    assert got == ["4 * 2 = 8\n\nWhat is 4 * 2?\n", prompts[1]], "a row without the information stays the student's"
    assert plugin.transform_prompts(list(prompts), _sample_context(training=False)) is None


def test_grpo_trains_the_teacher_at_alpha_and_the_student_term_sees_the_advantages_unscaled():
    tokenizer = AutoTokenizer.from_pretrained(arith_tiny_path())
    rollout = written_rollout(tokenizer, ["(4 * 2) + 3"] * 2, ["x", "y"], advantages=torch.tensor([1.0, -1.0]))
    rollout.columns["solution"] = [rollout.columns["solution"][0], None]
    ctx = AdvantageContext(step=0, tokenizer=tokenizer, policy=None, _log=lambda *_: None, rollout=rollout)
    got = _plugin(alpha=0.25).reshape_advantages(rollout.advantages, ctx)
    assert torch.allclose(got, torch.tensor([0.25, -1.0])), "the uninformed row keeps GRPO's advantage"
    assert [a.item() for a in rollout.columns["pidistill.advantages"]] == [1.0, -1.0]


@pytest.fixture
def trainer(make_config):
    return build_trainer(make_config(["pidistill"], model={"name_or_path": "stackrl/arith-tiny"}))


def test_the_student_is_the_policy_without_the_information_and_the_teacher_with_it(trainer):
    """On the built-in model, from raw logits: the student's log-probs are those of the question alone, the
    teacher's those of the solution and the question the row was sampled from."""
    tokenizer = trainer.processing_class
    rollout = written_rollout(tokenizer, ["(4 * 2) + 3"], ["4 * 2 = 9\n9 + 3 = 12\nThe answer is 12."], group_size=1)
    shown = teacher_prompts(rollout.prompts, rollout.columns, REFERENCE_TEMPLATE)
    rollout.prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in shown]
    rollout.columns["pidistill.advantages"] = [torch.tensor(-1.0)]
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model)
    terms = _plugin(clip_low=0.9, clip_high=9.0).terms(policy, rollout)
    ids = rollout.completion_ids[0]
    student_ids = tokenizer(rollout.prompts[0], add_special_tokens=False)["input_ids"]
    s = completion_logits(trainer.model, student_ids, ids).log_softmax(-1)
    t = completion_logits(trainer.model, rollout.prompt_ids[0], ids).log_softmax(-1)
    token = torch.tensor(ids).unsqueeze(1)
    ratio = (s.gather(1, token) - t.gather(1, token)).exp().squeeze(1)
    assert (ratio > 1.5).any() and (ratio < 0.5).any(), "the rows' teacher and student disagree"
    expected = torch.maximum(ratio, ratio.clamp(0.1, 10.0))  # -min(r A, clip(r) A) at A = -1
    assert torch.allclose(terms["student_pg"].double(), expected, rtol=1e-4, atol=1e-5)
    assert torch.allclose(terms["student_kl"].double(), (t.exp() * (t - s)).sum(-1), rtol=1e-4, atol=1e-5)


@pytest.mark.mechanism
def test_the_student_learns_the_teachers_tokens_beyond_what_training_the_teacher_alone_gives(tmp_path):
    """The mechanism on the built-in model, short (the full figures come from benchmarks/mechanism.py): after the
    same steps, the student, never shown the solution, assigns held-out reference solutions a lower NLL with the
    student term (alpha 0.5) than with GRPO on the teacher's rollouts alone (alpha 1, where shared weights are the
    only route to the student)."""
    mechanism = load_script(BENCHMARK)
    # Four steps: the student's NLL falls with the term from the first step on (0.082 before training, 0.071 after
    # four steps against 0.081 without the term, seed 0) and moves little after.
    joint = mechanism.run("pidistill", 0, tmp_path, steps=4, heldout=64, accuracy=False)
    alone = mechanism.run("teacher_only", 0, tmp_path, steps=4, heldout=64, accuracy=False)
    assert joint["student_nll"] < 0.95 * alone["student_nll"], (joint, alone)
