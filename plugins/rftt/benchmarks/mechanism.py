"""RFTT on the built-in task: the warm-up teaches the functional tokens, and the policy then samples them in RL.

A run of configs/recipes/rftt-cpu.yaml: the warm-up's targets (each checked: the attempt, <verify> and its check, and
<refine> with a right solution exactly where the attempt is wrong), the new tokens' rows before and after (input
embedding and output layer), the share of completions that use a token before and after the warm-up, the share of
refinements that fix a wrong attempt, and greedy held-out accuracy after; plain GRPO on the same recipe at equal
steps (outcome reward, the tokens in the vocabulary but never taught) gives the accuracy to compare.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rftt/benchmarks/mechanism.py --seeds 0 1 2 --steps 12
"""

from __future__ import annotations

from pathlib import Path

from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import read_problem
from stackrl.tasks.roles import parse_verdict
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import greedy_accuracy, recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rftt-cpu.yaml"
TOKENS = ("<verify>", "<refine>")


def _targets_true(decode, phases) -> dict[str, float]:
    """Each warm-up target read against its problem: a check whose verdict is the attempt's truth, and a
    refinement, right, exactly after a wrong attempt."""
    verified = refined = true = 0
    for contexts, completions in phases:
        for context, completion in zip(contexts, completions):
            question, _, given = (context if isinstance(context, str) else decode(context)).partition("\n")
            answer = read_problem(question + "\n")["answer"]
            text = given + decode(completion, skip_special_tokens=True)  # an attempt in the context comes first
            attempt, _, rest = text.partition("\n<verify>\n")
            check, _, fix = rest.partition("\n<refine>\n")
            right = exact_match(attempt, answer) == 1.0
            true += parse_verdict(check) is right and bool(fix) is not right and (right or exact_match(fix, answer) == 1.0)
            verified += bool(rest)
            refined += bool(fix)
    total = verified or 1
    return {"targets": verified, "refined_targets": refined, "targets_true": true / total}


def run(method: str, seed: int, steps: int, folder: Path, overrides=(), heldout: int = 100) -> dict[str, float]:
    """One run's figures; ``heldout`` 0 skips the held-out accuracy."""
    with one_thread():
        overrides = list(overrides) + ["trainer.disable_tqdm=true"]
        if method != "rftt":
            overrides = [o for o in overrides if not o.startswith("rftt.")] + ["rewards.exact_match=1.0"]
        trainer = build_trainer(recipe_config(RECIPE, plugins=method == "rftt", seed=seed, steps=steps,
                                              output_dir=folder / f"{method}-{seed}", overrides=overrides))
        ids = trainer.processing_class.convert_tokens_to_ids(list(TOKENS))
        model = trainer.accelerator.unwrap_model(trainer.model)
        rows = lambda: [model.get_input_embeddings().weight[ids].detach().clone(),  # noqa: E731
                        model.get_output_embeddings().weight[ids].detach().clone()]
        before = rows()
        phases = []
        if method == "rftt":
            def watched(plugin, name, contexts, completion_ids, **options):  # the host's phase, watched
                phases.append((contexts, completion_ids))
                return phase(plugin, name, contexts, completion_ids, **options)

            phase, trainer._supervised_phase = trainer._supervised_phase, watched
        trainer.train()
        figures = {"accuracy": greedy_accuracy(trainer, heldout, seed=1000 + seed)} if heldout else {}
        if method != "rftt":
            return figures
        moved = [(a - b).norm().item() for a, b in zip(rows(), before)]
        log = [e for e in trainer.state.log_history if "rftt/use_none" in e]
        used = [1 - e["rftt/use_none"] for e in log]
        fixed = [e["rftt/refine_fixed"] for e in log if "rftt/refine_fixed" in e]
        warm = next((i for i, e in enumerate(trainer.state.log_history) if "phase/rftt_warmup/pairs" in e),
                    len(trainer.state.log_history))  # no warm-up ran: every step counts as before it
        steps_before = sum(1 for e in trainer.state.log_history[:warm + 1] if "rftt/use_none" in e)
        rollout = trainer._rollouts["train"]
        rewards = rollout.rewards["rftt"].tolist()
        outcome = [exact_match(c, a) for c, a in zip(rollout.completions, rollout.columns["answer"])]
        added = trainer.processing_class.get_added_vocab()
        return {**figures, **_targets_true(trainer.processing_class.decode, phases),
                "added": float(all(token in added for token in TOKENS)), "embedding_moved": moved[0], "output_moved": moved[1],
                "use_before": sum(used[:steps_before]) / max(steps_before, 1),
                "use_after": sum(used[steps_before:]) / max(len(used) - steps_before, 1),
                "refine_fixed": sum(fixed) / len(fixed) if fixed else 0.0,
                "reward_is_outcome": float(rewards == outcome)}


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=12, eval_size=100, methods=("rftt", "grpo")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(method, seed, args.steps, folder, args.overrides,
                                                                 args.eval_size),
            figures=("accuracy", "use_before", "use_after", "refine_fixed", "targets_true", "embedding_moved",
                     "output_moved"))


if __name__ == "__main__":
    main()
