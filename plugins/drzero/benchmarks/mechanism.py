"""Dr. Zero's HRPO on the built-in task: the advantages of a real training step against a hand computation per
cluster, then held-out accuracy against plain GRPO with 2 and with 8 completions a question at equal questions.

The check (``advantage_check``): train the CPU recipe (two completions a question, questions clustered by their
category) one step and recompute, in plain Python from the step's rewards and categories, each row's
(r - mean) / (stdev + 1e-6) over every row of its category (a lone row: r / (1 + 1e-6)). ``error`` is the largest
gap to the advantages the trainer used. The same step's rewards under the rules HRPO replaces give ``vs_prompt``
(the formula over each prompt's own two completions, GRPO's group), ``vs_steps`` (clusters by step count alone,
merging 1- and 2-digit categories) and ``vs_unscaled`` (the centred reward without the spread): each must be far
from the advantages used, or the check could not tell the rules apart on this step.

The accuracy runs (``main``): ``drzero`` (the recipe), ``grpo2`` (the same recipe without the plugin) and ``grpo8``
(plain GRPO with 8 completions of the same 16 questions a step, four times the samples), each ``--steps`` steps at
each seed, greedy exact-match accuracy on ``--eval-size`` held-out problems after.

    nice -n 10 .venv/bin/python plugins/drzero/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

import statistics
from pathlib import Path

import yaml

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)
from stackrl.testing.benchmark import arguments, compare, one_thread, training_rollouts
from stackrl.testing.heldout import train_and_measure, without_plugins

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "drzero-cpu.yaml"
METHODS = ("drzero", "grpo2", "grpo8")
EPSILON = 1e-6


def by_hand(rewards: list[float], keys: list, *, scaled: bool = True) -> list[float]:
    """Each reward standardised over the rows of equal key, written out without the plugin's code."""
    out = []
    for r, k in zip(rewards, keys):
        cluster = [x for x, j in zip(rewards, keys) if j == k]
        if len(cluster) == 1:
            out.append(r / (1 + EPSILON) if scaled else r)
        else:
            mean = sum(cluster) / len(cluster)
            out.append((r - mean) / (statistics.stdev(cluster) + EPSILON) if scaled else r - mean)
    return out


def step_figures(rollout) -> dict:
    """The gaps between the advantages the trainer used on ``rollout`` and each rule computed by hand."""
    rewards = [float(x) for x in rollout.rewards["exact_match"]]
    used = [float(x) for x in rollout.advantages.reshape(len(rollout), -1)[:, 0]]
    categories = rollout.columns["category"]
    gap = lambda other: max(abs(a - b) for a, b in zip(used, other))  # noqa: E731
    return {
        "error": gap(by_hand(rewards, categories)),
        "vs_prompt": gap(by_hand(rewards, [i // rollout.group_size for i in range(len(rollout))])),
        "vs_steps": gap(by_hand(rewards, [c.split(" ")[0] for c in categories])),
        "vs_unscaled": gap(by_hand(rewards, categories, scaled=False)),
        "clusters": len(set(categories)),
        "rows": len(rollout),
    }


def advantage_check(seed: int = 0, steps: int = 1, overrides=()) -> list[dict]:
    """``step_figures`` of each of ``steps`` training steps of the CPU recipe at ``seed``."""
    seen, _ = training_rollouts(yaml.safe_load(RECIPE.read_text()), step_figures, seed=seed, steps=steps,
                                overrides=overrides)
    return seen


def run(method: str, seed: int, steps: int, overrides=(), eval_size: int = 128) -> dict:
    """Held-out greedy accuracy after ``steps`` steps of ``method`` (one of METHODS) at ``seed``."""
    with one_thread():
        if method == "drzero":
            return {"accuracy": train_and_measure([RECIPE], overrides, steps=steps, heldout=eval_size, seed=seed)}
        wider = ["trainer.num_generations=8", "trainer.per_device_train_batch_size=128"] if method == "grpo8" else []
        with without_plugins(RECIPE) as plain:
            return {"accuracy": train_and_measure([plain], [*wider, *overrides], steps=steps, heldout=eval_size,
                                                  seed=seed)}


def main(argv=None):
    args = arguments(__doc__.split("\n")[0], steps=30, eval_size=128, methods=METHODS).parse_args(argv)
    print(f"one step's advantages against the hand computation: {advantage_check(args.seeds[0])}", flush=True)
    return compare(args, args.methods,
                   lambda method, seed, folder: run(method, seed, args.steps, args.overrides, args.eval_size),
                   figures=("accuracy",))


if __name__ == "__main__":
    main()
