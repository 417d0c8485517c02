"""SPEAR on the built-in task: replayed successes reach the loss through the imitation term, on replayed rows only.

A short run of configs/recipes/spear-cpu.yaml (GRPO, a pool of 32 problems that recur every 4 steps). A monitor
reads each rollout spear generates (every replayed row: does it reach its answer, was it a row of positive
advantage of the same prompt at an earlier step, is its recalibrated advantage above 0), each advantage stage
(the rows of positive advantage, which the buffer takes) and each loss term: the gradient of spear's term with
respect to the policy's token log-probs, row by row (non-zero on replayed rows, zero on every other). The log
gives the schedules: the tool reward's weight `reward_weight/spear` and the imitation coefficient. Against plain
GRPO on the same pool at equal steps: greedy accuracy on the pool after, and the share of zero-spread groups.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/spear/benchmarks/mechanism.py --seeds 0 1 2 --steps 24
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import recipe_config
from stackrl_spear.plugin import ADVANTAGE, REPLAYED

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "spear-cpu.yaml"


def _key(prompt_ids, completion_ids) -> tuple:
    return tuple(prompt_ids), tuple(completion_ids)


class Replays:
    """A run's monitor: what spear replays, what it stores, and where its loss term's gradient goes."""

    def __init__(self):
        self.positive: set[tuple] = set()  # (prompt, completion) of rows of positive advantage, up to now
        self.replayed: list[dict] = []  # per replayed row: success, an earlier positive row, recalibrated adv > 0
        self.losses: list[dict] = []  # per loss term with a gradient: replayed rows' and other rows' gradient
        self.rows = 0

    def __call__(self, hook, plugin, kwargs, result):
        if plugin != "spear":
            return
        ctx = kwargs["ctx"]
        if hook == "generate_rollout" and result is not None:
            answers = ctx.rollout_columns["answer"]
            earlier = set(self.positive)
            self.rows += len(result.completion_ids)
            for i, marked in enumerate(result.columns[REPLAYED]):
                if marked:
                    text = ctx.tokenizer.decode(result.completion_ids[i], skip_special_tokens=True)
                    self.replayed.append({
                        "success": bool(exact_match(text, answers[i])),
                        "earlier_positive": _key(result.prompt_ids[i], result.completion_ids[i]) in earlier,
                        "advantage_positive": result.columns[ADVANTAGE][i] > 0})
        elif hook == "reshape_advantages" and ctx.training:
            rollout, advantages = ctx.rollout, kwargs["advantages"]
            per_row = advantages if advantages.dim() == 1 else advantages.mean(1)
            marked = rollout.columns.get(REPLAYED, [False] * len(rollout))
            for i in range(len(rollout)):
                if not marked[i] and per_row[i] > 0:
                    self.positive.add(_key(rollout.prompt_ids[i], rollout.completion_ids[i]))
        elif hook == "loss_term" and result is not None and result.requires_grad:
            (grad,) = torch.autograd.grad(result, ctx.policy_logps, retain_graph=True, allow_unused=True)
            if grad is None:
                return
            marked = torch.tensor(ctx.rollout.columns[REPLAYED], dtype=torch.bool)
            size = grad.abs().sum(1)
            self.losses.append({"replayed": float(size[marked].min()) if marked.any() else None,
                                "other": float(size[~marked].max()) if (~marked).any() else 0.0})

    def figures(self) -> dict[str, float]:
        return {"replayed": len(self.replayed) / max(1, self.rows),
                "replayed_success": sum(r["success"] for r in self.replayed) / max(1, len(self.replayed))}


def run(seed: int, steps: int, method: str = "spear", overrides=()) -> tuple[dict, Replays, list[dict]]:
    """The run's figures (greedy accuracy on the pool after, the share of zero-spread groups), its monitor and its
    log history."""
    replays = Replays()
    with one_thread(), tempfile.TemporaryDirectory() as out:
        ours = method == "spear"
        config = recipe_config(RECIPE, plugins=ours, seed=seed, steps=steps, output_dir=out,
                               overrides=overrides if ours else [o for o in overrides if not o.startswith("spear.")])
        trainer = build_trainer(config, monitor=replays)
        trainer.train()
        rows = trainer.train_dataset
        greedy = trainer._shared_policy.generate(list(rows["prompt"]), do_sample=False)
        accuracy = sum(exact_match(g.text, a) for g, a in zip(greedy, rows["answer"])) / len(rows)
    history = trainer.state.log_history
    zero = [entry["frac_reward_zero_std"] for entry in history if "frac_reward_zero_std" in entry]
    figures = {"accuracy": accuracy, "zero_spread": sum(zero) / len(zero)}
    return ({**figures, **replays.figures()} if ours else figures), replays, history


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=24, methods=("spear", "grpo")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(seed, args.steps, method, args.overrides)[0],
            figures=("accuracy", "zero_spread", "replayed", "replayed_success"))


if __name__ == "__main__":
    main()
