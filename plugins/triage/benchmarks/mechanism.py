"""TRIAGE on the built-in task: a line's advantage follows its role inside its row.

A short run of configs/recipes/triage-cpu.yaml (GRPO on stackrl/arith-tiny, the rule labeller as an auxiliary
model). A monitor reads every advantage the plugin returns, line by line, against checks made here without the
plugin: the first line of a row that is wrong in itself (the host's ``first_wrong_line``) against the row's first
line where that one is right, and each right line written a second time against its first writing. Against plain
GRPO at equal steps: greedy accuracy on held-out problems.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/triage/benchmarks/mechanism.py --seeds 0 1 2 --steps 24 --eval-size 64
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl.blocks.turns import NewlineTokens, line_spans
from stackrl.run import build_trainer
from stackrl.tasks.roles import first_wrong_line
from stackrl.testing.heldout import greedy_accuracy, recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "triage-cpu.yaml"
LABELLER = "triage.labeller=labeller"


class Lines:
    """A run's monitor: for each row the plugin credited, its lines' texts and mean advantages before and after."""

    def __init__(self):
        self.wrong_vs_right: list[tuple[float, float]] = []  # (first wrong line, first line right) in one row
        self.repeat_vs_first: list[tuple[float, float]] = []  # (a right line again, its first writing)
        self.outcome_kept: list[float] = []  # |mean change| of rows whose every line is right and new
        self._is_newline = None

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "reshape_advantages" or plugin != "triage" or result is None:
            return
        ctx, before = kwargs["ctx"], kwargs["advantages"]
        self._is_newline = self._is_newline or NewlineTokens(ctx.tokenizer)
        for i, ids in enumerate(ctx.rollout.completion_ids):
            spans = [(a, b) for a, b in line_spans(ids, self._is_newline)]
            texts = [ctx.tokenizer.decode(ids[a:b], skip_special_tokens=True).strip() for a, b in spans]
            keep = [k for k, t in enumerate(texts) if t]
            texts, spans = [texts[k] for k in keep], [spans[k] for k in keep]
            if not texts:
                continue
            mean = [float(result[i, a:b].mean()) for a, b in spans]
            wrong = first_wrong_line(texts)
            if wrong is not None and wrong > 0:
                self.wrong_vs_right.append((mean[wrong], mean[0]))
            upto = len(texts) if wrong is None else wrong
            for k in range(1, upto):
                if texts[k] in texts[:k]:
                    self.repeat_vs_first.append((mean[k], mean[texts.index(texts[k])]))
            if wrong is None and len(set(texts)) == len(texts):
                outcome = float(before[i]) if before.dim() == 1 else float(before[i, spans[0][0]])
                self.outcome_kept.append(abs(sum(mean) / len(mean) - outcome))

    def figures(self) -> dict[str, float]:
        below = lambda pairs: sum(a < b for a, b in pairs) / len(pairs) if pairs else float("nan")  # noqa: E731
        return {"wrong_rows": len(self.wrong_vs_right), "wrong_below_right": below(self.wrong_vs_right),
                "repeats": len(self.repeat_vs_first), "repeat_below_first": below(self.repeat_vs_first)}


def doubled(trainer, size: int, seed: int) -> Lines:
    """The trained plugin's credit of ``size`` held-out problems' sampled completions, each with its first line
    written twice where that line is right: the policy seldom repeats itself, so the repeats are made here."""
    from stackrl import Rollout
    from stackrl.testing.heldout import advantage_context, heldout_rollout

    sampled = heldout_rollout(trainer, size, seed)
    texts = []
    for text in sampled.completions:
        lines = text.split("\n")
        right = len(lines) > 1 and first_wrong_line(lines[:1]) is None and first_wrong_line(lines) != 0
        texts.append("\n".join([lines[0], *lines]) if right else text)
    encode = lambda t: trainer.processing_class(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    rollout = Rollout(prompts=sampled.prompts, completions=texts, prompt_ids=sampled.prompt_ids,
                      completion_ids=[encode(t) for t in texts], columns=sampled.columns,
                      group_size=sampled.group_size, rewards=sampled.rewards, advantages=sampled.advantages)
    ctx = advantage_context(trainer, rollout, plugin="triage")
    lines = Lines()
    advantages = rollout.advantages
    lines("reshape_advantages", "triage", {"ctx": ctx, "advantages": advantages},
          trainer.plugins.plugins["triage"].reshape_advantages(advantages=advantages, ctx=ctx))
    return lines


def run(seed: int, steps: int, method: str = "triage", overrides=(), heldout: int = 0,
        repeats: int = 0) -> tuple[dict, Lines]:
    """The run's figures (greedy accuracy on ``heldout`` held-out problems after, where asked) and its monitor,
    with the lines of :func:`doubled` on ``repeats`` held-out problems after the run, where asked."""
    lines = Lines()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory() as out:
            # the rule labeller asked as the recipe's aux model `labeller` (backend rule), not in the process
            overrides = [LABELLER, *overrides] if method == "triage" else [o for o in overrides if not o.startswith("triage.")]
            config = recipe_config(RECIPE, plugins=method == "triage", seed=seed, steps=steps, output_dir=out,
                                   overrides=overrides)
            trainer = build_trainer(config, monitor=lines)
            trainer.train()
            figures = {"accuracy": greedy_accuracy(trainer, heldout, seed=1000 + seed)} if heldout else {}
            if method == "triage":  # the requests the aux labeller answered over the run
                figures["labeller_calls"] = sum(row.get("aux/labeller/calls", 0) for row in trainer.state.log_history)
            if repeats and method == "triage":
                made = doubled(trainer, repeats, seed)
                lines.repeat_vs_first += made.repeat_vs_first
                lines.wrong_vs_right += made.wrong_vs_right
    finally:
        torch.set_num_threads(threads)
    return ({**figures, **lines.figures()} if method == "triage" else figures), lines


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=24, eval_size=64, methods=("triage", "grpo")).parse_args()
    compare(args, args.methods,
            lambda method, seed, folder: run(seed, args.steps, method, args.overrides, heldout=args.eval_size)[0],
            figures=("accuracy", "wrong_below_right", "repeat_below_first"))


if __name__ == "__main__":
    main()
