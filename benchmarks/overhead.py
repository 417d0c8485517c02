"""The host's per-step overhead: plain GRPOTrainer vs stackrl without plugins vs stackrl with a no-op per stage.

One run, one tiny model, one dataset, one GRPOConfig for all three variants:

- ``plain``:  ``trl.GRPOTrainer`` with the built-in ``exact_match`` reward wrapped for TRL's signature;
- ``none``:   ``StackTrainer`` with no plugin and ``rewards: {exact_match: 1.0}``;
- ``noop``:   the same plus the ``noop`` test plugin (transform_prompts, reward, reshape_advantages, loss_term,
  post_step; each does nothing).

Each variant is built fresh (same weights, same seed) and trained ``--steps`` steps per round; rounds alternate the
variants (rotating which goes first) so that load from other processes falls on all of them alike. The first
``--warmup`` steps of every round are dropped. Three per-step times are kept:

- ``wall``: time between consecutive optimizer-step ends (a callback), i.e. everything a step costs: generation,
  rewards, advantages, loss, backward, optimizer, the ``post_step`` hook and logging;
- ``cpu``:  this process's CPU time over the same span (less sensitive to other processes' load);
- ``trl``:  TRL's own ``step_time`` (``training_step`` only: generation through backward).

It prints per-variant medians, the two ratios, and last ``overhead_ratio: X`` (noop / plain, wall-clock medians).
Target: X <= 1.03. On a shared machine the timings move by a few percent with other processes' load (the load
average is printed); ``--profile`` adds a load-insensitive view: Python calls per step and the time spent in
stackrl's own frames, per variant.

    python benchmarks/overhead.py [--rounds 12] [--steps 10] [--warmup 2] [--threads 1] [--profile FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402
from transformers import PrinterCallback, TrainerCallback  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from stackrl.data import load_prompts  # noqa: E402
from stackrl.manager import PluginManager  # noqa: E402
from stackrl.modeling import load_model, load_tokenizer  # noqa: E402
from stackrl.rewards import exact_match  # noqa: E402
from stackrl.run import grpo_args  # noqa: E402
from stackrl.testing.repository import use_fixture_plugins  # noqa: E402
from stackrl.testing.tiny import TINY_TRAINER, build_tiny_model, tiny_config  # noqa: E402
from stackrl.trainer import StackTrainer  # noqa: E402

VARIANTS = ("plain", "none", "noop")

# The tiny test settings, with a batch large enough that a step is not all Python noise.
TRAINER = {
    **TINY_TRAINER,
    "per_device_train_batch_size": 32,
    "num_generations": 8,
    "max_completion_length": 32,
    "learning_rate": 1e-4,
}


def exact_match_reward(completions, answer, **_):
    """``stackrl.rewards.exact_match`` with TRL's reward-function signature."""
    return [exact_match(c, a) for c, a in zip(completions, answer)]


exact_match_reward.__name__ = "exact_match"  # same metric name as stackrl's component


class StepClock(TrainerCallback):
    """Per-step wall-clock and process CPU time, from one optimizer-step end to the next.

    Added after stackrl's own callback, so a step's time includes its ``post_step`` hook. CPU time (all threads of
    this process) is far less sensitive than wall-clock to other processes competing for the cores.
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


class Bench:
    def __init__(self, work: Path, steps: int):
        self.model_dir = build_tiny_model(work / "model")
        self.steps = steps
        trainer = {**TRAINER, "max_steps": steps}
        data = {"source": "arithmetic", "size": 512, "seed": 0}
        common = dict(tmp_dir=work, output_dir=str(work / "out"), trainer=trainer, data=data)
        self.configs = {
            "plain": tiny_config(self.model_dir, [], **common),
            "none": tiny_config(self.model_dir, [], **common),
            "noop": tiny_config(self.model_dir, ["noop"], **common),
        }
        self.dataset = load_prompts(self.configs["plain"].host.data)  # one Dataset object for all three

    def build(self, variant: str):
        config = self.configs[variant]
        args = grpo_args(config)
        model, _ = load_model(config.host.model, torch.device("cpu"))
        tokenizer = load_tokenizer(config.host.model)
        common = dict(model=model, args=args, processing_class=tokenizer, train_dataset=self.dataset)
        if variant == "plain":
            return GRPOTrainer(reward_funcs=[exact_match_reward], **common)
        return StackTrainer(
            plugins=PluginManager(config.plugins()),
            outcome_rewards={"exact_match": exact_match},
            reward_weights={"exact_match": 1.0},
            **common,
        )

    def run(self, variant: str, profiler=None) -> dict[str, list]:
        trainer = self.build(variant)
        trainer.remove_callback(PrinterCallback)  # disable_tqdm=True would print every log dict
        clock = StepClock()
        trainer.add_callback(clock)
        if profiler is not None:
            profiler.enable()
        trainer.train()
        if profiler is not None:
            profiler.disable()
        assert trainer.state.global_step == self.steps, trainer.state.global_step
        logs = [entry for entry in trainer.state.log_history if "step_time" in entry]
        return {
            "wall": clock.wall,
            "cpu": clock.cpu,
            "trl": [entry["step_time"] for entry in logs],
            "trajectory": [(entry.get("completions/mean_length"), entry.get("reward")) for entry in logs],
        }


def profile(bench: Bench, path: str) -> None:
    """cProfile one run of each variant: calls and time spent in stackrl's own frames (insensitive to load)."""
    import cProfile
    import pstats

    for variant in VARIANTS:
        profiler = cProfile.Profile()
        bench.run(variant, profiler=profiler)
        stats = pstats.Stats(profiler)
        host = sum(tt for (file, _, _), (_, _, tt, _, _) in stats.stats.items() if f"{os.sep}stackrl{os.sep}" in file)
        print(
            f"profile {variant:>5}: {stats.total_calls / bench.steps:.0f} Python calls/step, "
            f"{1000 * host / bench.steps:.2f} ms/step in stackrl's own code (self time, profiled)"
        )
        if variant == "noop":
            profiler.dump_stats(path)
            print(f"profile of the 'noop' run written to {path} (pstats)")


METRICS = {
    "wall": "wall-clock per step (whole step, post_step included)",
    "cpu": "process CPU time per step (whole step)",
    "trl": "TRL step_time (training_step only)",
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--steps", type=int, default=10, help="steps per variant per round, warmup included")
    parser.add_argument("--warmup", type=int, default=2, help="steps dropped at the start of every round")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, the same for every variant")
    parser.add_argument(
        "--profile", metavar="FILE", help="also cProfile one run per variant; the noop one is saved to FILE (pstats)"
    )
    opts = parser.parse_args(argv)
    if opts.steps <= opts.warmup:
        parser.error("--steps must exceed --warmup")

    use_fixture_plugins(Path(__file__).resolve().parent.parent)  # the noop plugin
    torch.set_num_threads(opts.threads)
    torch.set_num_interop_threads(opts.threads)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="stackrl-bench-") as work:
        bench = Bench(Path(work), opts.steps)
        print(
            f"settings: batch {TRAINER['per_device_train_batch_size']}, {TRAINER['num_generations']} generations, "
            f"max_completion_length {TRAINER['max_completion_length']}, torch threads {opts.threads}, "
            f"{opts.rounds} rounds x {opts.steps} steps per variant ({opts.warmup} warmup steps dropped per round)",
            flush=True,
        )
        bench.run("plain")  # warm the process up (imports, allocator, kernels) before anything is timed
        pooled = {v: {m: [] for m in METRICS} for v in VARIANTS}
        per_round = {v: {m: [] for m in METRICS} for v in VARIANTS}
        trajectories = {}
        for r in range(opts.rounds):
            order = VARIANTS[r % 3 :] + VARIANTS[: r % 3]  # rotate who goes first
            for variant in order:
                out = bench.run(variant)
                for m in METRICS:
                    kept = out[m][opts.warmup :]
                    pooled[variant][m] += kept
                    per_round[variant][m].append(statistics.median(kept))
                trajectories.setdefault(variant, out["trajectory"])
                print(
                    f"round {r + 1} {variant:>5}: median {per_round[variant]['wall'][-1]:.4f} s/step wall, "
                    f"{per_round[variant]['cpu'][-1]:.4f} cpu, {per_round[variant]['trl'][-1]:.4f} trl",
                    flush=True,
                )
        if opts.profile:
            profile(bench, opts.profile)

    load_after = os.getloadavg()
    same = all(trajectories[v] == trajectories["plain"] for v in VARIANTS)
    print(f"same trajectory in all variants (completion lengths, rewards per step): {same}")
    medians = {v: {m: statistics.median(pooled[v][m]) for m in METRICS} for v in VARIANTS}
    print("median s/step over all rounds:")
    for m, what in METRICS.items():
        cells = "  ".join(f"{v} {medians[v][m]:.4f}" for v in VARIANTS)
        print(f"  {m:>4}: {cells}   [{what}]")
    for v in ("none", "noop"):
        pooled_ratios = ", ".join(f"{m} {medians[v][m] / medians['plain'][m]:.4f}" for m in METRICS)
        paired = ", ".join(
            f"{m} {statistics.median(a / b for a, b in zip(per_round[v][m], per_round['plain'][m])):.4f}"
            for m in METRICS
        )
        print(f"ratio {v}/plain: {pooled_ratios}  (median of per-round ratios: {paired})")
    print(
        f"load average (1/5/15 min) on {os.cpu_count()} CPUs: before {' '.join(f'{x:.2f}' for x in load_before)}, "
        f"after {' '.join(f'{x:.2f}' for x in load_after)}"
    )
    print(f"overhead_ratio: {medians['noop']['wall'] / medians['plain']['wall']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
