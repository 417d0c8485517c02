"""SDAR's mechanism on the built-in task: the gated term raises the sampled tokens the teacher endorses, not those
it rejects.

Held-out problems, four completions each sampled by the built-in model; the teacher is the model shown the worked
solution before the question (configs/recipes/sdargate-cpu.yaml). A few plain gradient steps on SDAR's term alone
(no GRPO), gated as the recipe sets it, and with the gate shut off (``sharpness=0``: every token at 1/2, the ungated
OPSD-style term): the mean rise of the student's log-prob on the sampled tokens the teacher endorses (gap above
``+margin``) and on those it rejects (gap below ``-margin``). Then held-out greedy accuracy after a short run of the
recipe, against plain GRPO with the same settings and steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/sdargate/benchmarks/mechanism.py --seeds 0 1 2 --steps 10
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from stackrl.blocks.tokensignals import SignalContext, TokenSignals
from stackrl.config import load_config
from stackrl.policy import PolicyAccess
from stackrl.run import build_trainer
from stackrl.testing.benchmark import diagnosed
from stackrl.testing.heldout import advantage_context, heldout_rollout
from stackrl_sdargate import gated_distillation

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "sdargate-cpu.yaml"


def rises(trainer, rollout, sharpness: float, *, steps: int, learning_rate: float, margin: float) -> dict:
    """Train a copy of the weights ``steps`` plain SGD steps on the gated term of ``rollout``; the mean rise of the
    student's log-prob on endorsed and on rejected tokens (gap beyond ``±margin`` before training)."""
    plugin = trainer.plugins.plugins["sdargate"]
    ctx = advantage_context(trainer, rollout, "sdargate")
    signals = TokenSignals.of(ctx)
    teacher = SignalContext("teacher", plugin.config.teacher_template)
    teacher_logps, covered = signals.logprobs(teacher), signals.covered(teacher)
    before = signals.logprobs(SignalContext("student"))
    gap = (teacher_logps - before) * covered
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model)  # one that may keep a gradient
    state = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    optimizer = torch.optim.SGD(trainer.model.parameters(), lr=learning_rate)
    for _ in range(steps):
        student = policy.score(rollout.prompt_ids, rollout.completion_ids, grad=True).logprobs
        loss, _ = gated_distillation(student, teacher_logps, covered, sharpness)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        after = policy.score(rollout.prompt_ids, rollout.completion_ids).logprobs
    trainer.model.load_state_dict(state)
    rise = (after - before) * covered
    endorsed, rejected = (gap > margin) & covered.bool(), (gap < -margin) & covered.bool()
    return {"endorsed": rise[endorsed].mean().item(), "rejected": rise[rejected].mean().item(),
            "endorsed_tokens": int(endorsed.sum()), "rejected_tokens": int(rejected.sum())}


def endorsement(problems: int, seed: int, *, steps: int = 4, learning_rate: float = 0.05, margin: float = 0.5) -> dict:
    """The rises under the recipe's gate and with none (sharpness 0), on ``problems`` held-out problems."""
    trainer = build_trainer(load_config([RECIPE], [f"trainer.seed={seed}"]))
    rollout = heldout_rollout(trainer, problems, seed=1000 + seed)
    sharpness = trainer.plugins.plugins["sdargate"].config.sharpness
    gated = rises(trainer, rollout, sharpness, steps=steps, learning_rate=learning_rate, margin=margin)
    flat = rises(trainer, rollout, 0.0, steps=steps, learning_rate=learning_rate, margin=margin)
    return {"gated_endorsed": gated["endorsed"], "gated_rejected": gated["rejected"],
            "ungated_endorsed": flat["endorsed"], "ungated_rejected": flat["rejected"],
            "endorsed_tokens": gated["endorsed_tokens"], "rejected_tokens": gated["rejected_tokens"]}


def main():
    diagnosed(__doc__.splitlines()[0], RECIPE, endorsement,
              ("gated_endorsed", "gated_rejected", "ungated_endorsed", "ungated_rejected", "endorsed_tokens",
               "rejected_tokens"))


if __name__ == "__main__":
    main()
