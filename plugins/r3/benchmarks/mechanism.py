"""R^3's replay on the built-in task: stored same-prompt successes give all-fail groups a reward spread.

A short run of configs/recipes/r3-cpu.yaml (GRPO, a pool of 32 problems that recur every 4 steps). A monitor reads
every rollout the plugin generates: the groups with a reward spread as sampled and after the replay, and each
replayed row: whether it reaches its group's answer, whether it is a success of the same prompt sampled at an
earlier step, and whether its group's own samples all failed. Against plain GRPO on the same pool at equal steps:
the share of groups with a zero reward spread TRL logs, and greedy accuracy on the pool after.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/r3/benchmarks/mechanism.py --seeds 0 1 2 --steps 24
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from stackrl.blocks.insertion import reaches
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.testing.heldout import recipe_config
from stackrl_r3.plugin import REPLAYED

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "r3-cpu.yaml"


class Replays:
    """A run's monitor: each rollout r3 generates, read group by group."""

    def __init__(self):
        self.groups = 0
        self.spread_sampled = 0  # groups whose own samples disagree (a replayed group's all failed)
        self.spread_replayed = 0  # groups that disagree once the replayed rows are in
        self.replayed: list[dict] = []  # per replayed row: success, same prompt's earlier success, group failed
        self.successes: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()  # (prompt, completion) seen to succeed

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "generate_rollout" or plugin != "r3" or result is None:
            return
        ctx, size = kwargs["ctx"], kwargs["ctx"].group_size
        answers = ctx.rollout_columns["answer"]
        texts = [ctx.tokenizer.decode(ids, skip_special_tokens=True) for ids in result.completion_ids]
        marked = result.columns[REPLAYED]
        right = [reaches(t, a) for t, a in zip(texts, answers)]
        earlier = set(self.successes)
        for start in range(0, len(texts), size):
            rows = range(start, start + size)
            sampled = [right[i] for i in rows if not marked[i]]
            final = [right[i] for i in rows]
            self.groups += 1
            self.spread_sampled += any(marked[i] for i in rows) is False and 0 < sum(sampled) < len(sampled)
            self.spread_replayed += 0 < sum(final) < len(final)
            for i in rows:
                key = (tuple(result.prompt_ids[i]), tuple(result.completion_ids[i]))
                if marked[i]:
                    self.replayed.append({"success": bool(exact_match(texts[i], answers[i])),
                                          "earlier_same_prompt": key in earlier, "group_failed": not any(sampled)})
                elif right[i]:
                    self.successes.add(key)

    def figures(self) -> dict[str, float]:
        return {"spread_sampled": self.spread_sampled / self.groups, "spread": self.spread_replayed / self.groups,
                "replayed": len(self.replayed) / self.groups}


def run(seed: int, steps: int, method: str = "r3", overrides=()) -> tuple[dict, Replays]:
    """The run's figures (the share of groups with a zero reward spread TRL logged, greedy accuracy on the pool
    after) and, for r3, its monitor."""
    replays = Replays()
    with tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=method == "r3", seed=seed, steps=steps, output_dir=out,
                               overrides=overrides if method == "r3" else [o for o in overrides if not o.startswith("r3.")])
        trainer = build_trainer(config, monitor=replays)
        trainer.train()
        rows = trainer.train_dataset
        greedy = trainer._shared_policy.generate(list(rows["prompt"]), do_sample=False)
        accuracy = sum(exact_match(g.text, a) for g, a in zip(greedy, rows["answer"])) / len(rows)
    zero = [entry["frac_reward_zero_std"] for entry in trainer.state.log_history if "frac_reward_zero_std" in entry]
    figures = {"zero_spread": sum(zero) / len(zero), "accuracy": accuracy}
    return ({**figures, **replays.figures()} if method == "r3" else figures), replays


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=24, methods=("r3", "grpo")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(seed, args.steps, method, args.overrides)[0],
            figures=("zero_spread", "accuracy", "spread_sampled", "spread", "replayed"))


if __name__ == "__main__":
    main()
