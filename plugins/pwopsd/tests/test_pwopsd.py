"""PW-OPSD: its loss is OPSD's clipped forward KL to the privileged self-teacher, times a weight rising along the
completion."""

from types import SimpleNamespace

import pytest
import torch

from stackrl import ConfigError, Rollout
from stackrl.blocks.teacher import student_and_teacher, teacher_prompts
from stackrl.policy import PolicyAccess
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import completion_logits, written_rollout
from stackrl_pwopsd import PwOpsd, PwOpsdConfig, weighted_divergence


class TestConformance(PluginConformance):
    plugin_name = "pwopsd"
    plugin_settings = {"pwopsd": {"teacher_template": REFERENCE_TEMPLATE}}


SAMPLING_TEMPERATURE = 1.5


@pytest.fixture
def trainer(built_in_trainer):
    """The built-in model, which follows a reference solution: its teacher and student disagree where it matters."""
    return built_in_trainer(["pwopsd"], pwopsd={"teacher_template": REFERENCE_TEMPLATE},
                            trainer={"temperature": SAMPLING_TEMPERATURE})


def _rollout(tokenizer) -> Rollout:
    """A wrong first step, then a right completion: teacher and student disagree on the first, not the second."""
    return written_rollout(tokenizer, ["(4 * 2) + 3", "(3 + 5) - 2"],
                           ["4 * 2 = 9\n9 + 3 = 12\nThe answer is 12.", "3 + 5 = 8\n8 - 2 = 6\nThe answer is 6."])


def direct(trainer, rollout, clip, *, power=1.0, floor=0.0, forward=True, temperature=SAMPLING_TEMPERATURE):
    """The loss per token written out on the raw logits in float64: p the student's and q the teacher's
    softmax(logits / temperature); KL(q || p) (KL(p || q) with ``forward=False``), scaled per position by
    min(1, clip / max_v |p_v - q_v|), times w = floor + (1 - floor) ((t + 1) / T) ** power over its row's mean."""
    teacher_ids = trainer._tokenize_prompts(teacher_prompts(rollout.prompts, rollout.columns, REFERENCE_TEMPLATE))[0]
    values, scales = [], []
    for student_ids, teacher_context, completion in zip(rollout.prompt_ids, teacher_ids, rollout.completion_ids):
        p, q = (completion_logits(trainer.model, ids, completion).div(temperature).softmax(-1)
                for ids in (student_ids, list(teacher_context)))
        kl = (q * (q / p).log()).sum(-1) if forward else (p * (p / q).log()).sum(-1)
        scale = torch.ones_like(kl) if clip is None else (clip / (p - q).abs().amax(-1).clamp_min(clip))
        u = torch.arange(1, len(completion) + 1, dtype=torch.float64) / len(completion)
        w = floor + (1 - floor) * u**power
        values.append(w / w.mean() * scale * kl)
        scales.append(scale)
    return torch.cat(values), torch.cat(scales)


def _weighted(scorer, rollout, config, *, grad):
    student, teacher = student_and_teacher(scorer, rollout, config.teacher_template, teacher=config.teacher,
                                           temperature=config.temperature, grad=grad)
    return weighted_divergence([len(ids) for ids in rollout.completion_ids], student, teacher, config)


def _got(trainer, rollout, **settings):
    config = PwOpsdConfig(teacher_template=REFERENCE_TEMPLATE, **settings)
    return _weighted(trainer._shared_policy, rollout, config, grad=False).double()


def test_the_loss_is_the_clipped_forward_kl_times_a_weight_rising_along_the_completion(trainer):
    rollout = _rollout(trainer.processing_class)
    got = _got(trainer, rollout, clip=0.2)
    expected, scales = direct(trainer, rollout, clip=0.2)
    assert got.shape == (sum(len(c) for c in rollout.completion_ids),)
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-5)  # float32 KL sums: about 1e-6 absolute
    assert (scales < 1).any() and (scales == 1).any(), "clipped and unclipped positions are both tested"
    # What a wrong rule would give instead: another direction, no weight, a falling weight, no clip.
    assert not torch.allclose(direct(trainer, rollout, 0.2, forward=False)[0], expected, rtol=1e-2)
    assert not torch.allclose(direct(trainer, rollout, 0.2, power=0.0)[0], expected, rtol=1e-2)
    falling = torch.cat([row.flip(0) for row in expected.split([len(c) for c in rollout.completion_ids])])
    assert not torch.allclose(falling, expected, rtol=1e-2)
    assert not torch.allclose(direct(trainer, rollout, None)[0], expected, rtol=1e-2)


def test_the_logged_clip_figures_are_the_share_of_clipped_positions_their_factor_and_the_loss_ratio(trainer):
    """The clip is the project's choice, so the run says how much it does: written out from the same scales."""
    rollout = _rollout(trainer.processing_class)
    _, scales = direct(trainer, rollout, 0.2)
    unclipped = direct(trainer, rollout, None)[0]
    config = PwOpsdConfig(teacher_template=REFERENCE_TEMPLATE, clip=0.2)
    student, teacher = student_and_teacher(trainer._shared_policy, rollout, REFERENCE_TEMPLATE, teacher="policy",
                                           temperature=None, grad=False)
    lengths = [len(ids) for ids in rollout.completion_ids]
    logged = {}
    recorder = SimpleNamespace(log=lambda key, value: logged.__setitem__(key, value))
    PwOpsd(config).log_clip(recorder, lengths, student, teacher, weighted_divergence(lengths, student, teacher, config))
    active = scales < 1
    assert logged["clip_active"] == pytest.approx(active.double().mean().item(), abs=1e-6)
    assert logged["clip_scale"] == pytest.approx(scales[active].mean().item(), rel=1e-4)
    assert logged["clip_loss_ratio"] == pytest.approx(((unclipped * scales).sum() / unclipped.sum()).item(), rel=1e-4)
    assert 0 < logged["clip_loss_ratio"] < 1


def test_the_weight_shape_and_the_temperature_are_the_configured_ones(trainer):
    rollout = _rollout(trainer.processing_class)
    got = _got(trainer, rollout, clip=None, position_power=2.0, position_floor=0.3, temperature=1.0)
    expected = direct(trainer, rollout, None, power=2.0, floor=0.3, temperature=1.0)[0]
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-5)  # float32 KL sums: about 1e-6 absolute
    assert not torch.allclose(expected, direct(trainer, rollout, None, power=2.0, floor=0.3)[0], rtol=1e-2)


def test_the_gradient_reaches_the_student_more_at_later_tokens(trainer):
    """A single token's push on the student scales with its position's weight: the last token of a row weighs
    twice its middle one under the linear weight."""
    rollout = _rollout(trainer.processing_class).select([1])
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model)
    config = PwOpsdConfig(teacher_template=REFERENCE_TEMPLATE, clip=None)
    weighted = _weighted(policy, rollout, config, grad=True)
    uniform = _weighted(policy, rollout, PwOpsdConfig(teacher_template=REFERENCE_TEMPLATE, clip=None,
                                                      position_power=0.0), grad=True)
    assert weighted.requires_grad
    n = len(rollout.completion_ids[0])
    ratio = (weighted / uniform).detach()
    assert ratio[-1].item() == pytest.approx(2 * n / (n + 1), rel=1e-5)  # 1 over the mean of (t + 1) / n
    assert ratio[n // 2 - 1].item() == pytest.approx(n / (n + 1), rel=1e-5)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"teacher": "ema"}, "pwopsd.teacher: must be one of policy, reference"),
        ({"clip": 0.0}, "pwopsd.clip: must be positive"),
        ({"position_power": -1.0}, "pwopsd.position_power: must be at least 0"),
        ({"position_floor": 1.5}, "pwopsd.position_floor: must lie in"),
        ({"temperature": 0.0}, "pwopsd.temperature: must be positive"),
        ({"top_k": 0}, "pwopsd.top_k: must be at least 1"),
    ],
)
def test_bad_settings_name_their_key(settings, message):
    with pytest.raises(ConfigError, match=message):
        PwOpsd(PwOpsdConfig(**settings))
