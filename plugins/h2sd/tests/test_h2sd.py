"""H²SD: hindsight magnitudes on correct rollouts, reverse KL to a hinted teacher on failed ones."""

import math
from pathlib import Path

import pytest
import torch

from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import advantage_context, completion_logits, written_rollout
from stackrl.testing.fixtures import make_plugin, train_steps
from stackrl.testing.repository import load_script
from stackrl_h2sd import success_advantages

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
SAMPLING_TEMPERATURE = 1.4


class TestConformance(PluginConformance):
    plugin_name = "h2sd"
    refused_settings = [({"kl_clip": 0.0}, "must be positive"),
                        ({"teacher": "ema"}, "must be one of policy, reference, not 'ema'")]


# -- the success branch, on hand-built log-probs (the built-in model copies a shown response: its teacher is flat)


MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]])
GAP = torch.tensor([[0.5, -3.0, 0.0, 9.0], [-0.2, 0.2, 1.0, -1.0], [2.0, -0.5, 7.0, 7.0]])


def test_correct_rows_are_weighted_by_the_hindsight_teacher_and_failed_rows_keep_grpo():
    advantages = torch.tensor([1.0, -0.5, 2.0])
    correct = torch.tensor([True, False, True])
    got = success_advantages(advantages, GAP, correct, MASK, clip=2.0, normalize=False)
    expected_rows = [torch.tensor([0.5, -2.0, 0.0]).exp(), None, torch.tensor([2.0, -0.5]).exp() * 2.0]
    assert torch.allclose(got[0, :3], expected_rows[0]) and got[0, 3] == 0
    assert torch.allclose(got[1], torch.full((4,), -0.5)), "a failed row keeps GRPO's advantage on every token"
    assert torch.allclose(got[2, :2], expected_rows[2])
    normalised = success_advantages(advantages, GAP, correct, MASK, clip=2.0, normalize=True)
    assert torch.allclose(normalised[0, :3], expected_rows[0] * 3 / expected_rows[0].sum())
    assert torch.allclose(normalised.sum(1), advantages * MASK.sum(1))


def test_the_success_branch_follows_the_advantages_sign():
    """A correct row with a negative advantage (another reward component can give one) is weighted by exp(-gap)."""
    got = success_advantages(torch.tensor([-1.0]), GAP[:1], torch.tensor([True]), MASK[:1], clip=2.0, normalize=False)
    assert torch.allclose(got[0, :3], -torch.tensor([-0.5, 2.0, 0.0]).exp())


# -- the failure branch, on the built-in model


def _rollout(tokenizer):
    completions = ["4 * 2 = 9\n9 + 3 = 12\nThe answer is 12.", "4 * 2 = 8\n8 + 3 = 12\nThe answer is 12."]
    return written_rollout(tokenizer, ["(4 * 2) + 3"] * 2, completions)


def _completion_logps(model, context, completion, temperature):
    with torch.no_grad():
        logits = model(torch.tensor([context + completion])).logits[0].double()
    return (logits[len(context) - 1 : len(context) + len(completion) - 1] / temperature).log_softmax(-1)


def test_the_failure_loss_is_the_reverse_kl_to_the_hinted_teacher(built_in_trainer):
    trainer = built_in_trainer(["h2sd"], trainer={"temperature": SAMPLING_TEMPERATURE})
    rollout = _rollout(trainer.processing_class)
    got = make_plugin("h2sd").failure_divergence(trainer._shared_policy, rollout, grad=False)
    encode = lambda text: trainer.processing_class(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    reverse, forward, pushes = [], [], []
    for prompt, solution, completion in zip(rollout.prompts, rollout.columns["solution"], rollout.completion_ids):
        p = _completion_logps(trainer.model, encode(prompt), completion, SAMPLING_TEMPERATURE)
        q = _completion_logps(trainer.model, encode(f"{solution}\n\n{prompt}"), completion, SAMPLING_TEMPERATURE)
        reverse.append((p.exp() * (p - q)).sum(-1))
        forward.append((q.exp() * (q - p)).sum(-1))
        # the reverse KL's gradient on each logit: p_v (log p_v - log q_v - KL); its largest size per position
        pushes.append((p.exp() * (p - q - reverse[-1].unsqueeze(-1))).abs().amax(-1))
    expected = torch.cat(reverse)
    assert torch.allclose(got.double(), expected, rtol=1e-4, atol=1e-6)
    assert not torch.allclose(torch.cat(forward), expected, rtol=1e-2), "forward KL would differ"
    # kl_clip scales each position whose largest push exceeds it down to it: at the median push, half the positions
    push = torch.cat(pushes)
    clip = push.median().item()
    clipped = make_plugin("h2sd", kl_clip=clip).failure_divergence(trainer._shared_policy, rollout, grad=False)
    assert torch.allclose(clipped.double(), expected * clip / push.clamp_min(clip), rtol=1e-4, atol=1e-6)


def test_only_failed_rollouts_are_distilled(make_config, distilled_completions):
    config = make_config(
        ["h2sd"], model={"name_or_path": "stackrl/arith-tiny"},
        trainer={"max_completion_length": 48, "num_generations": 4, "per_device_train_batch_size": 8},
    )
    correct = distilled_completions.correct(train_steps(config, steps=2))
    assert correct, "the built-in model gets some rollouts wrong, so H2SD distils some"
    assert not any(correct)


def test_the_success_branch_scores_the_teacher_shown_the_rollout_itself(built_in_trainer):
    """On the built-in model, a correct rollout written unlike the dataset's solution: its weights are exp of the
    gap between the teacher shown that rollout (success_template) and the student, not the teacher shown the hint
    (the worked solution), which expects the solution's order of operands."""
    trainer = built_in_trainer(["h2sd"], trainer={"temperature": SAMPLING_TEMPERATURE})
    rollout = written_rollout(trainer.processing_class, ["(4 * 2) + 3"] * 2,
                              ["2 * 4 = 8\n3 + 8 = 11\nThe answer is 11.", "4 * 2 = 9\n9 + 3 = 12\nThe answer is 12."])
    plugin = make_plugin("h2sd", clip=50.0, normalize=False)  # raw exp(gap): the gap is read back whole
    got = plugin.reshape_advantages(torch.tensor([1.0, -1.0]), advantage_context(trainer, rollout, "h2sd"))
    encode = lambda text: trainer.processing_class(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    prompt, completion, solution = rollout.prompts[0], rollout.completion_ids[0], rollout.columns["solution"][0]

    def logps(context):
        logits = completion_logits(trainer.model, encode(context), completion) / SAMPLING_TEMPERATURE
        return logits.log_softmax(-1).gather(-1, torch.tensor(completion).unsqueeze(-1)).squeeze(-1)

    student = logps(prompt)
    shown = logps(f"{rollout.completions[0]}\n\n{prompt}") - student
    hint = logps(f"{solution}\n\n{prompt}") - student
    assert torch.allclose(got[0, : len(completion)].double().log(), shown, atol=1e-3)
    assert (hint - shown).abs().max() > 1.0, "the hint would give other weights"
    assert (got[1, : len(rollout.completion_ids[1])] == -1).all(), "the failed row keeps GRPO's advantage"


@pytest.mark.mechanism
def test_failed_rollouts_come_closer_to_the_hinted_teacher_and_accuracy_holds():
    """The mechanism on the built-in model, short (the full figures come from benchmarks/mechanism.py); the
    success branch's teacher copies the shown response (mean log-prob near 0), as the README says."""
    mechanism = load_script(BENCHMARK)
    heldout = 64
    found = mechanism.run(seed=0, steps=8, problems=16, heldout=heldout)
    assert found["after"] < found["before"], found
    assert found["hindsight_logprob"] > -0.1, found
    p = found["grpo"]
    assert found["accuracy"] >= p - math.sqrt(p * (1 - p) / heldout), found
