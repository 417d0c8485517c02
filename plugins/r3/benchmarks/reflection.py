"""R^3's self-reflection on the built-in task: a persistent failure, shown its past failure, is fixed more often.

A short run of configs/recipes/r3-cpu.yaml on ``stackrl/arith-skills`` (the built-in model taught the retry format)
with ``r3.reflect=true`` and the ranking reward off. A monitor reads every rollout the plugin generates. For each
reflected row: whether it reaches its group's answer, whether the attempt it was shown is a failure of the same
prompt sampled at an earlier step, and whether its group's own samples all failed. For comparison, at the same step
and with the same policy, ``resamples`` plain answers to each reflected group's question: the share of them that are
right is what a fresh sample would have fixed.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/r3/benchmarks/reflection.py --seeds 0 1 2 --steps 8
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from stackrl.blocks.insertion import reaches
from stackrl.run import build_trainer
from stackrl.testing.heldout import recipe_config
from stackrl_r3.plugin import REFLECTED, REPLAYED

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "r3-cpu.yaml"
SETTINGS = ("model.name_or_path=stackrl/arith-skills", "r3.reflect=true", "r3.rank_scale=0")


class Reflections:
    """A run's monitor: each reflected row r3 generates, and plain resamples of its question beside it."""

    def __init__(self, resamples: int):
        self.resamples = resamples
        self.reflected: list[dict] = []  # per reflected row: fixed, shown an earlier same-prompt failure, group failed
        self.resampled: list[bool] = []  # per plain resample of a reflected group's question: right
        self.failures: set[tuple[tuple[int, ...], str]] = set()  # (prompt, completion text) seen to fail

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "generate_rollout" or plugin != "r3" or result is None:
            return
        ctx, prompts, size = kwargs["ctx"], kwargs["prompts"], kwargs["ctx"].group_size
        answers = ctx.rollout_columns["answer"]
        texts = [ctx.tokenizer.decode(ids, skip_special_tokens=True) for ids in result.completion_ids]
        shown, replayed = result.columns[REFLECTED], result.columns[REPLAYED]
        earlier = set(self.failures)
        reflected = [i for i, attempt in enumerate(shown) if attempt is not None]
        for i in reflected:
            group = range(i - i % size, i - i % size + size)
            self.reflected.append({
                "fixed": reaches(texts[i], answers[i]),
                "earlier_same_prompt_failure": (tuple(result.prompt_ids[i]), shown[i]) in earlier,
                "group_failed": not any(reaches(texts[j], answers[j]) for j in group if j != i),
            })
        plain = ctx.generate([prompts[i] for i in reflected for _ in range(self.resamples)])
        self.resampled += [reaches(g.text, answers[i]) for g, i in zip(plain, [i for i in reflected
                                                                               for _ in range(self.resamples)])]
        for i, text in enumerate(texts):
            if shown[i] is None and not replayed[i] and not reaches(text, answers[i]):
                self.failures.add((tuple(result.prompt_ids[i]), text))

    def figures(self) -> dict[str, float]:
        fixed = [row["fixed"] for row in self.reflected]
        return {"reflected": len(fixed), "reflection_fixed": sum(fixed) / max(1, len(fixed)),
                "resample_fixed": sum(self.resampled) / max(1, len(self.resampled))}


def run(seed: int, steps: int, overrides=(), resamples: int = 4) -> tuple[dict, Reflections]:
    """The run's figures and its monitor."""
    reflections = Reflections(resamples)
    with tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=out,
                               overrides=[*SETTINGS, *overrides])
        build_trainer(config, monitor=reflections).train()
    return reflections.figures(), reflections


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=24).parse_args()
    compare(args, ("r3",), lambda method, seed, folder: run(seed, args.steps, args.overrides)[0],
            figures=("reflected", "reflection_fixed", "resample_fixed"))


if __name__ == "__main__":
    main()
