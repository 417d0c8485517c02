"""Stacking the token-signal methods: one forward per distinct context, however many plugins read it.

RLSD, CSCR and RLCSD stacked on the built-in task and model, with their CPU recipes' settings, RLCSD given the
reference and a wrong solution as its hints (its `gt_cot`-style hints, not its default sibling rollouts, which no
other method reads). Per completion they read five contexts (RLSD: the student and the reference; CSCR: the
student and the two claims; RLCSD: the reference and the wrong hint), but each row has only three distinct ones: the student's prompt, the reference, and
a solution reaching a wrong answer (a correct row's claimed-correct context is the reference and its
claimed-incorrect one the wrong hint; a wrong row's are its own wrong answer, which is its wrong hint, and the
reference). The host's token-signal service scores each once.

It prints ``teacher_forwards_per_completion: X`` (rows scored by ``ctx.score``, over completions trained; goal: 3)
and ``stack_time_ratio: X``: the median step time of the stack over plain GRPO's with the same settings, in one
run. Rounds alternate the two, so load from other processes falls on both alike; the ratio is of this process's
CPU time, which other processes' load moves far less than the wall-clock time (also printed).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/token_signals.py [--rounds 3] [--steps 6] [--short]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
import yaml
from transformers import TrainerCallback

from stackrl.config import load_config
from stackrl.policy import PolicyAccess
from stackrl.run import build_trainer
from stackrl.testing.heldout import without_plugins

RECIPES = [Path(__file__).resolve().parents[1] / "configs" / "recipes" / f"{name}-cpu.yaml"
           for name in ("rlsd", "cscr", "rlcsd")]
STACK = "plugins=[rlsd,cscr,rlcsd]"
SHARED_HINTS = {"rlcsd": {"positive_template": "{solution}\n\n{prompt}",
                          "negative_template": "{wrong_solution}\n\n{prompt}"}}


class StepClock(TrainerCallback):
    """Each optimizer step's wall-clock time and this process's CPU time, from its beginning to its end."""

    def __init__(self):
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = (time.perf_counter(), time.process_time())

    def on_step_end(self, args, state, control, **kwargs):
        self.wall.append(time.perf_counter() - self._start[0])
        self.cpu.append(time.process_time() - self._start[1])


class RowCounter:
    """Counts the rows ``ctx.score`` scores while installed (every forward of the token-signal service)."""

    def __init__(self):
        self.rows = 0

    def __enter__(self):
        self._original = PolicyAccess.score
        counter = self

        def counting(policy, contexts, continuation_ids, **options):
            counter.rows += len(contexts)
            return counter._original(policy, contexts, continuation_ids, **options)

        PolicyAccess.score = counting
        return self

    def __exit__(self, *exc):
        PolicyAccess.score = self._original


def train(files, overrides, steps: int, seed: int) -> tuple[StepClock, int, int]:
    """Step times, rows scored and completions trained of ``steps`` steps."""
    with tempfile.TemporaryDirectory() as out:
        config = load_config(list(files), [*overrides, f"trainer.max_steps={steps}", f"trainer.seed={seed}",
                                           f"output_dir={out}", "trainer.logging_steps=1000"])
        clock = StepClock()
        trainer = build_trainer(config, callbacks=[clock])
        with RowCounter() as counter:
            trainer.train()
        completions = steps * trainer.args.per_device_train_batch_size * trainer.args.gradient_accumulation_steps
    return clock, counter.rows, completions


def run(rounds: int, steps: int, warmup: int = 1) -> dict[str, float]:
    """Alternate the stack and plain GRPO for ``rounds`` rounds of ``steps`` steps; drop each round's first
    ``warmup`` steps from the timings."""
    times = {(variant, kind): [] for variant in ("stack", "grpo") for kind in ("wall", "cpu")}
    rows = completions = 0
    with without_plugins(RECIPES[0]) as plain, tempfile.TemporaryDirectory() as folder:
        hints = Path(folder) / "hints.yaml"
        hints.write_text(yaml.safe_dump(SHARED_HINTS))
        for r in range(rounds):
            order = ("stack", "grpo") if r % 2 == 0 else ("grpo", "stack")
            for variant in order:
                files, overrides = ([*RECIPES, hints], [STACK]) if variant == "stack" else ([plain], [])
                clock, scored, trained = train(files, overrides, steps, seed=r)
                times[variant, "wall"] += clock.wall[warmup:]
                times[variant, "cpu"] += clock.cpu[warmup:]
                if variant == "stack":
                    rows, completions = rows + scored, completions + trained
    median = {key: statistics.median(values) for key, values in times.items()}
    return {
        "teacher_forwards_per_completion": rows / completions,
        "stack_time_ratio": median["stack", "cpu"] / median["grpo", "cpu"],
        "wall_time_ratio": median["stack", "wall"] / median["grpo", "wall"],
        **{f"{variant}_{kind}_s": value for (variant, kind), value in median.items()},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--short", action="store_true", help="one round of two steps (what the test suite runs)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rounds, steps = (1, 2) if args.short else (args.rounds, args.steps)
    result = run(rounds, steps)
    print(f"median step, CPU time: stack {result['stack_cpu_s']:.2f} s, plain GRPO {result['grpo_cpu_s']:.2f} s; "
          f"wall-clock: {result['stack_wall_s']:.2f} s, {result['grpo_wall_s']:.2f} s "
          f"(ratio {result['wall_time_ratio']:.2f})")
    print(f"teacher_forwards_per_completion: {result['teacher_forwards_per_completion']:.2f}")
    print(f"stack_time_ratio: {result['stack_time_ratio']:.2f}")


if __name__ == "__main__":
    main()
