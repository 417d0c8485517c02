"""DoND self-play against plain GRPO on the built-in negotiation: agreement and score in self-play, and return
against the scripted opponent, before and after the same number of steps.

Each seed trains ``configs/recipes/dond-cpu.yaml`` (``dond``: every step a round of filtered behaviour cloning on the
policy's own games, GRPO's update off) and the same recipe as plain GRPO (``grpo``: the ``env`` plugin alone, the
live policy in both seats, each seat rewarded by its own return at the recipe's ``trainer.learning_rate``), and
measures:

- self-play: the share of the training games that reached a deal (``agree``) and the mean seat return (``score``),
  at the first step (the untrained policy's games) and over the last three steps;
- against the scripted opponent (a uniformly random legal move; :func:`stackrl.blocks.env.imitation.play`, sampled
  at temperature 1 as in training, the same held-out episodes before and after): the policy's legal-move rate
  (``legal``) and its mean return (``return``).

    nice -n 10 .venv/bin/python plugins/dond/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)
from stackrl.blocks.env import EPISODE_COLUMN, INFO_COLUMN, RETURN_COLUMN
from stackrl.blocks.env.imitation import play
from stackrl.context import StepContext
from stackrl.run import build_trainer
from stackrl.testing.benchmark import arguments, compare, one_thread
from stackrl.testing.heldout import recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "dond-cpu.yaml"
HELD_OUT = 10**9 + 7  # the measured episodes' first seed (games_grpo.py's)


def selfplay(rollout) -> tuple[float, float]:
    """The share of a rollout's games that reached a deal and its seats' mean return."""
    columns = rollout.columns
    games: dict[tuple, bool] = {}
    for row in range(len(rollout)):
        key = (row // rollout.group_size, columns[EPISODE_COLUMN][row])
        deal = any(isinstance(info, dict) and info.get("deal") is not None for info in columns[INFO_COLUMN][row])
        games[key] = games.get(key, False) or deal
    returns = [float(r) for r in columns[RETURN_COLUMN]]
    return sum(games.values()) / len(games), sum(returns) / len(returns)


def config_of(method: str, seed: int, steps: int, folder: Path, overrides=()):
    """The recipe (``dond``) or the same run as plain GRPO in self-play (``grpo``)."""
    if method == "dond":
        return recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=folder, overrides=overrides)
    tree = yaml.safe_load(RECIPE.read_text())
    tree["plugins"] = [p for p in tree["plugins"] if p != "dond"]
    tree.pop("dond")
    plain = folder / "grpo.yaml"
    plain.parent.mkdir(parents=True, exist_ok=True)
    plain.write_text(yaml.safe_dump(tree))
    return recipe_config(plain, plugins=True, seed=seed, steps=steps, output_dir=folder / "run", overrides=overrides)


def run(method: str, seed: int, steps: int, overrides=(), episodes: int = 200) -> dict:
    """Train ``method`` for ``steps`` steps at ``seed``; its figures, with what the test reads: ``rollouts`` (each
    step's rollout, as the reward stage saw it) and ``phases`` (each fine-tuning phase's name, contexts and targets)."""
    rollouts, phases = [], []

    def watch(hook, plugin, kwargs, result):
        if hook == "reward" and plugin == "env":
            rollouts.append(kwargs["ctx"].rollout)

    real = StepContext.supervised_phase

    def recorded(self, name, contexts, completion_ids, **options):
        phases.append((name, [list(c) for c in contexts], [list(t) for t in completion_ids]))
        return real(self, name, contexts, completion_ids, **options)

    StepContext.supervised_phase = recorded
    try:
        with one_thread(), tempfile.TemporaryDirectory() as out:
            trainer = build_trainer(config_of(method, seed, steps, Path(out), overrides), monitor=watch)
            model, tokenizer = trainer.model, trainer.processing_class
            before = play(model, tokenizer, "negotiation", episodes, greedy=False, seed=HELD_OUT) if episodes else {}
            trainer.train()
            after = play(model, tokenizer, "negotiation", episodes, greedy=False, seed=HELD_OUT) if episodes else {}
    finally:
        StepContext.supervised_phase = real
    games = [selfplay(r) for r in rollouts]
    tail = games[-3:]
    figures = {"agree_first": games[0][0], "agree_last": sum(g[0] for g in tail) / len(tail),
               "score_first": games[0][1], "score_last": sum(g[1] for g in tail) / len(tail)}
    for name in ("legal", "return"):
        if episodes:
            figures |= {f"{name}_before": before[name], f"{name}_after": after[name]}
    phase_logs = [e for e in trainer.state.log_history if "phase/bc/loss_first" in e]
    return figures | {"rollouts": rollouts, "phases": phases, "phase_logs": phase_logs, "tokenizer": tokenizer,
                      "trainer": trainer}


def main() -> None:
    parser = arguments(__doc__.split("\n\n")[0], steps=20)
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args()
    overrides = ["trainer.disable_tqdm=true", *args.overrides]

    def measured(method: str, seed: int, folder: Path) -> dict:
        found = run(method, seed, args.steps, overrides, args.episodes)
        return {k: v for k, v in found.items() if isinstance(v, float)}

    compare(args, ("dond", "grpo"), measured)


if __name__ == "__main__":
    main()
