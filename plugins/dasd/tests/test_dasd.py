"""DASD: low-entropy tokens are moved toward the privileged teacher, high-entropy tokens away from it. The advantage
form adds tanh((tau - H_t) / s_H) * sigmoid(|delta_t| - 1) * delta_t to GRPO's token advantages; the loss form
descends the divergence at low entropy and ascends a bounded one at high entropy; the route is read from the
chosen model's entropy against a fixed or a quantile threshold."""

import math
from types import SimpleNamespace

import pytest
import torch

from stackrl import ConfigError
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import advantage_context, written_rollout
from stackrl_dasd import Dasd, DasdConfig, routed_divergence
from stackrl_dasd.plugin import directional_credit, pushed_tokens


class TestConformance(PluginConformance):
    plugin_name = "dasd"


def _kl(a, b):
    return torch.where(a > 0, a * (a / b).log(), torch.zeros_like(a)).sum(-1)


def _jsd(p, q, beta):
    """beta KL(q || m) + (1 - beta) KL(p || m), m = beta q + (1 - beta) p; p the student's, q the teacher's."""
    m = beta * q + (1 - beta) * p
    return beta * _kl(q, m) + (1 - beta) * _kl(p, m)


def _credit_by_hand(gap: list[float], entropy: list[float], quantile: float) -> list[float]:
    """One completion's routed correction written out: delta = gap / mean |gap|, tau the entropies' linear-interpolated
    quantile, s the mean absolute deviation of the entropies, tanh((tau - H) / s) * sigmoid(|delta| - 1) * delta."""
    typical = sum(abs(g) for g in gap) / len(gap)
    ordered = sorted(entropy)
    position = quantile * (len(ordered) - 1)
    low = math.floor(position)
    tau = ordered[low] + (position - low) * (ordered[min(low + 1, len(ordered) - 1)] - ordered[low])
    mean = sum(entropy) / len(entropy)
    spread = sum(abs(h - mean) for h in entropy) / len(entropy)
    out = []
    for g, h in zip(gap, entropy):
        delta = g / typical
        out.append(math.tanh((tau - h) / spread) / (1 + math.exp(-(abs(delta) - 1))) * delta)
    return out


def test_the_advantage_forms_correction_is_the_routed_normalised_gap_per_completion():
    """Hand-built rows: the second is shorter (padding), the third has no teacher (its gap is zero). A flipped
    router, an unnormalised gap, a batch-wide threshold or a missing reliability sigmoid each give another value."""
    gap = torch.tensor([[2.0, -1.0, 0.5, 3.0, -0.2], [1.0, -2.0, 0.3, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    entropy = torch.tensor([[0.1, 0.9, 0.3, 1.5, 0.05], [0.2, 1.1, 0.4, 0.0, 0.0], [0.5, 0.7, 0.2, 0.1, 0.3]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    credit, threshold = directional_credit(gap, entropy, mask, DasdConfig(threshold=0.8))
    first = _credit_by_hand(gap[0].tolist(), entropy[0].tolist(), 0.8)
    second = _credit_by_hand(gap[1, :3].tolist(), entropy[1, :3].tolist(), 0.8)
    assert torch.allclose(credit[0], torch.tensor(first), atol=1e-6)
    assert torch.allclose(credit[1, :3], torch.tensor(second), atol=1e-6)
    assert (credit[1, 3:] == 0).all() and (credit[2] == 0).all()
    # The direction: the most uncertain token, which the teacher expects more, loses credit (pushed away); a sure
    # token the teacher expects more gains it (pulled toward).
    assert credit[0, 3] < 0 and credit[0, 0] > 0
    assert threshold == pytest.approx((torch.quantile(entropy[0], 0.8) + torch.quantile(entropy[1, :3], 0.8)).item() / 2)


def test_the_advantage_forms_fixed_threshold_routes_at_that_entropy():
    gap, entropy = torch.tensor([[1.0, 1.0, 1.0]]), torch.tensor([[0.2, 0.6, 1.0]])
    credit, threshold = directional_credit(gap, entropy, torch.ones(1, 3), DasdConfig(threshold_kind="fixed",
                                                                                       threshold=0.6))
    assert threshold == 0.6
    assert credit[0, 0] > 0 and credit[0, 1] == 0 and credit[0, 2] < 0


def test_the_plugin_adds_the_routed_correction_of_the_built_in_models_gap_to_grpos_advantage(make_config):
    """On the built-in model the advantages are GRPO's plus scale times the correction of the sampled tokens'
    gap log pi(y_t | solution, question) - log pi(y_t | question), routed by the student's entropy, all written out
    on raw logits at the sampling temperature; the gap taken the other way round gives another advantage."""
    temperature = 1.2
    trainer = build_trainer(make_config(["dasd"], model={"name_or_path": "stackrl/arith-tiny"},
                                        dasd={"scale": 0.3}, trainer={"temperature": temperature}))
    rollout = written_rollout(trainer.processing_class, ["(4 * 2) + 3", "(3 + 5) - 2"],
                              ["4 * 2 = 8\n8 + 3 = 12\nThe answer is 12.", "3 + 5 = 7\n7 - 2 = 5\nThe answer is 5."])
    advantages = torch.tensor([0.6, -0.6])
    got = trainer.plugins.plugins["dasd"].reshape_advantages(advantages, advantage_context(trainer, rollout, "dasd"))

    encode = lambda text: trainer.processing_class(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    for row, (prompt, solution, context, completion) in enumerate(zip(
        rollout.prompts, rollout.columns["solution"], rollout.prompt_ids, rollout.completion_ids
    )):
        student = _logps(trainer.model, context, completion, temperature)
        teacher = _logps(trainer.model, encode(REFERENCE_TEMPLATE.format(solution=solution, prompt=prompt)),
                         completion, temperature)
        tokens = torch.tensor(completion).unsqueeze(-1)
        gap = (teacher.gather(-1, tokens) - student.gather(-1, tokens)).squeeze(-1)
        entropy = -(student.exp() * student).sum(-1)
        expected = advantages[row] + 0.3 * torch.tensor(_credit_by_hand(gap.tolist(), entropy.tolist(), 0.8))
        n = len(completion)
        assert torch.allclose(got[row, :n].double(), expected.double(), atol=1e-3)  # float32 entropies near tau
        flipped = advantages[row] + 0.3 * torch.tensor(_credit_by_hand((-gap).tolist(), entropy.tolist(), 0.8))
        assert not torch.allclose(got[row, :n].double(), flipped.double(), atol=1e-2)


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
    config = DasdConfig(form="loss", entropy_of=entropy_of, threshold_kind="fixed", threshold=threshold)
    plugin = Dasd(config)
    plugin.name = "dasd"
    rollout = written_rollout(trainer.processing_class, ["(4 * 2) + 3", "(3 + 5) - 2"],
                              ["4 * 2 = 8\n8 + 3 = 12\nThe answer is 12.", "3 + 5 = 7\n7 - 2 = 5\nThe answer is 5."])
    policy = trainer._shared_policy
    ctx = SimpleNamespace(rollout=rollout, score=policy.score, sampling_temperature=temperature, training=False,
                          log=lambda *_: None, acted=lambda *_, **__: None)
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
    with pytest.raises(ConfigError, match="dasd.form: must be one of advantage, loss, not 'push'"):
        Dasd(DasdConfig(form="push"))
    with pytest.raises(ConfigError, match="dasd.scale: must be non-negative"):
        Dasd(DasdConfig(scale=-1.0))
    with pytest.raises(ConfigError, match=r"dasd.push_beta: must lie strictly inside \(0, 1\)"):
        Dasd(DasdConfig(push_beta=0.0))
    with pytest.raises(ConfigError, match=r"dasd.threshold: a quantile must lie in \[0, 1\], not 2.0"):
        Dasd(DasdConfig(threshold=2.0))
    with pytest.raises(ConfigError, match="dasd.entropy_of: must be one of student, teacher, not 'both'"):
        Dasd(DasdConfig(entropy_of="both"))
