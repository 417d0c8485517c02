"""AgentOPSD's mechanism on the built-in task: on wrong rollouts the largest weight lands on the first wrong line.

Held-out problems, four completions each sampled by the built-in model; GRPO's advantages, reshaped by AgentOPSD
as configs/recipes/agentopsd-cpu.yaml sets it (each line a turn). On every wrong rollout with a negative
advantage, the first line that differs from the reference solution is the pivotal turn: the teacher, shown the
solution, rejects it, and the success belief it carries falls there and stays down. We count the rollouts whose
line of strictly largest weight is that one (``pivot``), against the share a line drawn at random would hit
(``chance``). Then held-out greedy accuracy after a short run, against plain GRPO with the same settings and steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/agentopsd/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

from pathlib import Path

from stackrl.blocks.turns import NewlineTokens, line_spans
from stackrl.config import load_config
from stackrl.run import build_trainer
from stackrl.testing.benchmark import diagnosed
from stackrl.testing.heldout import advantage_context, heldout_rollout

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "agentopsd-cpu.yaml"
TIE = 1e-3  # weights closer than this are no strict largest


def first_wrong_line(completion: str, solution: str) -> int:
    """The first line of ``completion`` that differs from the same line of the reference ``solution``."""
    lines, reference = completion.split("\n"), solution.split("\n")
    return next((i for i, line in enumerate(lines) if i >= len(reference) or line != reference[i]), len(lines) - 1)


def pivots(problems: int, seed: int, overrides=()) -> dict[str, float]:
    """On the wrong rollouts of ``problems`` held-out problems: the share whose strictly largest line weight is on
    their first wrong line (``pivot``), a random line's chance of being it (``chance``), and how many (``rows``)."""
    trainer = build_trainer(load_config([RECIPE], [f"trainer.seed={seed}", *overrides]))
    plugin = trainer.plugins.plugins["agentopsd"]
    rollout = heldout_rollout(trainer, problems, seed=1000 + seed)
    advantages = plugin.reshape_advantages(rollout.advantages, advantage_context(trainer, rollout, "agentopsd"))
    is_newline = NewlineTokens(trainer.processing_class)
    hits, chance, rows = 0, 0.0, 0
    for i, ids in enumerate(rollout.completion_ids):
        if rollout.advantages[i] >= 0 or not ids:
            continue
        spans = line_spans(ids, is_newline)
        weights = [(advantages[i, start] / rollout.advantages[i]).item() for start, _ in spans]
        ranked = sorted(range(len(spans)), key=weights.__getitem__)
        strict = len(spans) == 1 or weights[ranked[-1]] - weights[ranked[-2]] > TIE
        hits += strict and ranked[-1] == first_wrong_line(rollout.completions[i], rollout.columns["solution"][i])
        chance, rows = chance + 1 / len(spans), rows + 1
    return {"pivot": hits / max(rows, 1), "chance": chance / max(rows, 1), "rows": rows}


def main():
    diagnosed(__doc__.splitlines()[0], RECIPE, pivots, ("pivot", "chance", "rows"))


if __name__ == "__main__":
    main()
