"""The cost of the importance weights' scoring pass: rows marked with behaviour log-probs against the same rows unmarked.

One run, one tiny model, one dataset, one GRPOConfig for all four variants:

- ``plain``:    ``trl.GRPOTrainer`` with the built-in ``exact_match`` reward;
- ``rollout``:  ``StackTrainer`` whose ``generate_rollout`` samples every row through ``ctx.generate`` and marks
  none: the baseline of the weights' cost;
- ``quarter``:  the same rows, each group's last quarter marked with behaviour log-probs (ReMix-like reuse of a
  quarter of the batch): the host scores those rows under the current policy and weights their advantages;
- ``all``:      every row marked: the most the scoring pass can cost.

The behaviour log-probs are constants (-1 per token): what they are changes the weights, not their cost. Variants
alternate in rounds (:mod:`stackrl.testing.steptime`). It prints per-variant medians, the ratios to ``plain`` and
to ``rollout`` with the spread of the per-round ratios, and last ``replay_cost_ratio: X`` (quarter / rollout) and
``replay_all_cost_ratio: X`` (all / rollout), of this process's CPU time per step, which other processes' load
moves far less than the wall-clock time (also printed).

    python benchmarks/replay.py [--rounds 6] [--steps 8] [--warmup 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from transformers.utils import logging as hf_logging  # noqa: E402

from stackrl import Plugin, Samples, hookimpl  # noqa: E402
from stackrl.testing.steptime import Rounds, Variant, settings_line, use_threads  # noqa: E402
from stackrl.testing.tiny import TINY_TRAINER, build_tiny_model, tiny_config  # noqa: E402

MARKED = {"rollout": 0.0, "quarter": 0.25, "all": 1.0}  # the share of each group's rows marked

TRAINER = {
    **TINY_TRAINER,
    "per_device_train_batch_size": 32,
    "num_generations": 8,
    "max_completion_length": 32,
    "learning_rate": 1e-4,
}


class MarkedRollout(Plugin):
    """Samples every row with the policy and marks the last ``share`` of each group's rows as another policy's."""

    def __init__(self, share: float):
        super().__init__(None)
        self.name = "marked_rollout"
        self.share = share

    @hookimpl
    def generate_rollout(self, prompts, ctx):
        generations = ctx.generate(prompts)
        marked = round(self.share * ctx.group_size)
        behaviour = [
            [-1.0] * len(g.completion_ids) if i % ctx.group_size >= ctx.group_size - marked else None
            for i, g in enumerate(generations)
        ]
        return Samples(completion_ids=[g.completion_ids for g in generations],
                       behaviour_logprobs=behaviour if marked else None)


def variants(work: Path, steps: int) -> dict[str, Variant]:
    model_dir = build_tiny_model(work / "model")
    config = tiny_config(model_dir, [], tmp_dir=work, output_dir=str(work / "out"),
                         trainer={**TRAINER, "max_steps": steps}, data={"source": "arithmetic", "size": 512, "seed": 0})
    found = {"plain": Variant(config)}
    for name, share in MARKED.items():
        found[name] = Variant(config, lambda share=share: [MarkedRollout(share)])
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=8, help="steps per variant per round, warmup included")
    parser.add_argument("--warmup", type=int, default=2, help="steps dropped at the start of every round")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, the same for every variant")
    opts = parser.parse_args(argv)
    if opts.steps <= opts.warmup:
        parser.error("--steps must exceed --warmup")
    use_threads(opts.threads)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    with tempfile.TemporaryDirectory(prefix="stackrl-bench-") as work:
        rounds = Rounds(variants(Path(work), opts.steps), warmup=opts.warmup)
        print(settings_line(TRAINER, opts.threads, opts.rounds, opts.steps, opts.warmup), flush=True)
        rounds.run(opts.rounds, report=lambda line: print(line, flush=True))
    print("median s/step over all rounds:")
    for line in rounds.median_lines():
        print(line)
    for v, baseline in (("rollout", "plain"), ("quarter", "plain"), ("quarter", "rollout"), ("all", "rollout")):
        for m in ("wall", "cpu"):
            print(rounds.ratio_line(v, baseline, m))
    print(f"replay_cost_ratio: {rounds.ratio('quarter', 'rollout', 'cpu'):.4f}")
    print(f"replay_all_cost_ratio: {rounds.ratio('all', 'rollout', 'cpu'):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
