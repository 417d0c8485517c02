"""DelTA on the built-in model: formatting tokens get lower coefficients than the result's digits, and held-out
accuracy against plain GRPO at equal steps.

A short run of configs/recipes/delta-cpu.yaml (stackrl/arith-tiny, groups of 8). A monitor reads each advantage
stage: the per-token advantages the plugin returns, divided by the advantages it was given, are the coefficients;
on the rows of the groups it reweighted, each completion's final line "The answer is N." is found in its text and
its tokens split into the formatting words ("The answer is") and the result (N's digits). Every completion of the
task ends on that line, right or wrong, so the formatting words are shared by both sides of a group, while the
digits are where a right answer differs from a wrong one. Figures: the mean coefficient of each kind (`format`,
`result`; on the rows of each side, `format_right`, `result_right`, `format_wrong`, `result_wrong`), the share of rows whose result tokens outweigh their formatting tokens (`result_wins`), and greedy
accuracy on held-out problems after training, against plain GRPO (the recipe without the plugin).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/delta/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import torch

from stackrl.run import build_trainer
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import greedy_accuracy, recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "delta-cpu.yaml"
FINAL = re.compile(r"(The answer is) (-?\d+)\.\s*$")


def token_spans(tokenizer, ids: list[int]) -> list[tuple[int, int]]:
    """Each token's character span in the decoded completion (decoding prefixes: exact for any tokenizer)."""
    spans, end = [], 0
    for n in range(1, len(ids) + 1):
        text = tokenizer.decode(ids[:n], skip_special_tokens=True)
        spans.append((end, len(text)))
        end = len(text)
    return spans


class Coefficients:
    """A run's monitor: the coefficients of the formatting and result tokens of each reweighted row."""

    def __init__(self):
        self.format: list[float] = []
        self.result: list[float] = []
        self.sides = {"right": ([], []), "wrong": ([], [])}  # per side of the group: (format, result) coefficients
        self.rows = 0
        self.result_wins = 0

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "reshape_advantages" or plugin != "delta" or result is None:
            return
        ctx = kwargs["ctx"]
        given = kwargs["advantages"].float()
        tokens = given if given.dim() == 2 else given[:, None].expand_as(result)
        for i, ids in enumerate(ctx.rollout.completion_ids):
            text = ctx.tokenizer.decode(ids, skip_special_tokens=True)
            found = FINAL.search(text)
            if not found or float(tokens[i, 0]) == 0.0:
                continue
            weights = (result[i, : len(ids)] / tokens[i, : len(ids)]).tolist()
            spans = token_spans(ctx.tokenizer, ids)
            inside = lambda a, b: [w for w, (s, e) in zip(weights, spans) if e > s and s >= a and e <= b]  # noqa: E731
            fmt, res = inside(*found.span(1)), inside(*found.span(2))
            if fmt and res:
                self.format += fmt
                self.result += res
                side = self.sides["right" if float(tokens[i, 0]) > 0 else "wrong"]
                side[0].extend(fmt)
                side[1].extend(res)
                self.rows += 1
                self.result_wins += sum(res) / len(res) > sum(fmt) / len(fmt)

    def figures(self) -> dict[str, float]:
        mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
        by_side = {f"{kind}_{side}": mean(values[k]) for side, values in self.sides.items()
                   for k, kind in enumerate(("format", "result"))}
        return {"format": mean(self.format), "result": mean(self.result), "rows": self.rows,
                "result_wins": self.result_wins / max(1, self.rows), **by_side}


def run(seed: int, steps: int, method: str = "delta", overrides=(), eval_size: int = 0) -> tuple[dict, Coefficients]:
    """The run's figures (with ``eval_size``, greedy held-out accuracy after) and, for delta, its monitor."""
    monitor = Coefficients()
    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=method == "delta", seed=seed, steps=steps, output_dir=out,
                               overrides=overrides if method == "delta"
                               else [o for o in overrides if not o.startswith("delta.")])
        trainer = build_trainer(config, monitor=monitor)
        trainer.train()
        figures = {"accuracy": greedy_accuracy(trainer, eval_size, seed)} if eval_size else {}
    return ({**figures, **monitor.figures()} if method == "delta" else figures), monitor


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=20, eval_size=200, methods=("delta", "grpo")).parse_args()
    compare(args, args.methods,
            lambda method, seed, folder: run(seed, args.steps, method, args.overrides, args.eval_size)[0],
            figures=("accuracy", "format", "result", "result_wins", "format_right", "result_right", "format_wrong",
                     "result_wrong"))


if __name__ == "__main__":
    main()
