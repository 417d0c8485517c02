"""Gradient accumulation: k micro-batches of B/k rows make the update that one batch of B rows makes.

TRL divides its own loss by the accumulation steps; the host must divide every plugin loss term the same way, and
per-token advantages from ``reshape_advantages`` must stay with their rows when TRL shuffles the generation batch
and splits it into micro-batches. Both runs sample the same rollout (one generation batch of B rows, same seed).
Plain SGD at learning rate 1 without gradient clipping makes the parameter change the summed gradient itself:
Adam's first step would hide a term scaled k times too much wherever it does not flip a gradient's sign.
"""

import pytest
import torch

from stackrl.run import build_trainer

ROWS = 8  # two prompts of the tiny config's four generations
SPLIT = 4


def _one_step(make_config, plugins: list[str], per_device: int, accumulation: int):
    """The rollout of one optimizer step, and the change it made to every parameter (flattened)."""
    trainer_settings = {
        "per_device_train_batch_size": per_device,
        "gradient_accumulation_steps": accumulation,
        "optim": "sgd",
        "learning_rate": 1.0,
        "lr_scheduler_type": "constant",
        "max_grad_norm": 0.0,
        "max_steps": 1,
    }
    trainer = build_trainer(make_config(plugins, trainer=trainer_settings))
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    change = torch.cat([(p.detach() - b).flatten() for p, b in zip(trainer.model.parameters(), before)])
    return trainer._rollouts["train"], change


@pytest.mark.parametrize(
    "plugins",
    [["digit_reward", "logp_loss"], ["digit_reward", "token_decay"]],
    ids=["loss term", "per-token advantages"],
)
def test_accumulating_micro_batches_gives_the_update_of_one_whole_batch(make_config, plugins):
    whole_rollout, whole = _one_step(make_config, plugins, per_device=ROWS, accumulation=1)
    split_rollout, split = _one_step(make_config, plugins, per_device=ROWS // SPLIT, accumulation=SPLIT)
    assert split_rollout.completion_ids == whole_rollout.completion_ids, "both runs train on the same rollout"
    assert whole.abs().max() > 1e-3, "the step moves the parameters"
    assert torch.allclose(split, whole, rtol=1e-4, atol=1e-5 * whole.abs().max())
