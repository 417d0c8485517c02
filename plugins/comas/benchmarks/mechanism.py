"""CoMAS's mechanism on the built-in task: what its interaction rewards say about the hidden answers, and held-out
solving and judging after training, against plain GRPO on the answers CoMAS never reads.

``signal(seed)``: one step of the CPU recipe (configs/recipes/comas-cpu.yaml, stackrl/arith-skills, label-free),
and over its rollout, with each problem's answer worked out from its question (``read_problem``):

- ``critique_wrong_called_wrong`` / ``critique_wrong_called_right``: the mean reward of the critiques of a wrong
  solution whose verdict calls it wrong, and of those that call it correct (what CoMAS must rank: the first above);
- ``critique_right_called_wrong`` / ``critique_right_called_right``: the same for critiques of a right solution (a
  zero-sum reward with a scorer that follows the critique pays for calling it wrong here too);
- ``advantage_wrong_called_wrong``: GRPO's mean advantage on the first kind;
- ``solution_auroc``: how far the solutions' rewards rank right solutions above wrong ones (0.5: no better than
  chance), and ``solution_right`` their share right.

``main``: trains the recipe and plain GRPO (exact_match, answers shown) for ``--steps`` at each seed and measures
held-out pass@1 and judging (``stackrl.testing.judging.heldout``):

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/comas/benchmarks/mechanism.py --seeds 0 1 2
"""

from __future__ import annotations

from pathlib import Path

SIGNAL = ("critique_wrong_called_wrong", "critique_wrong_called_right", "critique_right_called_wrong",
          "critique_right_called_right", "advantage_wrong_called_wrong", "solution_auroc", "solution_right")
HELD_OUT = ("pass@1", "judge")


def truths(rollout) -> list[bool]:
    """Whether the solution each row is about (a critique row's: the one it critiqued) is right."""
    from stackrl.rewards import VERIFY, exact_match
    from stackrl.tasks.arithmetic import read_problem

    roles, critiqued = rollout.columns["role"], rollout.columns["comas_solution"]
    return [exact_match(critiqued[i] if roles[i] == VERIFY else rollout.completions[i],
                        str(read_problem(rollout.prompts[i])["answer"])) == 1.0 for i in range(len(rollout))]


def discussion_signal(rollout, name: str = "comas") -> dict:
    """The figures the module's doc lists, over one rollout of the plugin."""
    import torch

    from stackrl.rewards import VERIFY
    from stackrl.tasks import parse_verdict
    from stackrl.truth import auroc

    rewards, right, roles = rollout.rewards[name], truths(rollout), rollout.columns["role"]
    mean = lambda rows: sum(rewards[i].item() for i in rows) / len(rows) if rows else float("nan")  # noqa: E731
    critiques = [i for i, role in enumerate(roles) if role == VERIFY]
    verdict = {i: parse_verdict(rollout.completions[i]) for i in critiques}
    kinds = {(r, v): [i for i in critiques if right[i] == r and verdict[i] is v] for r in (True, False) for v in (True, False)}
    solving = [i for i, role in enumerate(roles) if role != VERIFY]
    wrong_called_wrong = kinds[(False, False)]
    return {
        "critique_wrong_called_wrong": mean(wrong_called_wrong),
        "critique_wrong_called_right": mean(kinds[(False, True)]),
        "critique_right_called_wrong": mean(kinds[(True, False)]),
        "critique_right_called_right": mean(kinds[(True, True)]),
        "advantage_wrong_called_wrong": rollout.advantages[wrong_called_wrong].mean().item() if wrong_called_wrong else float("nan"),
        "solution_auroc": auroc(rewards[solving], torch.tensor([right[i] for i in solving])),
        "solution_right": sum(right[i] for i in solving) / max(1, len(solving)),
        "critiques": {kind: len(rows) for kind, rows in kinds.items()},
    }


def signal(seed: int = 0, folder: Path | None = None, overrides=()) -> dict:
    """One step of the CPU recipe at ``seed``; :func:`discussion_signal` of its rollout."""
    import tempfile

    from stackrl.testing.fixtures import train_steps
    from stackrl.testing.judging import load

    with tempfile.TemporaryDirectory() as tmp:
        config = load("comas", "comas", seed, 1, Path(folder or tmp), overrides)
        return discussion_signal(train_steps(config)._rollouts["train"])


def run(method: str, seed: int, steps: int, folder: Path, overrides=(), size: int = 200) -> dict:
    """Train the recipe (``comas``) or plain GRPO (``grpo``) for ``steps`` steps; held-out pass@1 and judging."""
    from stackrl.testing.fixtures import train_steps
    from stackrl.testing.judging import heldout, load

    config = load("comas", method, seed, steps, folder, [f"eval.size={size}", *overrides])
    trainer = train_steps(config) if steps else None
    if trainer is None:
        from stackrl.run import build_trainer

        trainer = build_trainer(config)
    return heldout(trainer.model, trainer.processing_class, config)


def main() -> None:
    from stackrl.testing.benchmark import against_plain_grpo, arguments

    import sys

    if "--signal" in sys.argv:  # the one-step signal at each seed
        sys.argv.remove("--signal")
        args = arguments(__doc__.split("\n\n")[0], steps=None).parse_args()
        for seed in args.seeds:
            print(f"seed {seed}: {signal(seed, overrides=args.overrides)}", flush=True)
        return
    against_plain_grpo(__doc__.split("\n\n")[0], "comas", run, HELD_OUT, steps=20, eval_size=200)


if __name__ == "__main__":
    main()
