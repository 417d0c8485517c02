"""HILA on the built-in task: the cost of deferring moves how often the policy defers, and the expert's solutions of
the deferred problems (the outer loop) against plain GRPO's held-out pass@1.

The decisions are measured on fixed attempts: stackrl/arith-skills' own sampled attempts at held-out problems of the
recipe's categories, made before training; each trained policy checks each attempt `samples` times (sampled, in
the judge format), and "deferred" is the share of checks whose verdict is "wrong" (`right_deferred` and
`wrong_deferred` split it by the attempt's correctness). Trains the CPU recipe (configs/recipes/hila-cpu.yaml) at a
low and a high cost, and the same recipe without the plugin, for the same steps and seeds.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/hila/benchmarks/mechanism.py --seeds 0 1 2
"""

from __future__ import annotations

from pathlib import Path

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "hila-cpu.yaml"
COSTS = {"low": 0.1, "high": 0.9}  # the methods "low" and "high": the recipe at each cost


def heldout_attempts(size: int) -> list[tuple[str, str, str]]:
    """The untrained policy's sampled attempts at ``size`` held-out problems: (question, attempt, answer)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stackrl.modeling import resolve_model_path
    from stackrl.testing.heldout import recipe_config, sampled_attempts

    config = recipe_config(RECIPE, plugins=True, seed=0, steps=1, output_dir="unused")
    path = resolve_model_path(config.host.model.name_or_path)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    return sampled_attempts(model, tokenizer, config, size)


def decisions(model, tokenizer, attempts, *, samples: int, seed: int, max_new_tokens: int = 128) -> dict[str, float]:
    """How often ``model``, checking each attempt ``samples`` times, defers it (its verdict is "wrong"): over all
    attempts, over the right ones and over the wrong ones."""
    from stackrl.rewards import exact_match
    from stackrl.tasks import judge_prompt, parse_verdict
    from stackrl.tasks.pretrain import generate

    rows = [(q, a, answer) for q, a, answer in attempts for _ in range(samples)]
    replies = generate(model, tokenizer, [judge_prompt(q, a) for q, a, _ in rows], greedy=False, seed=seed,
                       max_new_tokens=max_new_tokens)
    defers = [parse_verdict(reply) is False for reply in replies]
    right = [exact_match(a, answer) == 1.0 for _, a, answer in rows]
    share = lambda flags: sum(flags) / len(flags) if flags else float("nan")  # noqa: E731
    return {"deferred": share(defers), "right_deferred": share([d for d, r in zip(defers, right) if r]),
            "wrong_deferred": share([d for d, r in zip(defers, right) if not r])}


def run(method: str, seed: int, folder: Path, *, steps: int, attempts, samples: int = 4, heldout: int = 0,
        overrides=()) -> dict[str, float]:
    """Train the recipe at the cost ``method`` names ("low", "high") or plain GRPO ("grpo") for ``steps`` steps;
    the trained policy's decisions on ``attempts`` and, with ``heldout``, its greedy pass@1 on that many held-out
    problems."""
    from stackrl.data import load_prompts
    from stackrl.rewards import exact_match
    from stackrl.run import build_trainer
    from stackrl.tasks.pretrain import generate
    from stackrl.testing.heldout import recipe_config

    overrides = ["trainer.disable_tqdm=true", *overrides]
    if method == "grpo":
        overrides = [o for o in overrides if not o.startswith("hila.")]
    else:
        overrides.append(f"hila.cost={COSTS[method]}")
    config = recipe_config(RECIPE, plugins=method != "grpo", seed=seed, steps=steps,
                           output_dir=folder / f"{method}-{seed}", overrides=overrides)
    trainer = build_trainer(config)
    trainer.train()
    model, tokenizer = trainer.model, trainer.processing_class
    figures = decisions(model, tokenizer, attempts, samples=samples, seed=seed)
    if heldout:
        rows = load_prompts(config.host.data, split="test", size=heldout, keep_answer=True)
        greedy = generate(model, tokenizer, list(rows["prompt"]), max_new_tokens=64)
        figures["pass@1"] = sum(exact_match(t, a) for t, a in zip(greedy, rows["answer"])) / heldout
    return figures


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=10, eval_size=100, methods=(*COSTS, "grpo")).parse_args()
    attempts = heldout_attempts(args.eval_size)
    compare(args, args.methods,
            lambda method, seed, folder: run(method, seed, folder, steps=args.steps, attempts=attempts,
                                             heldout=args.eval_size, overrides=args.overrides),
            before=lambda folder: untrained(attempts, args.eval_size))


def untrained(attempts, heldout: int) -> dict[str, float]:
    """The untrained policy's decisions on the attempts and its greedy pass@1."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stackrl.data import load_prompts
    from stackrl.modeling import resolve_model_path
    from stackrl.rewards import exact_match
    from stackrl.tasks.pretrain import generate
    from stackrl.testing.heldout import recipe_config

    config = recipe_config(RECIPE, plugins=True, seed=0, steps=1, output_dir="unused")
    path = resolve_model_path(config.host.model.name_or_path)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    figures = decisions(model, tokenizer, attempts, samples=4, seed=0)
    rows = load_prompts(config.host.data, split="test", size=heldout, keep_answer=True)
    greedy = generate(model, tokenizer, list(rows["prompt"]), max_new_tokens=64)
    figures["pass@1"] = sum(exact_match(t, a) for t, a in zip(greedy, rows["answer"])) / heldout
    return figures


if __name__ == "__main__":
    main()
