"""DASD: low-entropy tokens descend the divergence to the privileged teacher, high-entropy tokens ascend a bounded
one; the route is read from the chosen model's entropy against a fixed or a quantile threshold."""

import math
from types import SimpleNamespace

import pytest
import torch

from stackrl import ConfigError
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import written_rollout
from stackrl_dasd import Dasd, DasdConfig, routed_divergence
from stackrl_dasd.plugin import pushed_tokens


class TestConformance(PluginConformance):
    plugin_name = "dasd"


def _kl(a, b):
    return torch.where(a > 0, a * (a / b).log(), torch.zeros_like(a)).sum(-1)


def _jsd(p, q, beta):
    """beta KL(q || m) + (1 - beta) KL(p || m), m = beta q + (1 - beta) p; p the student's, q the teacher's."""
    m = beta * q + (1 - beta) * p
    return beta * _kl(q, m) + (1 - beta) * _kl(p, m)


STUDENT = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.4, 0.3, 0.3], [0.9, 0.05, 0.05]])
TEACHER = torch.tensor([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]])


def test_low_entropy_tokens_are_pulled_and_high_entropy_ones_pushed():
    """Asymmetric betas tell the pull's divergence from the push's; a flipped route or a swapped beta differs."""
    config = DasdConfig(pull_beta=0.2, push_beta=0.7, push_weight=0.5)
    pushed = torch.tensor([False, True, True, False])
    got = routed_divergence(STUDENT.log(), TEACHER.log(), pushed, config)
    expected = torch.where(pushed, -0.5 * _jsd(STUDENT, TEACHER, 0.7), _jsd(STUDENT, TEACHER, 0.2))
    assert torch.allclose(got, expected, atol=1e-6)
    assert (got[pushed] < 0).all() and (got[~pushed] > 0).all()
    swapped = torch.where(pushed, -0.5 * _jsd(STUDENT, TEACHER, 0.2), _jsd(STUDENT, TEACHER, 0.7))
    assert not torch.allclose(got, swapped, atol=1e-3)


def test_descending_the_loss_pulls_where_pulled_and_pushes_where_pushed():
    logits = STUDENT.log().clone().requires_grad_(True)
    pushed = torch.tensor([False, True, True, False])
    optimizer = torch.optim.SGD([logits], lr=0.5)
    before = _jsd(STUDENT, TEACHER, 0.5)
    for _ in range(5):
        optimizer.zero_grad()
        routed_divergence(logits.log_softmax(-1), TEACHER.log(), pushed, DasdConfig()).mean().backward()
        optimizer.step()
    after = _jsd(logits.detach().softmax(-1), TEACHER, 0.5)
    assert (after[pushed] > before[pushed]).all() and (after[~pushed] < before[~pushed]).all()


def test_the_push_is_bounded_by_the_binary_entropy_of_its_beta():
    """Disjoint distributions: a pushed token gains log 2 at most (H(0.3) at beta 0.3), where a KL is infinite."""
    student = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]).clamp_min(1e-30)
    teacher = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]).clamp_min(1e-30)
    pushed = torch.tensor([True, True])
    got = routed_divergence(student.log(), teacher.log(), pushed, DasdConfig())
    assert torch.allclose(got, torch.full((2,), -math.log(2)), atol=1e-5)
    bound = -(0.3 * math.log(0.3) + 0.7 * math.log(0.7))
    got = routed_divergence(student.log(), teacher.log(), pushed, DasdConfig(push_beta=0.3, push_weight=2.0))
    assert torch.allclose(got, torch.full((2,), -2 * bound), atol=1e-5)


def test_the_threshold_is_fixed_or_a_quantile_and_only_tokens_above_it_are_pushed():
    entropy = torch.tensor([0.1, 0.9, 0.5, 1.3, 0.2])
    pushed, threshold = pushed_tokens(entropy, DasdConfig(threshold_kind="fixed", threshold=0.5))
    assert pushed.tolist() == [False, True, False, True, False] and threshold == 0.5
    pushed, threshold = pushed_tokens(entropy, DasdConfig(threshold=0.75))  # the 0.75 quantile: 0.9
    assert pushed.tolist() == [False, False, False, True, False] and threshold == pytest.approx(0.9)
    pushed, _ = pushed_tokens(entropy, DasdConfig(threshold=1.0))
    assert not pushed.any()  # quantile 1: nothing above the largest entropy, plain self-distillation


def _logps(model, context, completion, temperature):
    with torch.no_grad():
        logits = model(torch.tensor([context + completion])).logits[0].double()
    return (logits[len(context) - 1 : len(context) + len(completion) - 1] / temperature).log_softmax(-1)


@pytest.mark.parametrize("entropy_of", ["student", "teacher"])
def test_the_loss_routes_by_the_chosen_models_entropy_on_the_built_in_model(make_config, entropy_of):
    """The loss term equals the routed divergence written out on the model's raw logits at the sampling
    temperature, with the route read from the student's (or the teacher's) entropy; the other route differs."""
    temperature, threshold = 1.2, 0.05
    trainer = build_trainer(make_config(["dasd"], model={"name_or_path": "stackrl/arith-tiny"},
                                        trainer={"temperature": temperature}))
    config = DasdConfig(entropy_of=entropy_of, threshold_kind="fixed", threshold=threshold)
    plugin = Dasd(config)
    plugin.name = "dasd"
    rollout = written_rollout(trainer.processing_class, ["(4 * 2) + 3", "(3 + 5) - 2"],
                              ["4 * 2 = 8\n8 + 3 = 12\nThe answer is 12.", "3 + 5 = 7\n7 - 2 = 5\nThe answer is 5."])
    policy = trainer._shared_policy
    ctx = SimpleNamespace(rollout=rollout, score=policy.score, sampling_temperature=temperature, training=False,
                          log=lambda *_: None)
    got = plugin.loss_term(ctx)

    encode = lambda text: trainer.processing_class(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    student, teacher, routes = [], [], {}
    for prompt, solution, context, completion in zip(
        rollout.prompts, rollout.columns["solution"], rollout.prompt_ids, rollout.completion_ids
    ):
        student.append(_logps(trainer.model, context, completion, temperature))
        teacher.append(_logps(trainer.model, encode(REFERENCE_TEMPLATE.format(solution=solution, prompt=prompt)),
                              completion, temperature))
    p, q = torch.cat(student).exp(), torch.cat(teacher).exp()
    for name, dist in (("student", p), ("teacher", q)):
        routes[name] = -(dist * dist.log()).sum(-1) > threshold
    expected = {name: torch.where(r, -_jsd(p, q, 0.5), _jsd(p, q, 0.5)).mean().item() for name, r in routes.items()}
    assert 0 < routes[entropy_of].float().mean() < 1, "the threshold splits the tokens"
    assert got.item() == pytest.approx(expected[entropy_of], rel=1e-4)
    other = "teacher" if entropy_of == "student" else "student"
    assert got.item() != pytest.approx(expected[other], rel=1e-2)


def test_bad_settings_name_the_key():
    with pytest.raises(ConfigError, match=r"dasd.push_beta: must lie strictly inside \(0, 1\)"):
        Dasd(DasdConfig(push_beta=0.0))
    with pytest.raises(ConfigError, match=r"dasd.threshold: a quantile must lie in \[0, 1\], not 2.0"):
        Dasd(DasdConfig(threshold=2.0))
    with pytest.raises(ConfigError, match="dasd.entropy_of: must be one of student, teacher, not 'both'"):
        Dasd(DasdConfig(entropy_of="both"))
