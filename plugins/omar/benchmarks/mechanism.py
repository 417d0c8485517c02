"""OMAR on the built-in public-goods game: the per-token advantages TRL's loss receives, checked against the
turn-then-token split computed by hand, and the seats' mean return against plain GRPO at equal steps.

``run`` trains ``configs/recipes/omar-cpu.yaml`` (``stackrl/arith-games`` in all three seats) and wraps the
trainer's loss: each micro-batch row's advantages are compared with this file's own computation from the rollout's
columns (each turn's return over the seat's turn rewards, centred and scaled among the group's rows of the same
seat at the same turn, then shared evenly over the turn's tokens; observations 0). The main trains the recipe and
the same recipe without omar (plain GRPO on the seat returns, the env plugin alone) at each seed and reports the
mean seat return the runner logged (``env/return``) over the first and the last three steps.

    nice python plugins/omar/benchmarks/mechanism.py --seeds 0 1 2 --steps 12
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml

from stackrl.run import build_trainer
from stackrl.testing.benchmark import LossAdvantages, arguments, compare, one_thread
from stackrl.testing.heldout import recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "omar-cpu.yaml"


def hand_advantages(rollout, gamma: float = 1.0) -> list[list[float]]:
    """Each row's per-token advantages, written out without the plugin's code: turn returns, the per-(seat, turn)
    baseline of the row's group, then each turn's share per token."""
    turn_rewards = rollout.columns["env_turn_rewards"]
    seats = rollout.columns["env_seat"]
    segments = rollout.columns["segments"]
    size = rollout.group_size
    returns = []
    for rewards in turn_rewards:
        row = [0.0] * len(rewards)
        for k in range(len(rewards)):
            row[k] = sum(gamma ** (j - k) * rewards[j] for j in range(k, len(rewards)))
        returns.append(row)
    turn_values = [[0.0] * len(r) for r in returns]
    for start in range(0, len(returns), size):
        rows = range(start, start + size)
        for i in rows:
            for k in range(len(returns[i])):
                peers = [returns[j][k] for j in rows if seats[j] == seats[i] and len(returns[j]) > k]
                if len(peers) < 2:
                    continue
                mean = sum(peers) / len(peers)
                std = (sum((p - mean) ** 2 for p in peers) / (len(peers) - 1)) ** 0.5
                turn_values[i][k] = (returns[i][k] - mean) / (std + 1e-4)
    out = []
    for i, ids in enumerate(rollout.completion_ids):
        tokens = [0.0] * len(ids)
        for k, segment in enumerate(segments[i]):
            for t in range(segment.start, segment.end):
                tokens[t] = turn_values[i][k] / (segment.end - segment.start)
        out.append(tokens)
    return out


def loss_monitor(trainer) -> LossAdvantages:
    """Every micro-batch row's advantages compared with :func:`hand_advantages` where the loss receives them; the
    counts add the rows whose turns got different advantages and the action tokens checked."""

    def want(rollout):
        if "env_turn_rewards" not in rollout.columns:
            return None
        hand = hand_advantages(rollout)
        monitor.counts["turn_spread_rows"] += sum(
            len({round(v, 6) for v, m in zip(row, mask) if m and v}) > 1 for row, mask in zip(hand, rollout.loss_mask)
        )
        monitor.counts["action_tokens"] += sum(map(sum, rollout.loss_mask))
        return hand

    monitor = LossAdvantages(trainer, want)
    return monitor


def without_omar(folder: Path) -> Path:
    """The recipe as plain GRPO in the same game: the env plugin alone, omar's section gone."""
    tree = yaml.safe_load(RECIPE.read_text())
    tree["plugins"] = [p for p in tree["plugins"] if p != "omar"]
    tree.pop("omar")
    plain = folder / "grpo.yaml"
    plain.write_text(yaml.safe_dump(tree))
    return plain


def run(seed: int = 0, steps: int = 1, overrides=(), folder=None, plugins: bool = True, check: bool = True) -> dict:
    """Train the CPU recipe (``plugins=False``: without omar) ``steps`` steps; the monitor's counts (with
    ``check``) and the logged mean seat returns."""
    with one_thread(), tempfile.TemporaryDirectory(dir=folder) as out:
        recipe = RECIPE if plugins else without_omar(Path(out))
        config = recipe_config(recipe, plugins=True, seed=seed, steps=steps, output_dir=out, overrides=overrides)
        trainer = build_trainer(config)
        monitor = loss_monitor(trainer) if check else None
        trainer.train()
    returns = [entry["env/return"] for entry in trainer.state.log_history if "env/return" in entry]
    head, tail = returns[:3], returns[-3:]
    result = {"return_first": sum(head) / len(head), "return_last": sum(tail) / len(tail)}
    if monitor:
        result |= dict(monitor.counts, notes=monitor.notes)
    return result


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], steps=12, methods=("omar", "grpo")).parse_args(argv)
    compare(args, args.methods,
            lambda method, seed, folder: run(seed, args.steps, args.overrides, folder, plugins=method == "omar",
                                             check=False),
            figures=("return_first", "return_last"))


if __name__ == "__main__":
    main()
