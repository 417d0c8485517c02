"""Operations on the policy's state that hooks may ask for, without holding the model or the optimizer.

- :func:`scratch_update`: a few optimizer-free gradient steps on a fresh snapshot copy of the policy, on given
  (context, completion) pairs, for sampling from a perturbed policy while the live one stays as it is;
- :func:`supervised_phase`: at a step's end, restore the live weights from a snapshot, reset the optimizer and the
  learning-rate schedule, and fine-tune on a buffer of pairs before RL resumes.

Both need whole (unsharded) weights: they are refused under ZeRO-3 and FSDP, as snapshots are.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import torch

from stackrl.errors import StackrlError

if TYPE_CHECKING:
    from stackrl.policy import PolicyAccess
    from trl import GRPOTrainer

# likelihood: descend the token-mean negative log-likelihood (SFT). unlikelihood: descend the token-mean
# -log(1 - p) of each token (Welleck et al., 2019), which lowers the tokens' probability and pushes hardest on the
# tokens the policy is surest of, while staying bounded as p -> 0. ascent: descend the token-mean log-likelihood
# (gradient ascent on the NLL), the same push on every token, unbounded.
OBJECTIVES = ("likelihood", "unlikelihood", "ascent")
PHASE_PREFIX = "phase/"  # the metrics of supervised phases: phase/<name>/<figure>


def token_losses(logprobs: torch.Tensor, objective: str) -> torch.Tensor:
    """The objective's loss of each token from its log-probability."""
    if objective == "likelihood":
        return -logprobs
    if objective == "ascent":
        return logprobs
    if objective == "unlikelihood":
        # log(1 - p) = log(-expm1(log p)), accurate for p near 0 and near 1; capped so that p = 1 stays finite.
        return -torch.log(-torch.expm1(logprobs.clamp(max=-1e-6)))
    raise StackrlError(f"objective must be one of {', '.join(OBJECTIVES)}, not {objective!r}")


def _check_pairs(what: str, contexts: list, completion_ids: list) -> None:
    if len(contexts) != len(completion_ids):
        raise StackrlError(f"{what}: {len(contexts)} contexts but {len(completion_ids)} completions; give one each")
    if not any(completion_ids):
        raise StackrlError(f"{what}: no completion tokens to train on")


def scratch_update(
    access: PolicyAccess,
    name: str,
    contexts: list,
    completion_ids: list[list[int]],
    *,
    objective: str,
    learning_rate: float,
    steps: int = 1,
    temperature: float = 1.0,
    batch_size: int | None = None,
) -> list[float]:
    """Copy the live policy into snapshot ``name`` and move the copy by ``steps`` plain gradient steps,
    ``w <- w - learning_rate * grad``, on the token-mean ``objective`` over all pairs; returns each step's loss.

    The live weights and the optimizer are untouched. Every process must make the same call with the same pairs:
    each scores its share and the gradients are summed across processes, so every copy moves the same way.
    """
    what = f"scratch_update({name!r})"
    token_losses(torch.zeros(1), objective)  # an unknown objective fails here, before anything is copied
    if not learning_rate > 0 or steps < 1:
        raise StackrlError(f"{what}: learning_rate must be positive and steps at least 1 (got {learning_rate}, {steps})")
    _check_pairs(what, contexts, completion_ids)
    access.update_snapshot(name)
    snapshot = access.snapshot(name)
    trainer = access._trainer
    world, rank = trainer.accelerator.num_processes, trainer.accelerator.process_index
    items = list(zip(access._token_ids(contexts), completion_ids, [None] * len(contexts)))
    items = [item for item in items if item[1]][rank::world] if world > 1 else [item for item in items if item[1]]
    n_tokens = sum(len(ids) for ids in completion_ids)
    batch_size = batch_size or trainer.args.per_device_train_batch_size
    weights = list(snapshot.own.values())
    losses = []
    for p in weights:
        p.requires_grad_(True)
    try:
        for _ in range(steps):
            grads = [torch.zeros_like(p) for p in weights]
            total = torch.zeros((), device=trainer.accelerator.device)
            for start in range(0, len(items), batch_size):
                with torch.enable_grad():
                    rows = access._score_batch(snapshot.model, items[start : start + batch_size], None, False, temperature)
                    loss = sum(token_losses(lp, objective).sum() for lp, *_ in rows) / n_tokens
                    for g, part in zip(grads, torch.autograd.grad(loss, weights, allow_unused=True)):
                        if part is not None:
                            g.add_(part)
                total += loss.detach()
            if world > 1:
                for tensor in (*grads, total):
                    torch.distributed.all_reduce(tensor)
            with torch.no_grad():
                for p, g in zip(weights, grads):
                    p.sub_(learning_rate * g)
            losses.append(float(total))
    finally:
        for p in weights:
            p.requires_grad_(False)
    return losses


def supervised_phase(
    trainer: GRPOTrainer,
    access: PolicyAccess,
    name: str,
    contexts: list,
    completion_ids: list[list[int]],
    *,
    learning_rate: float,
    restore: str | None = None,
    epochs: int = 1,
    batch_size: int | None = None,
) -> dict[str, float]:
    """Restore the live weights from snapshot ``restore`` (if given), then fine-tune them on the pairs with the run's
    optimizer, its state reset, at the constant ``learning_rate``, ``epochs`` passes of batches of ``batch_size``
    pairs on each process (default ``per_device_train_batch_size``) in an order drawn from the run's seed and step;
    then reset the optimizer's state and the learning-rate schedule, so RL resumes as from a fresh start.

    The loss is the token-mean negative log-likelihood of the completions, one optimizer step per batch, gradients
    clipped to ``trainer.max_grad_norm``; without pairs the phase only restores and resets. Returns the phase's
    figures (first and last batch loss, optimizer steps, pairs).
    """
    what = f"supervised_phase({name!r})"
    _check_phase_run(trainer, what)
    if not learning_rate > 0 or epochs < 1:
        raise StackrlError(f"{what}: learning_rate must be positive and epochs at least 1 (got {learning_rate}, {epochs})")
    if len(contexts) != len(completion_ids):
        raise StackrlError(f"{what}: {len(contexts)} contexts but {len(completion_ids)} completions; give one each")
    live = trainer.accelerator.unwrap_model(trainer.model)
    if restore is not None:
        restore_weights(live, access.snapshot(restore).own)
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)  # accelerate wraps the torch optimizer
    optimizer.state.clear()
    scheduled = [group["lr"] for group in optimizer.param_groups]
    for group in optimizer.param_groups:
        group["lr"] = learning_rate
    pairs = [(c, k) for c, k in zip(access._token_ids(contexts), completion_ids) if k]
    losses = []
    world, rank = trainer.accelerator.num_processes, trainer.accelerator.process_index
    batch_size = batch_size or trainer.args.per_device_train_batch_size
    order = torch.Generator().manual_seed(trainer.args.seed + trainer.state.global_step)
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    for _ in range(epochs):
        shuffled = [pairs[i] for i in torch.randperm(len(pairs), generator=order).tolist()]
        per_step = batch_size * world
        for start in range(0, len(shuffled), per_step):
            batch = shuffled[start : start + per_step]
            # A short last batch is padded with repeats weighted 0: every process runs the same forwards, as DDP needs.
            padded = [(pair, 1.0) for pair in batch] + [(batch[-1], 0.0)] * (math.ceil(len(batch) / world) * world - len(batch))
            mine = padded[rank::world]
            n_tokens = sum(len(k) for _, k in batch)
            # Through the DDP wrapper, so that backward averages the gradients over the processes.
            rows = access._score_batch(trainer.model_wrapped, [(c, k, None) for (c, k), _ in mine], None, False, 1.0)
            # DDP averages the processes' gradients: each scales its sum by the world size over all the batch's tokens.
            loss = sum(w * -lp.sum() for (lp, *_), (_, w) in zip(rows, mine)) * world / n_tokens
            loss.backward()
            if trainer.args.max_grad_norm and trainer.args.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, trainer.args.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            total = loss.detach() / world
            if world > 1:
                torch.distributed.all_reduce(total)
            losses.append(float(total))
    optimizer.state.clear()
    for group, lr in zip(optimizer.param_groups, scheduled):
        group["lr"] = lr
    _restart_schedule(trainer.lr_scheduler)
    figures = {"optimizer_steps": float(len(losses)), "pairs": float(len(pairs))}
    if losses:  # no pairs: the phase only restores and resets
        figures.update(loss_first=losses[0], loss_last=losses[-1])
    return figures


@torch.no_grad()
def restore_weights(live: torch.nn.Module, saved: dict[str, torch.Tensor]) -> None:
    """Copy a snapshot's own weights (by parameter name) into the live model; the shared ones are the same already."""
    params = dict(live.named_parameters())
    for n, weight in saved.items():
        params[n].copy_(weight)


def _restart_schedule(scheduler) -> None:
    """Put the learning-rate schedule back at its first step (warm-up included), as a fresh run starts it."""
    if scheduler is None:
        return
    scheduler.last_epoch = -1
    with warnings.catch_warnings():  # torch warns of a schedule stepped before the optimizer: here that is the intent
        warnings.simplefilter("ignore")
        scheduler.step()


def _check_phase_run(trainer: GRPOTrainer, what: str) -> None:
    if trainer._dist.is_zero3 or trainer._dist.is_fsdp or trainer.is_deepspeed_enabled:
        raise StackrlError(f"{what}: the policy's weights and optimizer must be whole on each process (DDP); "
                           "DeepSpeed and FSDP hold them sharded")
    if trainer.args.fp16:
        raise StackrlError(f"{what}: fp16 training scales its loss outside this phase; use bf16 or fp32")
    generate_every = trainer.args.steps_per_generation * trainer.num_iterations
    if generate_every != trainer.args.gradient_accumulation_steps:
        raise StackrlError(
            f"{what}: this run reuses each rollout over several optimizer steps (trainer.steps_per_generation "
            f"{trainer.args.steps_per_generation}, num_iterations {trainer.num_iterations}), so steps after the "
            "phase would train on completions sampled before it; use one rollout per optimizer step"
        )
