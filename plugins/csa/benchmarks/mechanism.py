"""CSA's mechanism on the built-in task: delegating earns more than attempting where the model fails, less where it
solves, and training on that makes the delegation likelier after hard questions than after easy ones.

On held-out problems of the category arith-tiny mostly solves (2 steps, 1-digit) and the one it mostly fails
(4 steps, 2-digit), before training: groups of the policy's sampled attempts with the written delegation in the last
row, scored by the plugin's reward hook (its probes sampled by the policy), and GRPO's advantage of the delegation
in each category. Then a short run of configs/recipes/csa-cpu.yaml, and after it the mean per-token log-probability
of the written delegation after each held-out question, and the share of greedy replies that delegate, by
category. With `--methods grpo`, plain GRPO (the outcome reward, no delegation) on the same pool at equal steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/csa/benchmarks/mechanism.py --seeds 0 1 2 --steps 24 --methods csa grpo
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl.context import RewardContext, Rollout
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import CATEGORIES, make_dataset
from stackrl.testing.heldout import grpo_advantages, recipe_config
from stackrl_csa.decisions import delegates

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "csa-cpu.yaml"
EASY, HARD = CATEGORIES[0], CATEGORIES[-1]
PHRASE, WRITTEN = "The answer is ?", "The answer is ?."  # the recipe's delegation and written delegation


def heldout(problems: int, seed: int) -> dict[str, list[dict]]:
    """``problems`` held-out problems of each of the two categories."""
    rows = make_dataset("test", size=problems * 2, seed=seed, categories=[EASY, HARD])
    return {category: [r for r in rows if r["category"] == category] for category in (EASY, HARD)}


def delegation_advantages(trainer, plugin, problems: dict[str, list[dict]], group_size: int, seed: int) -> dict:
    """Per category: GRPO's mean advantage of a delegation put in the last row of each group of sampled attempts,
    and its reward minus the mean reward of the group's attempts, under the plugin's reward hook."""
    encode = lambda text: trainer.processing_class(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    rows = [row for category in (EASY, HARD) for row in problems[category]]
    prompts = [row["question"] for row in rows for _ in range(group_size)]
    torch.manual_seed(seed)
    generations = trainer._shared_policy.generate(prompts, do_sample=True, temperature=1.0)
    completions = [g.text for g in generations]
    for last in range(group_size - 1, len(completions), group_size):
        completions[last] = WRITTEN
    rollout = Rollout(
        prompts=prompts, completions=completions, prompt_ids=[g.prompt_ids for g in generations],
        completion_ids=[encode(text) for text in completions], group_size=group_size,
        columns={"answer": [row["answer"] for row in rows for _ in range(group_size)]}, rewards={},
    )
    ctx = RewardContext(step=0, tokenizer=trainer.processing_class, policy=trainer._shared_policy,
                        _log=lambda *_: None, _plugin=plugin.name, rollout=rollout)
    rewards = torch.tensor([float("nan") if r is None else r for r in plugin.reward(ctx)]).view(-1, group_size)
    advantages = grpo_advantages(rewards.flatten(), group_size).view(-1, group_size)
    out, count = {}, len(problems[EASY])
    for name, groups in (("easy", slice(0, count)), ("hard", slice(count, None))):
        out[f"advantage_{name}"] = advantages[groups, -1].mean().item()
        out[f"gap_{name}"] = (rewards[groups, -1] - rewards[groups, :-1].mean(1)).mean().item()
    return out


def delegation_figures(trainer, problems: dict[str, list[dict]]) -> dict:
    """Per category: the mean per-token log-probability of the written delegation after the question, the share of
    greedy replies that delegate, greedy accuracy, and the share of 4 replies a question sampled at temperature 1
    that delegate."""
    policy, eos = trainer._shared_policy, trainer._shared_policy.eos_token_ids[:1]
    ids = trainer.processing_class(WRITTEN, add_special_tokens=False)["input_ids"] + list(eos)
    out = {}
    for name, category in (("easy", EASY), ("hard", HARD)):
        questions = [row["question"] for row in problems[category]]
        with torch.no_grad():
            scores = policy.score(questions, [ids] * len(questions))
        out[f"logp_{name}"] = ((scores.logprobs * scores.mask).sum(1) / scores.mask.sum(1)).mean().item()
        greedy = policy.generate(questions, do_sample=False)
        out[f"delegate_{name}"] = sum(delegates(g.text, PHRASE) for g in greedy) / len(greedy)
        out[f"accuracy_{name}"] = sum(exact_match(g.text, row["answer"])
                                      for g, row in zip(greedy, problems[category])) / len(greedy)
        sampled = policy.generate([q for q in questions for _ in range(4)], do_sample=True, temperature=1.0)
        out[f"sampled_delegate_{name}"] = sum(delegates(g.text, PHRASE) for g in sampled) / len(sampled)
    return out


def run(seed: int, steps: int, method: str = "csa", problems: int = 8, overrides=()) -> tuple[dict, dict, dict]:
    """``(advantages, before, after)``: the delegation's advantages before training (empty for ``method`` "grpo":
    the recipe without its plugin, the outcome reward weighted 1), and :func:`delegation_figures` before and after
    ``steps`` steps of the recipe, on ``problems`` held-out problems of each category."""
    if method != "csa":
        overrides = [*(o for o in overrides if not o.startswith("csa.")), "rewards.exact_match=1.0"]
    with tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=method == "csa", seed=seed, steps=steps, output_dir=out,
                               overrides=overrides)
        trainer = build_trainer(config)
        shown = heldout(problems, seed)
        plugin = trainer.plugins.plugins.get("csa")
        advantages = {} if plugin is None else delegation_advantages(trainer, plugin, shown, 4, seed)
        before = delegation_figures(trainer, shown)
        if steps:
            trainer.train()
        after = delegation_figures(trainer, shown)
    return advantages, before, after


def main():
    from stackrl.testing.benchmark import arguments, changes, compare

    args = arguments(__doc__.splitlines()[0], steps=24, methods=("csa", "grpo")).parse_args()

    def one(method, seed, folder):
        advantages, before, after = run(seed, args.steps, method, overrides=args.overrides)
        return {**advantages, **changes(before, after)}

    compare(args, args.methods, one, figures=("advantage_easy", "advantage_hard", "logp_easy", "logp_hard",
                                              "delegate_easy", "delegate_hard", "sampled_delegate_easy",
                                              "sampled_delegate_hard", "accuracy_easy", "accuracy_hard"),
            number_format=".3f")


if __name__ == "__main__":
    main()
