"""H²SD's mechanism on the built-in task: failed rollouts come closer to the hinted teacher; the success branch.

Held-out problems, four completions each sampled once by the initial policy. Before and after a short run of
configs/recipes/h2sd-cpu.yaml, on those same completions: the mean per-token reverse KL from the student to the
policy shown the worked solution, on the wrong ones (the failure branch's loss). Before the run: the success
branch's teacher (the policy shown the correct rollout itself) and its mean log-prob of the rollout's tokens,
which is near 0 on the built-in model: it copies what it is shown. Then held-out greedy accuracy against plain
GRPO with the same steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/h2sd/benchmarks/mechanism.py --seeds 0 1 --steps 20
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl.blocks.tokensignals import SignalContext, TokenSignals
from stackrl.config import load_config
from stackrl.run import build_trainer
from stackrl.testing.heldout import (
    advantage_context,
    greedy_accuracy,
    heldout_rollout,
    train_and_measure,
    without_plugins,
)

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "h2sd-cpu.yaml"


def failed_divergence(trainer, plugin, rollout) -> float:
    wrong = (rollout.rewards["exact_match"] < 1).nonzero().flatten().tolist()
    with torch.no_grad():
        return plugin.failure_divergence(trainer._shared_policy, rollout.select(wrong), grad=False).mean().item()


def run(seed: int, steps: int, problems: int, heldout: int, overrides=()) -> dict[str, float]:
    """The failure branch's divergence before and after ``steps`` steps, the success teacher's mean log-prob of
    correct rollouts, and held-out greedy accuracy after the run, of H²SD and of plain GRPO."""
    with tempfile.TemporaryDirectory() as out:
        config = load_config([RECIPE], [f"trainer.seed={seed}", f"trainer.max_steps={steps}", f"output_dir={out}",
                                        *overrides])
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
        grpo = train_and_measure([plain], overrides, steps=steps, heldout=heldout, seed=seed)
    return {"before": before, "after": after, "hindsight_logprob": hindsight[correct].mean().item(),
            "accuracy": accuracy, "grpo": grpo}


def main():
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.splitlines()[0], steps=30, eval_size=128)
    parser.add_argument("--problems", type=int, default=32, help="held-out problems diagnosed")
    args = parser.parse_args()
    # before, after: the failure branch's reverse KL on failed rollouts; accuracy, grpo: greedy, after the runs
    compare(args, ("h2sd",), lambda method, seed, folder: run(seed, args.steps, args.problems, args.eval_size,
                                                              args.overrides),
            figures=("before", "after", "hindsight_logprob", "accuracy", "grpo"), number_format=".4f")


if __name__ == "__main__":
    main()
