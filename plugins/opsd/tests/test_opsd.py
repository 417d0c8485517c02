"""OPSD: its loss is the generalized JSD to the privileged self-teacher, on the rows it should touch only."""

import math
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from stackrl import Rollout
from stackrl.blocks.teacher import teacher_prompts
from stackrl.policy import PolicyAccess
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin, train_steps
from stackrl.testing.heldout import completion_logits
from stackrl.testing.repository import load_script
from stackrl_opsd import OpsdConfig, distillation_divergence

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


class TestConformance(PluginConformance):
    plugin_name = "opsd"
    plugin_settings = {"opsd": {"teacher_template": REFERENCE_TEMPLATE}}
    refused_settings = [({"teacher": "teacher"}, "must be one of policy, reference, ema, not 'teacher'"),
                        ({"beta": 2.0}, r"must lie in \[0, 1\], not 2.0")]


def _rollout(tokenizer):
    prompts = ["What is 2 + 3?\n", "What is 4 * 2?\n"]
    completions = ["2 + 3 = 5\nThe answer is 5.", "4 * 2 = 9\nThe answer is 9."]
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    return Rollout(
        prompts=prompts,
        completions=completions,
        prompt_ids=[encode(p) for p in prompts],
        completion_ids=[encode(c) for c in completions],
        columns={"solution": ["2 + 3 = 5\nThe answer is 5.", "4 * 2 = 8\nThe answer is 8."], "answer": ["5", "8"]},
        group_size=2,
        rewards={"exact_match": torch.tensor([1.0, 0.0])},
    )


SAMPLING_TEMPERATURE = 1.5


@pytest.fixture
def trainer(built_in_trainer):
    """The built-in model, which follows a reference solution: its teacher and student disagree where it matters."""
    return built_in_trainer(["opsd"], opsd={"teacher_template": REFERENCE_TEMPLATE},
                            trainer={"temperature": SAMPLING_TEMPERATURE})


def direct_jsd(trainer, rollout, beta: float, temperature: float, top_k: int | None = None) -> torch.Tensor:
    """The generalized JSD at every completion token, written out from its definition on the model's raw logits in
    float64: p the student's and q the teacher's softmax(logits / temperature), optionally both restricted to the
    teacher's top-k logits and renormalised; m = beta q + (1 - beta) p; beta KL(q || m) + (1 - beta) KL(p || m)."""
    teacher_ids = trainer._tokenize_prompts(teacher_prompts(rollout.prompts, rollout.columns, REFERENCE_TEMPLATE))[0]
    values = []
    for student_ids, teacher_context, completion in zip(rollout.prompt_ids, teacher_ids, rollout.completion_ids):
        student, teacher = (completion_logits(trainer.model, ids, completion) / temperature
                            for ids in (student_ids, list(teacher_context)))
        if top_k is not None:
            keep = teacher.topk(top_k, dim=-1).indices
            student, teacher = student.gather(-1, keep), teacher.gather(-1, keep)
        p, q = student.softmax(-1), teacher.softmax(-1)
        m = beta * q + (1 - beta) * p
        values.append(beta * (q * (q / m).log()).sum(-1) + (1 - beta) * (p * (p / m).log()).sum(-1))
    return torch.cat(values)


@pytest.mark.parametrize("beta", [0.1, 0.5, 0.9])
def test_divergence_is_the_jsd_of_student_and_teacher_at_the_sampling_temperature(trainer, beta):
    rollout = _rollout(trainer.processing_class)
    config = OpsdConfig(teacher_template=REFERENCE_TEMPLATE, beta=beta)  # temperature: the sampling one
    got = distillation_divergence(trainer._shared_policy, rollout, config, teacher="policy", grad=False)
    expected = direct_jsd(trainer, rollout, beta, SAMPLING_TEMPERATURE)
    assert got.shape == (sum(len(c) for c in rollout.completion_ids),)
    assert torch.allclose(got.double(), expected, rtol=1e-4, atol=1e-7)
    # Swapping beta and 1 - beta (beta != 1/2) gives another divergence, and so does another temperature.
    if beta != 0.5:
        assert not torch.allclose(direct_jsd(trainer, rollout, 1 - beta, SAMPLING_TEMPERATURE), expected, rtol=1e-2)
    assert not torch.allclose(direct_jsd(trainer, rollout, beta, 1.0), expected, rtol=1e-2)


def test_an_explicit_temperature_overrides_the_sampling_one(trainer):
    rollout = _rollout(trainer.processing_class)
    config = OpsdConfig(teacher_template=REFERENCE_TEMPLATE, beta=0.3, temperature=1.0)
    got = distillation_divergence(trainer._shared_policy, rollout, config, teacher="policy", grad=False)
    assert torch.allclose(got.double(), direct_jsd(trainer, rollout, 0.3, 1.0), rtol=1e-4, atol=1e-7)


def test_top_k_renormalises_over_the_teachers_top_tokens(trainer):
    rollout = _rollout(trainer.processing_class)
    config = OpsdConfig(teacher_template=REFERENCE_TEMPLATE, beta=0.3, top_k=5)
    got = distillation_divergence(trainer._shared_policy, rollout, config, teacher="policy", grad=False)
    expected = direct_jsd(trainer, rollout, 0.3, SAMPLING_TEMPERATURE, top_k=5)
    assert torch.allclose(got.double(), expected, rtol=1e-4, atol=1e-7)
    assert not torch.allclose(expected, direct_jsd(trainer, rollout, 0.3, SAMPLING_TEMPERATURE), rtol=1e-2)


def test_gradient_descends_the_divergence(trainer):
    """A few optimizer steps on the divergence alone lower it: the student's distribution carries the gradient."""
    rollout = _rollout(trainer.processing_class)
    config = OpsdConfig(teacher_template=REFERENCE_TEMPLATE)
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model)
    optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.5)
    values = []
    for _ in range(5):
        loss = distillation_divergence(policy, rollout, config, teacher="policy", grad=True).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        values.append(loss.item())
    assert values[-1] < values[0]


def test_correct_only_keeps_the_rows_the_outcome_reward_passes():
    rollout = _rollout_stub()
    plugin = make_plugin("opsd", correct_only=True)
    assert plugin.rows_to_distill(rollout, step=3) == [0, 2]
    assert make_plugin("opsd").rows_to_distill(rollout, step=3) == [0, 1, 2]
    plugin.config.correct_reward = "math_verify"
    with pytest.raises(Exception, match="opsd.correct_reward: no reward component 'math_verify' at step 3"):
        plugin.rows_to_distill(rollout, step=3)


def _rollout_stub():
    return Rollout(prompts=["a", "b", "c"], completions=["x", "y", "z"], prompt_ids=[[1]] * 3,
                   completion_ids=[[2]] * 3, columns={}, group_size=3,
                   rewards={"exact_match": torch.tensor([1.0, 0.0, 1.0])})


def test_correct_only_scores_no_incorrect_rollout(make_config, distilled_completions):
    """In a real run on the built-in model, every completion OPSD scores is a correct one."""
    config = make_config(
        ["opsd"], model={"name_or_path": "stackrl/arith-tiny"}, rewards={"exact_match": 0.0},
        opsd={"teacher_template": REFERENCE_TEMPLATE, "correct_only": True},
        trainer={"max_completion_length": 48, "num_generations": 4, "per_device_train_batch_size": 8},
    )
    correct = distilled_completions.correct(train_steps(config, steps=2))
    assert correct, "the built-in model gets some rollouts right, so OPSD distils some"
    assert all(correct)


class WeightLog(TrainerCallback):
    """The policy's weights when training begins and after every optimizer step."""

    def __init__(self):
        self.weights = []

    def _keep(self, model):
        self.weights.append({name: p.detach().clone() for name, p in model.named_parameters()})

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._keep(model)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self._keep(model)


def test_ema_teacher_moves_by_the_decay_after_every_step(make_config):
    decay, log = 0.75, WeightLog()
    config = make_config(["opsd"], opsd={"teacher_template": REFERENCE_TEMPLATE, "teacher": "ema", "ema_decay": decay})
    trainer = train_steps(config, steps=2, callbacks=[log])
    from stackrl.policy import _SNAPSHOTS

    snapshot = dict(_SNAPSHOTS[trainer]["opsd"].model.named_parameters())
    first, *after_steps = log.weights
    assert len(after_steps) == 2
    for name, expected in first.items():  # the copy taken at train_begin, then one EMA step per optimizer step
        for weights in after_steps:
            expected = decay * expected + (1 - decay) * weights[name]
        assert torch.allclose(snapshot[name], expected, atol=1e-7), name
    moved = max((after_steps[-1][n] - first[n]).abs().max().item() for n in first)
    assert moved > 1e-4, "the policy moved, so a frozen copy, a plain copy or a swapped decay would all differ"


@pytest.mark.mechanism
def test_a_short_run_brings_the_student_to_its_teacher_and_keeps_accuracy():
    """The mechanism on the built-in model, short (the full figures come from benchmarks/mechanism.py)."""
    mechanism = load_script(BENCHMARK)
    heldout = 64
    before, after = mechanism.run(seed=0, steps=10, heldout=heldout)
    assert after["divergence"] < before["divergence"], (before, after)
    # Ten steps move greedy accuracy little: "not lower" up to the sampling noise of the held-out figure.
    p = before["accuracy"]
    assert after["accuracy"] >= p - math.sqrt(p * (1 - p) / heldout), (before, after)
