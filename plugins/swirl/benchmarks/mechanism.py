"""SWIRL's mechanism on the built-in task: alternating forward and inverse phases, each rewarded by the other
direction frozen at the phase's start.

A short run of configs/recipes/swirl-cpu.yaml on `stackrl/arith-roles`. A monitor records, at each of swirl's reward
calls, the rollout's prompts, completions and columns and the rewards it returned, and copies the live policy there
(the copy at a phase's first step is the frozen opposite model of that phase), so that every reward can be worked
out again by hand. With `--methods grpo`, plain GRPO (the outcome reward on the same pool) at equal steps; the
figures are greedy exact match of the forward (next state) and inverse (action) prompts on every transition of
the pool's problems, before and after.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/swirl/benchmarks/mechanism.py --seeds 0 1 2 --steps 16
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl.rewards import ROLE_COLUMN
from stackrl.policy import Snapshot
from stackrl.run import build_trainer
from stackrl.tasks.transitions import action_between, forward_prompt, inverse_prompt, next_state, transitions
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "swirl-cpu.yaml"


class Rewards:
    """A run's monitor: each swirl reward call's step, rows and rewards, and a copy of the live policy then."""

    def __init__(self):
        self.trainer = None
        self.steps: list[dict] = []

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "reward" or plugin != "swirl":
            return
        ctx = kwargs["ctx"]
        rollout = ctx.rollout
        self.steps.append({
            "step": ctx.step, "completions": list(rollout.completions),
            "roles": list(rollout.columns[ROLE_COLUMN]), "states": list(rollout.columns["swirl_state"]),
            "targets": list(rollout.columns["swirl_target"]), "rewards": [float(r) for r in result],
            "policy": Snapshot(self.trainer.model).model,  # a copy that never calls the live forward
        })


def transition_accuracy(trainer, prompts: list[str], solutions: list[str]) -> dict[str, float]:
    """Greedy exact match of the forward and the inverse prompt on every transition of the problems."""
    triples = [t for prompt, solution in zip(prompts, solutions) for t in transitions(prompt, solution)]
    policy = trainer._shared_policy
    forward = policy.generate([forward_prompt(x, z) for x, z, _ in triples], do_sample=False)
    inverse = policy.generate([inverse_prompt(x, y) for x, _, y in triples], do_sample=False)
    return {"forward": sum(g.text.strip() == y for g, (_, _, y) in zip(forward, triples)) / len(triples),
            "inverse": sum(g.text.strip() == z for g, (_, z, _) in zip(inverse, triples)) / len(triples)}


def run(seed: int, steps: int, method: str = "swirl", overrides=(), measure: bool = True):
    """``(before, after, rewards, trainer)``: the transition accuracies before and after ``steps`` steps (empty
    dicts without ``measure``), the monitor, and the trainer. ``method`` "grpo": the recipe without its plugin,
    the outcome reward weighted 1. Torch runs on one thread (restored after)."""
    if method != "swirl":
        overrides = [*(o for o in overrides if not o.startswith("swirl.")), "rewards.exact_match=1.0"]
    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=method == "swirl", seed=seed, steps=steps, output_dir=out,
                               overrides=overrides)
        monitor = Rewards()
        trainer = build_trainer(config, monitor=monitor)
        monitor.trainer = trainer
        rows = trainer.train_dataset
        prompts, solutions = list(rows["prompt"]), list(rows["solution"])
        before = transition_accuracy(trainer, prompts, solutions) if measure else {}
        trainer.train()
        after = transition_accuracy(trainer, prompts, solutions) if measure else {}
    return before, after, monitor, trainer


def by_hand(trainer, model, roles, states, completions, targets, floor: float = -10.0) -> torch.Tensor:
    """Each row's reward worked out from ``model``'s raw logits (float64): the mean log-probability of the target
    and eos after the opposite direction's prompt holding the row's generation, floored."""
    from stackrl.testing.heldout import completion_logits

    values = []
    for role, state, generated, target in zip(roles, states, completions, targets):
        text = (inverse_prompt(state, generated.strip()) if role == "forward"
                else forward_prompt(state, generated.strip()))
        context = trainer._tokenize_prompts([text])[0][0]
        continuation = trainer.processing_class(target, add_special_tokens=False)["input_ids"]
        continuation = continuation + [trainer.processing_class.eos_token_id]
        logits = completion_logits(model, list(context), continuation).log_softmax(-1)
        values.append(max(logits[range(len(continuation)), continuation].mean().item(), floor))
    return torch.tensor(values, dtype=torch.float64)


def right(role: str, state: str, generated: str, target: str) -> bool:
    """Whether a row's generation is what the world's rules write (per next_state / action_between)."""
    generated = generated.strip()
    return (next_state(state, target) == generated if role == "forward"
            else action_between(state, target) == generated)


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=16, methods=("swirl", "grpo")).parse_args()

    def measured(method, seed, folder):
        before, after, _, _ = run(seed, args.steps, method, args.overrides)
        return {"forward_before": before["forward"], "forward": after["forward"],
                "inverse_before": before["inverse"], "inverse": after["inverse"]}

    compare(args, args.methods, measured, figures=("forward_before", "forward", "inverse_before", "inverse"),
            number_format=".3f")


if __name__ == "__main__":
    main()
