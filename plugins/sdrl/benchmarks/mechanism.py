"""SDRL's mechanism on the built-in task: answers after a debate context beat copying a candidate from it.

Trains configs/recipes/sdrl-cpu.yaml (stackrl/arith-skills) and the same recipe without the plugin (plain GRPO), for
the same steps and seeds. With the untrained and each trained model, on held-out problems of the recipe's
categories: sample the recipe's candidates per problem, build the debate context as SDRL does, and sample
``--replies`` answers after it (seeded). Among problems whose context shows at least one right candidate: ``debate``
is the share of right answers, ``copy`` the share a copy of a random shown candidate would get right; ``gain`` is
their difference; ``pick`` and ``keep`` are ``debate`` where the context shows right and wrong candidates
(``split``: the share of such contexts) and where it shows only right ones. ``solve`` is pass@1 from the bare question.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/sdrl/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

from pathlib import Path

import torch

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "sdrl-cpu.yaml"
FIGURES = ("debate", "copy", "gain", "pick", "keep", "split", "solve")


def measure(trainer, settings, categories, size: int, replies: int) -> dict:
    from stackrl.answers import extractor_of
    from stackrl.rewards import OUTCOME_REWARDS
    from stackrl.tasks.arithmetic import make_dataset
    from stackrl_sdrl import debate_prompt, diverse_candidates

    rows = make_dataset("test", size, seed=0, categories=categories)
    questions, answers = list(rows["question"]), list(rows["answer"])
    check, extract, k = OUTCOME_REWARDS[settings.metric], extractor_of(settings, "sdrl"), settings.candidates
    generate = trainer._shared_policy.generate
    torch.manual_seed(1234)
    candidates = generate([q for q in questions for _ in range(k)])
    shown, contexts = [], []
    for i, question in enumerate(questions):
        texts = [c.text for c in candidates[i * k : (i + 1) * k]]
        chosen = [texts[j] for j in diverse_candidates(texts, settings.context_size, extract, settings.math_verify)]
        shown.append([check(t, answers[i]) == 1.0 for t in chosen])
        contexts.append(debate_prompt(question, chosen, settings.candidate_template))
    answered = generate([c for c in contexts for _ in range(replies)])
    right = [sum(check(a.text, answers[i]) for a in answered[i * replies : (i + 1) * replies]) / replies
             for i in range(size)]
    mean = lambda values: sum(values) / max(len(values), 1)  # noqa: E731
    helped = [i for i in range(size) if any(shown[i])]
    split = [i for i in helped if not all(shown[i])]
    copy = mean([sum(shown[i]) / len(shown[i]) for i in helped])
    debate = mean([right[i] for i in helped])
    return {
        "debate": debate, "copy": copy, "gain": debate - copy,
        "pick": mean([right[i] for i in split]), "keep": mean([right[i] for i in helped if all(shown[i])]),
        "split": len(split) / max(len(helped), 1),
        "solve": mean([check(candidates[i * k].text, answers[i]) for i in range(size)]),
    }


def run(method: str, seed: int, steps: int, folder: Path, overrides, size: int, replies: int) -> dict:
    from stackrl.run import build_trainer
    from stackrl.testing.heldout import recipe_config

    sdrl = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=folder / "settings")
    config = recipe_config(RECIPE, plugins=method == "sdrl", seed=seed, steps=steps,
                           output_dir=folder / f"{method}-{seed}", overrides=overrides)  # fmt: skip
    trainer = build_trainer(config)
    if steps:
        trainer.train()
    return measure(trainer, sdrl.plugin_configs["sdrl"], config.host.data.options.get("categories"), size, replies)


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.split("\n\n")[0], steps=30, eval_size=300, methods=("grpo", "sdrl"))
    parser.add_argument("--replies", type=int, default=4, help="answers sampled after each debate context")
    args = parser.parse_args()
    measured = lambda method, seed, steps, folder: (  # noqa: E731
        run(method, seed, steps, folder, args.overrides, args.eval_size, args.replies))
    compare(args, args.methods, lambda method, seed, folder: measured(method, seed, args.steps, folder),
            figures=FIGURES, before=lambda folder: measured("sdrl", 0, 0, folder), number_format="+.3f")


if __name__ == "__main__":
    main()
