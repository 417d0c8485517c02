"""HeRL on the built-in task: failed groups' responses regenerated after their per-line checks, against plain GRPO.

A short run of configs/recipes/herl-cpu.yaml (stackrl/arith-skills, 16 problems x 4 samples a step). A monitor
reads every rollout HeRL generates and the advantages it reshapes: each regenerated response (its check, its guided
regeneration, its bonus as GRPO saw it, its advantage before HeRL's weight) and each guided row (the prompt it is
trained on, its advantage before and after). With ``controls``, each regenerated response's question is also
answered once afresh and once after a bare retry prompt (the response without its check), at the guidance's
temperature, so the guided regeneration's success can be set beside what the policy does without the rubric.
Against plain GRPO on the same recipe at equal steps: greedy accuracy on held-out problems of the recipe's
categories, and the share of groups with a zero reward spread TRL logs.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/herl/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml

from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.tasks import retry_prompt
from stackrl.tasks.arithmetic import make_dataset
from stackrl.testing.heldout import recipe_config
from stackrl_herl.plugin import BONUS, CHECK, GUIDED, GUIDED_REPLY

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "herl-cpu.yaml"


class Guidance:
    """A run's monitor: what HeRL regenerated and inserted at each step, read through the real trainer's hooks."""

    def __init__(self, controls: bool = False):
        self.controls = controls
        self.groups = 0
        self.regenerated: list[dict] = []  # per regenerated response
        self.guided: list[dict] = []  # per guided row
        self.resample_right: list[float] = []
        self.retry_right: list[float] = []
        self._pending = None

    def __call__(self, hook, plugin, kwargs, result):
        if plugin != "herl":
            return
        if hook == "generate_rollout" and result is not None:
            self._rollout(kwargs["prompts"], kwargs["ctx"], result)
        elif hook == "reshape_advantages":
            self._advantages(kwargs["advantages"], kwargs["ctx"], result)

    def _rollout(self, prompts, ctx, result):
        size, decode = ctx.group_size, ctx.tokenizer.decode
        texts = [decode(ids, skip_special_tokens=True) for ids in result.completion_ids]
        answers = ctx.rollout_columns["answer"]
        self.groups += len(prompts) // size
        rows = [i for i, check in enumerate(result.columns[CHECK]) if check is not None]
        for i in rows:
            group = range(i - i % size, i - i % size + size)
            self.regenerated.append({
                "step": ctx.step, "row": i, "question": prompts[i], "response": texts[i], "answer": answers[i],
                "check": result.columns[CHECK][i], "reply": result.columns[GUIDED_REPLY][i],
                "group_had_a_right_sample": any(exact_match(texts[j], answers[j]) for j in group
                                                if not result.columns[GUIDED][j]),
            })
        for i, guided in enumerate(result.columns[GUIDED]):
            if guided:
                self.guided.append({"step": ctx.step, "row": i, "question": prompts[i], "completion": texts[i],
                                    "answer": answers[i], "trained_on": decode(result.prompt_ids[i])})
        if self.controls and rows:
            temperature = {"temperature": 0.3}
            fresh = ctx.generate([prompts[i] for i in rows], **temperature)
            bare = ctx.generate([retry_prompt(prompts[i], texts[i].strip()) for i in rows], **temperature)
            self.resample_right += [exact_match(g.text, answers[i]) for g, i in zip(fresh, rows)]
            self.retry_right += [exact_match(g.text, answers[i]) for g, i in zip(bare, rows)]
        self._pending = (ctx.step, len(prompts))

    def _advantages(self, advantages, ctx, result):
        rollout = ctx.rollout
        if GUIDED not in rollout.columns:
            return
        step = self._pending[0] if self._pending else None
        after = advantages if result is None else result
        for record in self.regenerated:
            if record["step"] == step:
                record["bonus"] = rollout.rewards["herl"][record["row"]].item()
                record["advantage"] = advantages[record["row"]].item()
        for record in self.guided:
            if record["step"] == step:
                record["advantage_before"] = advantages[record["row"]].item()
                record["advantage"] = after[record["row"]].item()

    def figures(self) -> dict[str, float]:
        replies = [exact_match(r["reply"], r["answer"]) for r in self.regenerated]
        out = {"guided_groups": len({(r["step"], r["row"] // 4) for r in self.regenerated}) / max(1, self.groups),
               "guided_right": sum(replies) / max(1, len(replies)),
               "inserted_right": sum(exact_match(g["completion"], g["answer"]) for g in self.guided) / max(1, len(self.guided))}
        if self.resample_right:
            out["resample_right"] = sum(self.resample_right) / len(self.resample_right)
            out["retry_right"] = sum(self.retry_right) / len(self.retry_right)
        return out


def heldout_accuracy(trainer, size: int, seed: int) -> float:
    """Greedy exact-match accuracy on ``size`` held-out problems of the recipe's categories."""
    categories = yaml.safe_load(RECIPE.read_text())["data"]["options"]["categories"]
    rows = make_dataset(split="test", size=size, seed=seed, categories=categories)
    greedy = trainer._shared_policy.generate(list(rows["question"]), do_sample=False)
    return sum(exact_match(g.text, a) for g, a in zip(greedy, rows["answer"])) / size


def run(seed: int, steps: int, method: str = "herl", overrides=(), *, controls: bool = False,
        eval_size: int = 200) -> tuple[dict, Guidance]:
    """The run's figures (held-out greedy accuracy, the share of groups with a zero reward spread TRL logged and,
    for herl, its monitor's) and, for herl, its monitor."""
    guidance = Guidance(controls)
    with tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=method == "herl", seed=seed, steps=steps, output_dir=out,
                               overrides=[*overrides, "trainer.disable_tqdm=true"])
        trainer = build_trainer(config, monitor=guidance)
        trainer.train()
        accuracy = heldout_accuracy(trainer, eval_size, seed=1000 + seed) if eval_size else float("nan")
    zero = [entry["frac_reward_zero_std"] for entry in trainer.state.log_history if "frac_reward_zero_std" in entry]
    figures = {"accuracy": accuracy, "zero_spread": sum(zero) / len(zero)}
    return ({**figures, **guidance.figures()} if method == "herl" else figures), guidance


def main():
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.splitlines()[0], steps=20, eval_size=200, methods=("herl", "grpo"))
    args = parser.parse_args()
    compare(args, args.methods,
            lambda method, seed, folder: run(seed, args.steps, method, args.overrides, controls=method == "herl",
                                             eval_size=args.eval_size)[0],
            figures=("accuracy", "zero_spread", "guided_groups", "guided_right", "resample_right", "retry_right",
                     "inserted_right"))


if __name__ == "__main__":
    main()
