"""H²SD's mechanism on the built-in task: failed rollouts come closer to the hinted teacher; the success branch.

Held-out problems, four completions each sampled once by the initial policy. Before and after a short run of
configs/recipes/h2sd-cpu.yaml, on those same completions: the mean per-token reverse KL from the student to the
policy shown the worked solution, on the wrong ones (the failure branch's loss). Before the run: the success
branch's teacher (the policy shown the correct rollout itself) and its mean log-prob of the rollout's tokens,
which is near 0 on the built-in model: it copies what it is shown. Then held-out greedy accuracy against plain
GRPO with the same steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/h2sd/benchmarks/mechanism.py --seeds 2 --steps 20
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from stackrl.config import load_config
from stackrl.run import build_trainer
from stackrl.testing.heldout import (
    advantage_context,
    greedy_accuracy,
    heldout_rollout,
    train_and_measure,
    without_plugins,
)
from stackrl.tokensignals import SignalContext, TokenSignals

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "h2sd-cpu.yaml"


def failed_divergence(trainer, plugin, rollout) -> float:
    wrong = (rollout.rewards["exact_match"] < 1).nonzero().flatten().tolist()
    with torch.no_grad():
        return plugin.failure_divergence(trainer._shared_policy, rollout.select(wrong), grad=False).mean().item()


def run(seed: int, steps: int, problems: int, heldout: int) -> dict[str, float]:
    """The failure branch's divergence before and after ``steps`` steps, the success teacher's mean log-prob of
    correct rollouts, and held-out greedy accuracy after the run, of H²SD and of plain GRPO."""
    with tempfile.TemporaryDirectory() as out:
        config = load_config([RECIPE], [f"trainer.seed={seed}", f"trainer.max_steps={steps}", f"output_dir={out}"])
        trainer = build_trainer(config)
        plugin = trainer.plugins.plugins["h2sd"]
        rollout = heldout_rollout(trainer, problems, seed=1000 + seed)
        signals = TokenSignals.of(advantage_context(trainer, rollout, "h2sd"))
        correct = (rollout.rewards["exact_match"] == 1).unsqueeze(1) & signals.mask.bool()
        hindsight = signals.logprobs(SignalContext("hindsight", plugin.config.success_template))
        before = failed_divergence(trainer, plugin, rollout)
        trainer.train()
        after = failed_divergence(trainer, plugin, rollout)
        accuracy = greedy_accuracy(trainer, heldout, seed=1000 + seed)
    with without_plugins(RECIPE) as plain:
        grpo = train_and_measure([plain], steps=steps, heldout=heldout, seed=seed)
    return {"before": before, "after": after, "hindsight_logprob": hindsight[correct].mean().item(),
            "accuracy": accuracy, "grpo": grpo}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--problems", type=int, default=32)
    parser.add_argument("--heldout", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for seed in range(args.seeds):
        found = run(seed, args.steps, args.problems, args.heldout)
        print(
            f"seed {seed}: reverse KL on failed rollouts {found['before']:.4f} -> {found['after']:.4f}; success "
            f"teacher's mean log-prob of correct rollouts {found['hindsight_logprob']:.4f}   greedy accuracy after "
            f"{args.steps} steps: h2sd {found['accuracy']:.3f}, grpo {found['grpo']:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
