"""LANPO's contexts on the built-in task: which stored trial each row is shown, that no reward reaches it, and what
the rows sampled from them score.

A short run of configs/recipes/lanpo-cpu.yaml (stackrl/arith-skills, 4 problems a step from a pool of 16, groups of
4: one row reflects on the question's own newest trial, one reads the trial of the most related other question, two
see the question alone). A monitor checks every batch of contexts the plugin writes against the pool as it stood:

- reflection: the row shows the newest trial(s) of its own question, in the retry format, and every row meant to
  reflect whose question has a trial does;
- abstraction: the row shows the stored trial of another question with the highest ROUGE-L against its question;
- reward-agnostic: a copy of the plugin whose pool holds the same trials with every reward flipped (1 - r) writes
  the same contexts;
- the update: each row is trained on the context it was sampled from, and its reward is its own answer's.

Against plain GRPO at equal steps: the share of groups with no reward spread TRL logs and greedy zero-shot accuracy
on 64 held-out problems after (the paper's claim); for LANPO the accuracy of the rows by mode, and of the
reflection rows whose shown trial was wrong (fix) or right (keep), read from the rewards the pool kept (the plugin
never reads them).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/lanpo/benchmarks/mechanism.py --seeds 0 1 2 --steps 16
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from stackrl.blocks.selfinstruct import rouge_l
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.tasks import retry_prompt
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import greedy_accuracy, recipe_config
from stackrl_lanpo.contexts import ABSTRACT, PLAIN, REFLECT, row_modes

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "lanpo-cpu.yaml"


class Contexts:
    """A run's monitor: every batch of contexts lanpo writes, checked against its pool; every scored rollout."""

    def __init__(self):
        self.plugin = None  # set once the trainer is built
        self.faults: list[str] = []  # what broke a rule, one line each
        self.counts = Counter()  # rows by mode; reflection rows after a wrong/right trial; their successes
        self.pending = None  # the last batch: each row's (mode, context, the trial's reward or None)

    def __call__(self, hook, plugin, kwargs, result):
        if plugin != "lanpo":
            return
        if hook == "transform_prompts" and result is not None:
            self.check(kwargs["prompts"], result, kwargs["ctx"])
        elif hook == "post_step" and self.pending is not None:
            self.scored(kwargs["ctx"])

    def fault(self, text: str):
        if len(self.faults) < 20:
            self.faults.append(text)

    def check(self, prompts, contexts, ctx):
        plugin, size = self.plugin, ctx.group_size
        records = list(plugin.library)
        modes = row_modes(size, plugin.config.reflect_share, plugin.config.abstract_share)
        self.pending = []
        for group in range(len(prompts) // size):
            question = prompts[group * size]
            own = [r for r in records if r.prompt == question][::-1]  # newest first
            others = [r for r in records if r.prompt != question]
            best = max((rouge_l(question, r.prompt) for r in others), default=0.0)
            for j, planned in enumerate(modes):
                row, context = group * size + j, contexts[group * size + j]
                mode, keys = plugin.shown[row]
                trial = plugin.library.get(keys[0]) if keys else None
                if planned == REFLECT and own:
                    want = own[j % len(own)]
                    if mode != REFLECT or trial is not want or context != retry_prompt(question, want.completion):
                        self.fault(f"row {row}: reflection not on its question's newest trial: {context!r}")
                elif planned == ABSTRACT and best > 0:
                    if (mode != ABSTRACT or trial.prompt == question or rouge_l(question, trial.prompt) < best
                            or context != f"{trial.prompt}{trial.completion}\n\n{question}"):
                        self.fault(f"row {row}: abstraction not on the most related question's trial: {context!r}")
                elif context != question:
                    self.fault(f"row {row}: a {planned} row with nothing to show is not the question alone")
                reward = trial.rewards.get("exact_match") if trial is not None and mode == REFLECT else None
                self.pending.append((mode, context, reward))
        flipped = type(plugin)(plugin.config)
        state = plugin.library.state_dict()
        for record in state["records"]:
            record[7] = {name: 1.0 - value for name, value in record[7].items()}
        flipped.library.load_state_dict(state)
        quiet = SimpleNamespace(training=True, group_size=size, tokenizer=ctx.tokenizer, train_on_original=False,
                                log=lambda *a: None, acted=lambda *a, **k: None, generate=ctx.generate)
        if flipped.transform_prompts(list(prompts), quiet) != list(contexts):
            self.fault("the same trials with flipped rewards give other contexts: a reward reached a context")

    def scored(self, ctx):
        rollout, decode = ctx.rollout, ctx.tokenizer.decode
        answers = rollout.columns["answer"]
        for row, (mode, context, shown_reward) in enumerate(self.pending):
            if decode(rollout.prompt_ids[row], skip_special_tokens=True) != context:
                self.fault(f"row {row}: trained on other tokens than the context it was sampled from")
            right = exact_match(rollout.completions[row], answers[row])
            if float(rollout.rewards["exact_match"][row]) != right:
                self.fault(f"row {row}: its reward is not its own answer's")
            self.counts[mode] += 1
            self.counts[f"{mode}_right"] += right
            if shown_reward is not None:
                after = "keep" if shown_reward == 1.0 else "fix"
                self.counts[after] += 1
                self.counts[f"{after}_right"] += right
        self.pending = None

    def figures(self) -> dict[str, float]:
        def share(key):
            return self.counts[f"{key}_right"] / self.counts[key] if self.counts[key] else float("nan")

        total = sum(self.counts[m] for m in (REFLECT, ABSTRACT, PLAIN))
        return {"reflected": self.counts[REFLECT] / total, "abstracted": self.counts[ABSTRACT] / total,
                **{f"{key}_accuracy": share(key) for key in (REFLECT, ABSTRACT, PLAIN, "fix", "keep")},
                "faults": len(self.faults)}


def run(seed: int, steps: int, method: str = "lanpo", overrides=(), eval_size: int = 0) -> tuple[dict, Contexts]:
    """The run's figures (the share of groups with no reward spread, greedy accuracy on ``eval_size`` held-out
    problems after) and, for lanpo, its monitor with the rows' figures and any rule it saw broken."""
    contexts = Contexts()
    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=method == "lanpo", seed=seed, steps=steps, output_dir=out,
                               overrides=[o for o in overrides if method == "lanpo" or not o.startswith("lanpo.")])
        trainer = build_trainer(config, monitor=contexts)
        contexts.plugin = trainer.plugins.plugins.get("lanpo")
        trainer.train()
        accuracy = greedy_accuracy(trainer, eval_size, seed=1000 + seed) if eval_size else float("nan")
    zero = [entry["frac_reward_zero_std"] for entry in trainer.state.log_history if "frac_reward_zero_std" in entry]
    figures = {"zero_spread": sum(zero) / len(zero), "accuracy": accuracy}
    return ({**figures, **contexts.figures()} if method == "lanpo" else figures), contexts


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=16, eval_size=64, methods=("lanpo", "grpo")).parse_args()
    compare(args, args.methods,
            lambda method, seed, folder: run(seed, args.steps, method, args.overrides, args.eval_size)[0],
            figures=("zero_spread", "accuracy", "reflected", "abstracted", "reflect_accuracy", "abstract_accuracy",
                     "plain_accuracy", "fix_accuracy", "keep_accuracy", "faults"))


if __name__ == "__main__":
    main()
