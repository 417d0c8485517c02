"""InT against plain GRPO on the built-in task: how often the policy, continuing a held-out failed attempt from the
step before its first error, reaches the right answer ("recovery"), and held-out pass@1.

The failed attempts are stackrl/arith-skills' own, sampled at held-out problems of the recipe's categories before
training; each is cut before its first step that differs from the reference solution. Trains the CPU recipe
(configs/recipes/intrl-cpu.yaml) and the same recipe without the plugin for the same steps and seeds, then measures
both after the last step (for InT, after its fine-tuning phase).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/intrl/benchmarks/mechanism.py --seeds 0 1 2
"""

from __future__ import annotations

from pathlib import Path

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "intrl-cpu.yaml"
SEPARATOR = "\n"


def failed_prefixes(config, size: int) -> list[tuple[str, str]]:
    """The untrained policy's failed attempts at ``size`` held-out problems, each as (question + the steps before
    its first error, reference answer)."""
    from stackrl.modeling import resolve_model_path
    from stackrl.testing.heldout import sampled_attempts
    from stackrl_intrl.interventions import from_reference, steps_of
    from stackrl.data import load_prompts
    from stackrl.rewards import exact_match
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model_path(config.host.model.name_or_path)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    rows = load_prompts(config.host.data, split="test", size=size, keep_answer=True)
    solution = dict(zip(rows["prompt"], rows["solution"]))
    prefixes = []
    for question, attempt, answer in sampled_attempts(model, tokenizer, config, size):
        steps = steps_of(attempt, SEPARATOR)
        found = from_reference(steps, solution[question], SEPARATOR)
        if found is not None and exact_match(attempt, answer) != 1.0:
            prefixes.append((question + "".join(step + SEPARATOR for step in steps[: found[0]]), answer))
    return prefixes


def run_prefixes(rollouts) -> list[tuple[str, str]]:
    """The failed rollouts of a run's steps, each as (question + the steps before its first error, answer)."""
    from stackrl.rewards import exact_match
    from stackrl_intrl.interventions import from_reference, steps_of

    prefixes = []
    for rollout in rollouts:
        for question, attempt, solution, answer in zip(rollout.prompts, rollout.completions,
                                                       rollout.columns["solution"], rollout.columns["answer"]):
            steps = steps_of(attempt, SEPARATOR)
            found = from_reference(steps, solution, SEPARATOR)
            if found is not None and exact_match(attempt, answer) != 1.0:
                prefixes.append((question + "".join(step + SEPARATOR for step in steps[: found[0]]), answer))
    return prefixes


def recovery(model, tokenizer, prefixes, *, samples: int, seed: int) -> float:
    """The share of sampled continuations of the prefixes that reach their answer."""
    from stackrl.rewards import exact_match
    from stackrl.tasks.pretrain import generate

    prompts = [p for p, _ in prefixes for _ in range(samples)]
    answers = [a for _, a in prefixes for _ in range(samples)]
    texts = generate(model, tokenizer, prompts, greedy=False, seed=seed, max_new_tokens=64)
    return sum(exact_match(p.split("\n", 1)[1] + t, a) == 1.0 for p, t, a in zip(prompts, texts, answers)) / len(texts)


def run(method: str, seed: int, folder: Path, *, steps: int, heldout: int, samples: int = 4, overrides=(),
        prefixes=None) -> dict[str, float]:
    """Train the recipe (``method`` "intrl") or plain GRPO for ``steps`` steps; recovery on ``heldout`` held-out
    problems' failed attempts (``prefixes``, where already cut) and pass@1 on the same problems."""
    from stackrl.data import load_prompts
    from stackrl.rewards import exact_match
    from stackrl.run import build_trainer
    from stackrl.tasks.pretrain import generate
    from stackrl.testing.heldout import recipe_config

    if method != "intrl":
        overrides = [o for o in overrides if not o.startswith("intrl.")]
    config = recipe_config(RECIPE, plugins=method == "intrl", seed=seed, steps=steps,
                           output_dir=folder / f"{method}-{seed}", overrides=["trainer.disable_tqdm=true", *overrides])
    if prefixes is None:
        prefixes = failed_prefixes(recipe_config(RECIPE, plugins=True, seed=0, steps=steps, output_dir=folder), heldout)
    trainer = build_trainer(config)
    trainer.train()
    model, tokenizer = trainer.model, trainer.processing_class
    rows = load_prompts(config.host.data, split="test", size=heldout, keep_answer=True)
    greedy = generate(model, tokenizer, list(rows["prompt"]), max_new_tokens=64)
    return {"recovery": recovery(model, tokenizer, prefixes, samples=samples, seed=seed),
            "pass@1": sum(exact_match(t, a) for t, a in zip(greedy, rows["answer"])) / heldout}


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=10, eval_size=200).parse_args()
    compare(args, ("intrl", "grpo"),
            lambda method, seed, folder: run(method, seed, folder, steps=args.steps, heldout=args.eval_size,
                                             overrides=args.overrides))


if __name__ == "__main__":
    main()
