"""MARS against plain GRPO at tic-tac-toe on stackrl/arith-games: the win rate against a random opponent after
training, at equal steps.

Each run trains through the repository's games benchmark (benchmarks/games_grpo.py, `run`), which measures the
policy before and after on the same held-out episodes against a random legal opponent (sampled at temperature 1).
Methods: `mars` (configs/recipes/mars-cpu.yaml's setting: self-play, both seats the policy, MARS's advantages),
`grpo-selfplay` (the same self-play with GRPO's advantages: what MARS's estimator changes), `mars-scripted` (MARS
in the baseline recipe's setting, against the random opponent, seats rotating) and `grpo` (that baseline, whose
recorded figures at 40 steps, 100 held-out episodes are win 0.120 -> 0.500 / 0.490 / 0.410 for seeds 0, 1, 2;
core/stackrl/assets/arith-games/README.md).

    nice -n 10 python plugins/mars/benchmarks/mechanism.py --seeds 0 1 2 --steps 40 --methods mars grpo-selfplay

`traced_step` is what the mechanism test runs: one step of the CPU recipe, with the per-token advantages TRL's loss
received and the rollout they came from.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)
from stackrl.run import build_trainer
from stackrl.testing.benchmark import arguments, one_thread
from stackrl.testing.heldout import recipe_config
from stackrl.testing.repository import load_script

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "configs" / "recipes" / "mars-cpu.yaml"
GAMES = ROOT / "benchmarks" / "games_grpo.py"
SELF_PLAY = ("env.seats=[policy,policy]", "env.rotate_seats=false")
METHODS = {
    "mars": ("plugins=[env,mars]", *SELF_PLAY),
    "grpo-selfplay": ("plugins=[env]", *SELF_PLAY),
    "mars-scripted": ("plugins=[env,mars]",),
    "grpo": (),
}


def run(seed: int, steps: int, method: str = "mars", overrides=(), episodes: int = 200) -> dict[str, float]:
    """One seed's figures (games_grpo's: legal, win, draw and loss rates before and after, and the logged mean seat
    return of the first and last three steps) for ``method`` (:data:`METHODS`), ``overrides`` after it."""
    uses_mars = "mars" in "".join(METHODS[method][:1])
    kept = [o for o in overrides if uses_mars or not o.startswith("mars.")]
    return load_script(GAMES).run(seed, steps, [*METHODS[method], *kept], episodes)


def traced_step(seed: int = 0, overrides=()) -> tuple[object, list[dict]]:
    """``(rollout, inputs)``: one step of the CPU recipe, its rollout (with the env columns and segments) and each
    batch TRL's loss received (``completion_ids``, ``advantages`` per token, ...)."""
    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=1, output_dir=out, overrides=overrides)
        trainer = build_trainer(config)
        seen, compute = [], trainer._compute_loss

        def recording(model, inputs):
            seen.append({k: v.detach().clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)})
            return compute(model, inputs)

        trainer._compute_loss = recording
        trainer.train()
    return trainer._rollouts["train"], seen


def main(argv=None) -> dict[str, dict[str, float]]:
    parser = arguments(__doc__.split("\n")[0], steps=40, methods=tuple(METHODS))
    parser.set_defaults(methods=["mars", "grpo-selfplay"])
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args(argv)
    rows: dict[str, list[dict]] = {method: [] for method in args.methods}
    for seed in args.seeds:  # methods alternate within a seed, so a cut-short run leaves paired figures
        for method in args.methods:
            rows[method].append(run(seed, args.steps, method, args.overrides, args.episodes))
            print(f"{method} seed {seed}: " + "  ".join(f"{k} {v:.3f}" for k, v in rows[method][-1].items()), flush=True)
    means = {m: {k: sum(r[k] for r in runs) / len(runs) for k in runs[0]} for m, runs in rows.items()}
    for method, figures in means.items():
        print(f"{method} mean: " + "  ".join(f"{k} {v:.3f}" for k, v in figures.items()), flush=True)
    return means


if __name__ == "__main__":
    main()
