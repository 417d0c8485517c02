"""The host's per-step overhead: plain GRPOTrainer vs stackrl without plugins vs stackrl with a no-op per stage.

One run, one tiny model, one dataset, one GRPOConfig for all three variants:

- ``plain``:  ``trl.GRPOTrainer`` with the built-in ``exact_match`` reward wrapped for TRL's signature;
- ``none``:   ``StackTrainer`` with no plugin and ``rewards: {exact_match: 1.0}``;
- ``noop``:   the same plus the ``noop`` test plugin (transform_prompts, reward, reshape_advantages, clip_range,
  loss_term, post_step; each does nothing).

Variants alternate in rounds (:mod:`stackrl.testing.steptime`, which also says what the ``wall``, ``cpu`` and
``trl`` times cover). It prints per-variant medians, the ratios of pooled medians with the spread of the per-round
ratios (minimum, quartiles, maximum: a difference inside that spread is noise), and last ``overhead_ratio: X``
(noop / plain, wall-clock medians). Targets: noop <= 1.02, none <= 1.01, on wall-clock and CPU time. On a shared
machine the timings move by a few percent with other processes' load (the load average is printed);
``--profile`` adds a load-insensitive view: Python calls per step and the time spent in stackrl's own frames.

    python benchmarks/overhead.py [--rounds 12] [--steps 10] [--warmup 2] [--threads 1] [--profile FILE]
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

from stackrl.testing.repository import use_fixture_plugins  # noqa: E402
from stackrl.testing.steptime import Rounds, Variant, settings_line, use_threads  # noqa: E402
from stackrl.testing.tiny import TINY_TRAINER, build_tiny_model, tiny_config  # noqa: E402


# The tiny test settings, with a batch large enough that a step is not all Python noise.
TRAINER = {
    **TINY_TRAINER,
    "per_device_train_batch_size": 32,
    "num_generations": 8,
    "max_completion_length": 32,
    "learning_rate": 1e-4,
}


def variants(work: Path, steps: int) -> dict[str, Variant]:
    model_dir = build_tiny_model(work / "model")
    common = dict(tmp_dir=work, output_dir=str(work / "out"), trainer={**TRAINER, "max_steps": steps},
                  data={"source": "arithmetic", "size": 512, "seed": 0})
    none, noop = tiny_config(model_dir, [], **common), tiny_config(model_dir, ["noop"], **common)
    return {"plain": Variant(none), "none": Variant(none, none.plugins), "noop": Variant(noop, noop.plugins)}


def profile(rounds: Rounds, steps: int, path: str) -> None:
    """cProfile one run of each variant: calls and time spent in stackrl's own frames (insensitive to load)."""
    import cProfile
    import pstats

    for name, variant in rounds.variants.items():
        profiler = cProfile.Profile()
        variant.run(rounds.dataset, profiler=profiler)
        stats = pstats.Stats(profiler)
        host = sum(tt for (file, _, _), (_, _, tt, _, _) in stats.stats.items() if f"{os.sep}stackrl{os.sep}" in file)
        print(
            f"profile {name:>5}: {stats.total_calls / steps:.0f} Python calls/step, "
            f"{1000 * host / steps:.2f} ms/step in stackrl's own code (self time, profiled)"
        )
        if name == "noop":
            profiler.dump_stats(path)
            print(f"profile of the 'noop' run written to {path} (pstats)")


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
    use_threads(opts.threads)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="stackrl-bench-") as work:
        rounds = Rounds(variants(Path(work), opts.steps), warmup=opts.warmup)
        print(settings_line(TRAINER, opts.threads, opts.rounds, opts.steps, opts.warmup), flush=True)
        rounds.variants["plain"].run(rounds.dataset)  # warm the process up before anything is timed
        rounds.run(opts.rounds, report=lambda line: print(line, flush=True))
        if opts.profile:
            profile(rounds, opts.steps, opts.profile)

    load_after = os.getloadavg()
    same = all(t == rounds.trajectories["plain"] for t in rounds.trajectories.values())
    print(f"same trajectory in all variants (completion lengths, rewards per step): {same}")
    print("median s/step over all rounds:")
    for line in rounds.median_lines():
        print(line)
    for v in ("none", "noop"):
        for m in ("wall", "cpu"):
            print(rounds.ratio_line(v, "plain", m))
    print(
        f"load average (1/5/15 min) on {os.cpu_count()} CPUs: before {' '.join(f'{x:.2f}' for x in load_before)}, "
        f"after {' '.join(f'{x:.2f}' for x in load_after)}"
    )
    print(f"overhead_ratio: {rounds.ratio('noop', 'plain'):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
