"""DARC's document-augmented teacher on the built-in task: its labels against the solver's own majority vote.

Short runs of configs/recipes/darc-cpu.yaml (label-free; the corpus is the task's worked solutions). Each step's
training rollout is read against the truth the plugin never sees (the last line of the row's `solution`): the share
of groups darc labelled, how often its label is right, how often the solver group's own majority answer is right
(the label a self-vote method would take: what the asymmetry is for), the solver's accuracy, and whether each
scored row's reward is its agreement with the label. After training, greedy accuracy on held-out
problems, against plain GRPO trained on the reference answers (exact_match, the supervised bound the paper
approaches) at equal steps.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/darc/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

from pathlib import Path

import yaml

from stackrl.answers import group_answers
from stackrl.blocks.selfplay import majority
from stackrl.rewards import extract_answer
from stackrl.testing.benchmark import training_rollouts
from stackrl.testing.heldout import greedy_accuracy

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "darc-cpu.yaml"


def measure(rollout) -> dict:
    """One training rollout read against the truth."""
    size = rollout.group_size
    truth = [extract_answer(s) for s in rollout.columns["solution"]]
    answers = [extract_answer(t) for t in rollout.completions]
    labels = rollout.pseudo_labels.get("darc", [None] * len(rollout))
    starts = range(0, len(rollout), size)
    own = [majority(group_answers(answers[s:s + size], False), unanswered_votes=False).answer for s in starts]
    labelled = [s for s in starts if labels[s] is not None]
    reward = rollout.rewards.get("darc")
    scored = [i for i in range(len(rollout)) if labels[i] is not None]
    return {
        "groups": len(starts),
        "labelled": len(labelled),
        "label_right": sum(labels[s] == truth[s] for s in labelled),
        "own_right": sum(a == truth[s] for a, s in zip(own, starts)),
        "own_right_labelled": sum(a == truth[s] for a, s in zip(own, starts) if labels[s] is not None),
        "solver_right": sum(a == t for a, t in zip(answers, truth)),
        "rows": len(rollout),
        "scored_rows": len(scored),
        "reward_is_agreement": sum(float(reward[i]) == float(answers[i] == labels[i]) for i in scored),
    }


def run(seed: int, steps: int, method: str = "darc", overrides=(), heldout: int = 0) -> dict:
    """Train ``steps`` steps of the recipe (``grpo``: without darc, on the reference answers); the summed figures of
    its training rollouts, and greedy held-out accuracy on ``heldout`` problems after (none at 0)."""
    tree = yaml.safe_load(RECIPE.read_text())
    if method == "grpo":
        tree["plugins"], tree["rewards"] = [], {"exact_match": 1.0}
        tree.pop("darc")
        tree["data"]["label_free"] = False
        overrides = [o for o in overrides if not o.startswith("darc.")]
    seen, trainer = training_rollouts(tree, measure, seed=seed, steps=steps, overrides=overrides)
    total = {key: sum(step[key] for step in seen) for key in seen[0]} if seen else {}
    figures = {"solver_accuracy": total["solver_right"] / total["rows"],
               "own_majority_accuracy": total["own_right"] / total["groups"]}
    if method == "darc":
        labelled = max(total["labelled"], 1)
        figures |= {"labelled": total["labelled"] / total["groups"],
                    "label_accuracy": total["label_right"] / labelled,
                    "own_majority_accuracy_labelled": total["own_right_labelled"] / labelled,
                    "reward_is_agreement": total["reward_is_agreement"] / max(total["scored_rows"], 1)}
    if heldout:
        figures["heldout_accuracy"] = greedy_accuracy(trainer, heldout, seed=1000 + seed)
    return figures


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=20, eval_size=128, methods=("darc", "grpo")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(seed, args.steps, method, args.overrides,
                                                                 args.eval_size),
            figures=("labelled", "label_accuracy", "own_majority_accuracy_labelled", "own_majority_accuracy",
                     "solver_accuracy", "reward_is_agreement", "heldout_accuracy"))


if __name__ == "__main__":
    main()
