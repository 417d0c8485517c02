"""The environment runner's own cost per turn against the generation it wraps, measured in one run.

The ``env`` plugin trains a few steps in the bandit (several turns an episode, an observation injected after each
action); every ``ctx.generate`` the runner makes is timed, and so is each whole rollout. The runner's overhead is
what a rollout spends outside generation: parsing, the environments, tokenizing and injecting observations, packing
the rows. It prints the totals, the turns played, and last ``env_overhead_ratio: X`` (time outside generation over
time inside it; goal <= 0.05 on the built-in model).

    python benchmarks/env_runner.py [--model stackrl/arith-tiny] [--steps 4] [--rows 32] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from stackrl.testing.fixtures import train_steps  # noqa: E402
from stackrl.testing.tiny import TINY_TRAINER, build_tiny_model, tiny_config  # noqa: E402

# Several turns per episode whatever the model writes: a turn without a digit is answered "?" and goes on.
ENV = {"environment": "bandit", "kwargs": {"arms": 3, "pulls": 4}, "actions": r"(\d)", "turn_tokens": 8,
       "max_tokens": 96, "max_turns": 6, "observation_tokens": 16, "on_unparsed": "feedback",
       "unparsed_feedback": "?"}
TRAINER = {**TINY_TRAINER, "per_device_train_batch_size": 32, "num_generations": 8, "max_completion_length": 96}


def measure(model: str, steps: int, rows: int, work: Path) -> dict[str, float]:
    """Train ``steps`` steps of ``rows`` rows in the environment; the time of the rollouts, of their generation, and
    the turns."""
    trainer = {**TRAINER, "max_steps": steps, "per_device_train_batch_size": rows}
    config = tiny_config(model, ["env"], tmp_dir=work, output_dir=str(work / "run"), env=ENV, trainer=trainer,
                         data={"source": "arithmetic", "size": 256})
    totals = {"rollout": 0.0, "generate": 0.0, "turns": 0, "calls": 0}
    from stackrl.blocks.env import Runner
    from stackrl.policy import PolicyAccess

    run, generate = Runner.run, PolicyAccess.generate

    def timed_run(self, prompts, ctx):
        start = time.perf_counter()
        samples = run(self, prompts, ctx)
        totals["rollout"] += time.perf_counter() - start
        totals["turns"] += sum(len(moves) for moves in samples.columns["env_moves"]) / len(self.live)
        return samples

    def timed_generate(self, prompts, **kwargs):
        start = time.perf_counter()
        out = generate(self, prompts, **kwargs)
        totals["generate"] += time.perf_counter() - start
        totals["calls"] += 1
        return out

    Runner.run, PolicyAccess.generate = timed_run, timed_generate
    try:
        train_steps(config)
    finally:
        Runner.run, PolicyAccess.generate = run, generate
    return totals


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="stackrl/arith-tiny", help="a model folder or built-in name; 'random': a random tiny model")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rows", type=int, default=32, help="rows a step (groups of 8)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            model = str(build_tiny_model(work / "model")) if args.model == "random" else args.model
            t = measure(model, args.steps, args.rows, work)
    finally:
        torch.set_num_threads(threads)
    outside = t["rollout"] - t["generate"]
    print(f"model {args.model}, {args.steps} steps of {args.rows} rows, {args.threads} thread(s)")
    print(f"rollouts {t['rollout']:.3f} s, generation {t['generate']:.3f} s in {t['calls']} calls, "
          f"{t['turns']:.0f} turns played (episodes' actions)")
    print(f"runner outside generation: {1000 * outside / max(t['turns'], 1):.3f} ms per turn")
    print(f"env_overhead_ratio: {outside / t['generate']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
