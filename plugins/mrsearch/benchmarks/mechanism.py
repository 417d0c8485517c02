"""MR-Search on the built-in lookup task: the per-token advantages TRL's loss receives, checked against the
attempt-level credit computed by hand, the reflections checked in the next attempt's context, and accuracy against
plain GRPO at equal steps.

``run`` trains ``configs/recipes/mrsearch-cpu.yaml`` (``stackrl/arith-tools``, two attempts at each question with
the search tool, a rule reflection between them) and wraps the trainer's loss: each micro-batch row's advantages
are compared with this file's own computation from the rollout's columns (each attempt's exact match, less the mean
of the same attempt in the group's other rows that reached it, plus the later attempt's; every token of the
attempt's actions; observations 0), and every row that reached a second attempt is checked to hold, between its
first answer and its second attempt, the reflection written from the first attempt's searches (replayed from
``env_moves``). The main trains the recipe and plain GRPO on the search tool (``configs/recipes/env-search-cpu.yaml``,
one attempt) at each seed and reports the training accuracy over the last three steps: GRPO's single answer, and
mrsearch's first and last attempt.

    nice python plugins/mrsearch/benchmarks/mechanism.py --seeds 0 1 2 --steps 12
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from pathlib import Path

from stackrl.blocks.env.search import Search
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.testing.benchmark import LossAdvantages, arguments, compare, one_thread
from stackrl.testing.heldout import recipe_config

RECIPES = Path(__file__).resolve().parents[3] / "configs" / "recipes"
RECIPE, PLAIN = RECIPES / "mrsearch-cpu.yaml", RECIPES / "env-search-cpu.yaml"


TOOL_CALL = re.compile(r"<(\w+)>(.*?)</\1>", re.DOTALL)  # the tag grammar: any closed tag is a call
ATTEMPT_TURNS = 2  # the recipe's env.kwargs.attempt_turns


def attempts_of(rollout, row: int) -> list[tuple[list[str], list[str]]]:
    """A row's attempts replayed from ``env_moves``: each as (its actions, its calls' queries). A turn without a
    call answers and closes the attempt; a call past ``ATTEMPT_TURNS`` closes it unanswered."""
    attempts, moves, queries = [], [], []
    for _, move in rollout.columns["env_moves"][row]:
        moves.append(move)
        call = TOOL_CALL.search(move)
        if call and len(queries) < ATTEMPT_TURNS:
            queries.append(call.group(2).strip())
            continue
        attempts.append((moves, queries))
        moves, queries = [], []
    return attempts + ([(moves, queries)] if moves else [])


def hand_advantages(rollout) -> tuple[list[list[float]], list[list[float]]]:
    """Each row's per-token advantages and attempt rewards, written out without the plugin's code."""
    size, answers = rollout.group_size, rollout.columns["answer"]
    rewards = []
    for row in range(len(rollout.completion_ids)):
        per = []
        for moves, _ in attempts_of(rollout, row):
            last = moves[-1]
            per.append(0.0 if TOOL_CALL.search(last) else exact_match(last, answers[row]))
        rewards.append(per)
    credit = []
    for row, per in enumerate(rewards):
        group = range(row - row % size, row - row % size + size)
        steps = []
        for a, r in enumerate(per):
            others = [rewards[j][a] for j in group if j != row and len(rewards[j]) > a]
            steps.append(r - sum(others) / len(others) if others else 0.0)
        credit.append([sum(steps[a:]) for a in range(len(steps))])
    out = []
    for row, segments in enumerate(rollout.columns["segments"]):
        tokens = [0.0] * len(rollout.completion_ids[row])
        k = 0
        for a, (moves, _) in enumerate(attempts_of(rollout, row)):
            for _ in moves:
                if k < len(segments):
                    for t in range(segments[k].start, segments[k].end):
                        tokens[t] = credit[row][a]
                k += 1
        out.append(tokens)
    return out, rewards


def reflection_shown(rollout, row: int) -> bool | None:
    """Whether the row's second attempt follows the rule reflection on its first (``None``: no second attempt)."""
    attempts = attempts_of(rollout, row)
    if len(attempts) < 2:
        return None
    search = Search()
    (first, queries), (second, _) = attempts[0], attempts[1]
    lines = [f"reflection: {q} {'not found' if search.search(q) == 'no results' else 'found'}." for q in queries]
    want = "\n".join(lines + ["try again."]) if lines else "reflection: no search. try again."
    text = rollout.completions[row]
    end = text.find(first[-1].strip()) + len(first[-1].strip())
    return want in text[end : text.find(second[0].strip(), end)]


def checked(counts):
    """The rollout's wanted advantages (:func:`hand_advantages`), its second attempts and reflections counted."""

    def want(rollout):
        if "env_turn_rewards" not in rollout.columns:
            return None
        tokens, rewards = hand_advantages(rollout)
        counts["second_attempts"] += sum(len(r) > 1 for r in rewards)
        counts["credited_rows"] += sum(any(row) for row in tokens)
        for row in range(len(rollout)):
            shown = reflection_shown(rollout, row)
            if shown is not None:
                counts["reflections_shown" if shown else "reflections_missing"] += 1
        return tokens

    return want


def run(seed: int = 0, steps: int = 1, overrides=(), folder=None, plugins: bool = True, check: bool = True) -> dict:
    """Train the CPU recipe (``plugins=False``: plain GRPO on the search tool) ``steps`` steps; the monitor's counts
    (with ``check``) and the training accuracy over the last three steps."""
    with one_thread(), tempfile.TemporaryDirectory(dir=folder) as out:
        config = recipe_config(RECIPE if plugins else PLAIN, plugins=True, seed=seed, steps=steps, output_dir=out,
                               overrides=overrides)
        trainer = build_trainer(config)
        counts = Counter()
        monitor = LossAdvantages(trainer, checked(counts)) if check else None
        trainer.train()
    log = trainer.state.log_history

    def last(key):
        values = [entry[key] for entry in log if key in entry][-3:]
        return sum(values) / len(values) if values else float("nan")

    result = {"accuracy": last("rewards/exact_match/mean")}
    if plugins:
        result |= {"accuracy@1": last("mrsearch/accuracy@1"), "accuracy@2": last("mrsearch/accuracy@2")}
    if monitor:
        result |= dict(monitor.counts + counts, notes=monitor.notes)
    return result


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], steps=12, methods=("mrsearch", "grpo")).parse_args(argv)
    compare(args, args.methods,
            lambda method, seed, folder: run(seed, args.steps, args.overrides, folder, plugins=method == "mrsearch",
                                             check=False),
            figures=("accuracy", "accuracy@1", "accuracy@2"))


if __name__ == "__main__":
    main()
