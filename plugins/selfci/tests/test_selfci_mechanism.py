"""SELFCI's mechanism on the built-in model: from real forwards, the loss term the trainer receives is the weighted
sum of the two reverse KLs to the two initial-weight teachers, and its gradient that of the reverse KL to their
normalised geometric mean, both written out by hand; then a short run of the CPU recipe moves the policy toward that
product. The full figures (three seeds, against plain GRPO) come from benchmarks/mechanism.py."""

from pathlib import Path

import pytest
import torch

from stackrl import LossContext
from stackrl.blocks.teacher import teacher_prompts
from stackrl.config import load_config
from stackrl.policy import _SNAPSHOTS, PolicyAccess
from stackrl.run import build_trainer
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import written_rollout
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "selfci-cpu.yaml"
UTILITY_WEIGHT, PRIVACY_WEIGHT = 2.0, 1.0  # unequal, so that swapping the two contexts changes the target
SHORT = ["trainer.per_device_train_batch_size=16", "trainer.learning_rate=3.0e-4"]


def _ctx(trainer, rollout, training):
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model) if training else trainer._shared_policy
    return LossContext(step=0, tokenizer=trainer.processing_class, policy=policy,
                       _log=lambda *_: None, _plugin="selfci", training=training, rollout=rollout)


def _by_hand(trainer, config, rollout):
    """Per completion: the student's log-probs (with gradient) and the two teachers' (the plugin's snapshot shown
    each context), each ``(T, V)`` from one plain forward at the sampling temperature."""
    temperature = trainer.temperature
    snapshot = _SNAPSHOTS[trainer]["selfci"].model
    contexts = {key: trainer._tokenize_prompts(teacher_prompts(rollout.prompts, rollout.columns,
                                                               getattr(config, key)))[0]
                for key in ("utility_template", "privacy_template")}
    rows = []
    for i, (prompt, completion) in enumerate(zip(rollout.prompt_ids, rollout.completion_ids)):
        logits = trainer.model(torch.tensor([list(prompt) + list(completion)])).logits[0]
        student = (logits[len(prompt) - 1: len(prompt) + len(completion) - 1].double() / temperature).log_softmax(-1)
        teachers = []
        for key in ("utility_template", "privacy_template"):
            context = list(contexts[key][i])
            with torch.no_grad():
                z = snapshot(torch.tensor([context + list(completion)])).logits[0].double()
            teachers.append((z[len(context) - 1: len(context) + len(completion) - 1] / temperature).log_softmax(-1))
        rows.append((student, *teachers))
    return rows


def _kl(p_logps, q_logps):
    return (p_logps.exp() * (p_logps - q_logps)).sum(-1)


def _gradient(trainer, loss):
    trainer.model.zero_grad()
    loss.backward()
    grads = torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
    trainer.model.zero_grad()
    return grads


def test_the_loss_receives_the_normalised_geometric_mean_of_the_two_teachers():
    with one_thread():
        config = load_config([RECIPE], [f"selfci.utility_weight={UTILITY_WEIGHT}",
                                        f"selfci.privacy_weight={PRIVACY_WEIGHT}", "output_dir=/nonexistent"])
        trainer = build_trainer(config)
        plugin = trainer.plugins.plugins["selfci"]
        plugin.train_begin(_ctx(trainer, None, False))  # the frozen teacher: the weights training begins with
        torch.manual_seed(1)
        with torch.no_grad():  # the student moves away from its teachers, as after some steps
            for p in trainer.model.parameters():
                p.add_(0.05 * torch.randn_like(p))
        rollout = written_rollout(trainer.processing_class, ["(4 * 2) + 3", "(3 + 5) - 2"],
                                  ["4 * 2 = 9\n9 + 3 = 12\nThe answer is 12.", "3 + 5 = 8\n8 - 2 = 6\nThe answer is 6."])

        got = plugin.loss_term(_ctx(trainer, rollout, True))
        got_grad = _gradient(trainer, got)

        rows = _by_hand(trainer, plugin.config, rollout)
        share = UTILITY_WEIGHT / (UTILITY_WEIGHT + PRIVACY_WEIGHT)

        def target(utility, privacy):  # the normalised p_u^s p_p^(1 - s), in probability space
            product = utility.exp() ** share * privacy.exp() ** (1 - share)
            return (product / product.sum(-1, keepdim=True)).log()

        def token_mean(values):
            return torch.cat(values).mean()

        # The value: the weighted sum of the two reverse KLs, over the sum of the weights (3).
        weighted = token_mean([(UTILITY_WEIGHT * _kl(s, u) + PRIVACY_WEIGHT * _kl(s, p)) / 3 for s, u, p in rows])
        assert got.item() == pytest.approx(weighted.item(), rel=1e-4)
        # The gradient: that of the reverse KL to the product of experts (log Z does not depend on the student).
        toward_product = token_mean([_kl(s, target(u, p)) for s, u, p in rows])
        assert torch.allclose(got_grad, _gradient(trainer, toward_product.float()), rtol=1e-3, atol=1e-6)

        # What a broken rule would give: one teacher dropped, the arithmetic mean, the two contexts swapped.
        mutants = {
            "utility teacher only": lambda s, u, p: _kl(s, u),
            "privacy teacher only": lambda s, u, p: _kl(s, p),
            "arithmetic mean": lambda s, u, p: _kl(s, (share * u.exp() + (1 - share) * p.exp()).log()),
            "contexts swapped": lambda s, u, p: _kl(s, target(p, u)),
        }
        for name, rule in mutants.items():
            value = token_mean([rule(*row) for row in _by_hand(trainer, plugin.config, rollout)])
            grad = _gradient(trainer, value.float())
            assert not torch.allclose(got_grad, grad, rtol=5e-2, atol=1e-4), name


def test_a_short_run_moves_the_policy_toward_the_product_of_its_teachers():
    mechanism = load_script(BENCHMARK)
    figures = mechanism.run("selfci", seed=0, steps=6, heldout=16, overrides=SHORT)
    # Measured: 0.715 -> 0.630 (the KL to the utility teacher alone rises meanwhile, 1.19 -> 1.34: the product
    # lies between the teachers). A loss pushed the wrong way would raise it; the hand check above is the exact one.
    assert figures["kl_poe"] < 0.95 * figures["kl_poe_before"], figures
