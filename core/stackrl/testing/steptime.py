"""Step times of stackrl trainers against plain TRL, in one process: the harness of the host's benchmarks.

A :class:`Variant` is a config and the plugins to train it with (``None``: TRL's own ``GRPOTrainer`` with the
built-in ``exact_match`` reward). :class:`Rounds` trains every variant ``steps`` steps per round, rounds alternating
the variants (rotating which goes first), so that load from other processes falls on all of them alike, and drops
the first ``warmup`` steps of every run. Three per-step times are kept:

- ``wall``: time between consecutive optimizer-step ends (a callback), i.e. everything a step costs: generation,
  rewards, advantages, loss, backward, optimizer, the ``post_step`` hook and logging;
- ``cpu``:  this process's CPU time over the same span (less sensitive to other processes' load);
- ``trl``:  TRL's own ``step_time`` (``training_step`` only: generation through backward).

A ratio is one of pooled medians; the spread of the per-round ratios (each round's median against the same round's
baseline) shows how much of a difference the machine's noise could make. Each run also counts the tokens of its
steps (prompt and completion tokens, as TRL counts them) and, on a GPU, the peak memory torch allocated.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import PrinterCallback, TrainerCallback
from trl import GRPOTrainer

from stackrl.config import LoadedConfig
from stackrl.data import load_prompts
from stackrl.manager import PluginManager
from stackrl.modeling import load_model, load_tokenizer
from stackrl.plugin import Plugin
from stackrl.rewards import exact_match
from stackrl.run import grpo_args, outcome_rewards, reward_weights
from stackrl.trainer import StackTrainer

__all__ = ["METRICS", "Rounds", "StepClock", "Variant", "quantiles", "use_threads"]

METRICS = {
    "wall": "wall-clock per step (whole step, post_step included)",
    "cpu": "process CPU time per step (whole step)",
    "trl": "TRL step_time (training_step only)",
}


def _exact_match_reward(completions, answer, **_):
    """``stackrl.rewards.exact_match`` with TRL's reward-function signature."""
    return [exact_match(c, a) for c, a in zip(completions, answer)]


_exact_match_reward.__name__ = "exact_match"  # the same metric name as stackrl's component


class StepClock(TrainerCallback):
    """Per-step wall-clock and process CPU time, from one optimizer-step end to the next.

    Added after stackrl's own callback, so a step's time includes its ``post_step`` hook.
    """

    def __init__(self):
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self._last = None

    def on_step_begin(self, args, state, control, **kwargs):
        if self._last is None:  # the first step: start from its beginning
            self._last = (time.perf_counter(), time.process_time())

    def on_step_end(self, args, state, control, **kwargs):
        now = (time.perf_counter(), time.process_time())
        self.wall.append(now[0] - self._last[0])
        self.cpu.append(now[1] - self._last[1])
        self._last = now


@dataclass
class Variant:
    """A trainer to time: ``config`` (model, data, trainer settings, rewards) and a factory of its plugins, called
    afresh for every run; ``plugins=None`` is plain ``trl.GRPOTrainer``."""

    config: LoadedConfig
    plugins: Callable[[], list[Plugin]] | None = None

    def build(self, dataset):
        config = self.config
        args = grpo_args(config)
        model, peft_config = load_model(config.host.model, args.device)
        common = dict(model=model, args=args, processing_class=load_tokenizer(config.host.model),
                      train_dataset=dataset, peft_config=peft_config)
        if self.plugins is None:
            return GRPOTrainer(reward_funcs=[_exact_match_reward], **common)
        return StackTrainer(
            plugins=PluginManager(self.plugins()),
            outcome_rewards=outcome_rewards(config),
            reward_weights=reward_weights(config),
            loss_weights=dict(config.host.losses),
            **common,
        )

    def run(self, dataset, profiler=None) -> dict:
        """Train once; the per-step times and tokens, per logged step (mean completion length, mean reward), and
        the peak GPU memory in bytes (``None`` without a GPU)."""
        gpu = torch.cuda.is_available()
        if gpu:  # what the previous run left (a trainer in a reference cycle) is not this run's memory
            gc.collect()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        trainer = self.build(dataset)
        trainer.remove_callback(PrinterCallback)  # disable_tqdm=True would print every log dict
        clock = StepClock()
        trainer.add_callback(clock)
        if profiler is not None:
            profiler.enable()
        trainer.train()
        if profiler is not None:
            profiler.disable()
        logs = [entry for entry in trainer.state.log_history if "step_time" in entry]
        counted = [entry["num_tokens"] for entry in logs]  # running totals
        return {
            "wall": clock.wall,
            "cpu": clock.cpu,
            "trl": [entry["step_time"] for entry in logs],
            "tokens": [b - a for a, b in zip([0, *counted], counted)],
            "trajectory": [(entry.get("completions/mean_length"), entry.get("reward")) for entry in logs],
            "peak_memory": torch.cuda.max_memory_allocated() if gpu else None,
        }


def use_threads(count: int) -> None:
    """Run torch ops on ``count`` threads, the same for every variant."""
    torch.set_num_threads(count)
    try:
        torch.set_num_interop_threads(count)
    except RuntimeError:  # settable once per process, before any inter-op work: a benchmark called from a test
        pass


def quantiles(values: list[float]) -> tuple[float, float, float, float, float]:
    """Minimum, first quartile, median, third quartile and maximum."""
    if len(values) == 1:
        return (values[0],) * 5
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return min(values), q1, q2, q3, max(values)


def settings_line(trainer: dict, threads: int, rounds: int, steps: int, warmup: int) -> str:
    """What a benchmark of alternating rounds runs, as its first line says it."""
    return (
        f"settings: batch {trainer['per_device_train_batch_size']}, {trainer['num_generations']} generations, "
        f"max_completion_length {trainer['max_completion_length']}, torch threads {threads}, "
        f"{rounds} rounds x {steps} steps per variant ({warmup} warmup steps dropped per round)"
    )


class Rounds:
    """Variants trained in alternating rounds; every variant of one :class:`Rounds` trains on one dataset object."""

    def __init__(self, variants: dict[str, Variant], warmup: int):
        self.variants = variants
        self.warmup = warmup
        first = next(iter(variants.values()))
        self.dataset = load_prompts(first.config.host.data)
        self.per_round = {v: {m: [] for m in METRICS} for v in variants}
        self.pooled = {v: {m: [] for m in METRICS} for v in variants}
        self.tokens = {v: [] for v in variants}
        self.peak_memory: dict[str, int | None] = {}
        self.trajectories: dict[str, list] = {}
        self.done = 0  # rounds run so far: a later call goes on rotating which variant goes first

    def run(self, rounds: int, report: Callable[[str], None] | None = None) -> None:
        names = list(self.variants)
        for r in range(self.done, self.done + rounds):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                out = self.variants[name].run(self.dataset)
                for m in METRICS:
                    kept = out[m][self.warmup :]
                    self.pooled[name][m] += kept
                    self.per_round[name][m].append(statistics.median(kept))
                self.tokens[name] += out["tokens"][self.warmup :]
                if out["peak_memory"] is not None:
                    self.peak_memory[name] = max(self.peak_memory.get(name, 0), out["peak_memory"])
                self.trajectories.setdefault(name, out["trajectory"])
                if report:
                    times = ", ".join(f"{self.per_round[name][m][-1]:.4f} {m}" for m in METRICS)
                    report(f"round {r + 1} {name:>8}: median s/step {times}")
            self.done += 1

    def median(self, name: str, metric: str) -> float:
        return statistics.median(self.pooled[name][metric])

    def tokens_per_second(self, name: str) -> float:
        """Median tokens of a step over its median wall-clock time."""
        return statistics.median(self.tokens[name]) / self.median(name, "wall")

    def ratio(self, name: str, baseline: str, metric: str = "wall") -> float:
        """Pooled median of ``name`` over that of ``baseline``."""
        return self.median(name, metric) / self.median(baseline, metric)

    def spread(self, name: str, baseline: str, metric: str = "wall") -> tuple[float, ...]:
        """:func:`quantiles` of the per-round ratios of ``name`` to ``baseline``."""
        pairs = zip(self.per_round[name][metric], self.per_round[baseline][metric])
        return quantiles([a / b for a, b in pairs])

    def median_lines(self) -> list[str]:
        """One line a metric: every variant's pooled median, in the variants' order."""
        return [f"  {m:>4}: {'  '.join(f'{v} {self.median(v, m):.4f}' for v in self.variants)}   [{what}]"
                for m, what in METRICS.items()]

    def ratio_line(self, name: str, baseline: str, metric: str) -> str:
        """:meth:`ratio` with its :meth:`spread`: a difference inside the spread is noise."""
        low, q1, median, q3, high = self.spread(name, baseline, metric)
        return (
            f"ratio {name}/{baseline} {metric:>4}: {self.ratio(name, baseline, metric):.4f}   per-round ratios: median "
            f"{median:.4f}, quartiles {q1:.4f}-{q3:.4f}, range {low:.4f}-{high:.4f}"
        )
