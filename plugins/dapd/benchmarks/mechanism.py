"""DAPD's mechanism on the built-in task: the policy's views of the same completion come to agree, accuracy holds.

On held-out problems (the task's test split), completions are sampled once from the initial policy. Before and
after a short run we measure, on those same completions and their worked solutions, the DAPD terms with the
policy as its own anchor (`gap`: the sum of the six terms' means, each a clipped forward KL between two views of
one completion that differ in the privileged text they carry; `entangled`: OPSD's term alone, the gap between
the policy shown the solution and the policy shown the question) and greedy held-out accuracy. Three methods at
equal steps: DAPD (configs/recipes/dapd-cpu.yaml), OPSD (opsd-cpu.yaml) and plain GRPO (dapd-cpu.yaml without
its plugin, the exact-match reward weighted 1). Prints one line per run and the means over the seeds.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/dapd/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl import Rollout
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import make_dataset
from stackrl.testing.heldout import recipe_config
from stackrl_dapd import DapdConfig, dapd_terms, reference_ids

RECIPES = Path(__file__).resolve().parents[3] / "configs" / "recipes"
METHODS = ("dapd", "opsd", "grpo")
# The measure: every term at weight 1, the policy's own views against each other, the built-in reference layout.
MEASURE = DapdConfig(teacher_template="{reference}\n\n{prompt}", **dict.fromkeys(
    ("entangled_rollout", "inference_reference", "privileged_rollout", "entangled_reference", "inference_rollout",
     "privileged_reference"), 1.0))


def heldout_rollout(policy, size: int, seed: int) -> Rollout:
    """Held-out questions with one completion each, sampled at temperature 1 by the policy as it is now."""
    rows = make_dataset(split="test", size=size, seed=seed)
    torch.manual_seed(seed)
    generations = policy.generate(list(rows["question"]), do_sample=True, temperature=1.0)
    return Rollout(
        prompts=list(rows["question"]), completions=[g.text for g in generations],
        prompt_ids=[g.prompt_ids for g in generations], completion_ids=[g.completion_ids for g in generations],
        columns={k: list(rows[k]) for k in ("answer", "solution")}, group_size=1,
    )


def measure(trainer, rollout: Rollout) -> dict[str, float]:
    policy = trainer._shared_policy
    references = reference_ids(trainer.processing_class, rollout.columns["solution"], policy.eos_token_ids, None)
    with torch.no_grad():
        terms = dapd_terms(policy, rollout, references, MEASURE, models={"snapshot": "policy", "base": "policy"},
                           grad=False)
    greedy = policy.generate(rollout.prompts, do_sample=False)
    accuracy = sum(exact_match(g.text, a) for g, a in zip(greedy, rollout.columns["answer"])) / len(rollout)
    return {"gap": sum(v.mean().item() for v in terms.values()), "entangled": terms["entangled_rollout"].mean().item(),
            "accuracy": accuracy}


def run(seed: int, steps: int, heldout: int, method: str = "dapd", overrides=()) -> tuple[dict, dict]:
    """The figures before and after ``steps`` steps of ``method`` at ``seed``."""
    recipe = RECIPES / ("opsd-cpu.yaml" if method == "opsd" else "dapd-cpu.yaml")
    extra = ["rewards.exact_match=1.0"] if method == "grpo" else []
    with tempfile.TemporaryDirectory() as out:
        config = recipe_config(recipe, plugins=method != "grpo", seed=seed, steps=steps, output_dir=out,
                               overrides=[*extra, *overrides])
        trainer = build_trainer(config)
        rollout = heldout_rollout(trainer._shared_policy, heldout, seed=1000 + seed)
        before = measure(trainer, rollout)
        trainer.train()
        after = measure(trainer, rollout)
    return before, after


def main():
    from stackrl.testing.benchmark import arguments, changes, compare

    args = arguments(__doc__.splitlines()[0], steps=30, eval_size=128, methods=METHODS).parse_args()
    compare(args, args.methods, lambda method, seed, folder: changes(*run(seed, args.steps, args.eval_size, method,
                                                                           args.overrides)),
            figures=("gap_before", "gap", "entangled_before", "entangled", "accuracy_before", "accuracy"),
            number_format=".4f")


if __name__ == "__main__":
    main()
