"""PAG's mechanism on the built-in task: held-out self-verification and selective revision improve.

Trains configs/recipes/pag-cpu.yaml (stackrl/arith-skills) for the same steps and seeds, and runs the PAG trajectory
(answer, check, revise after "wrong"; sampled, seeded) on held-out problems of the recipe's categories with the
untrained and each trained model:

- precision and recall of the first verification on first answers ("correct" the positive class, as the authors),
  and its recall on wrong answers;
- of the rows revised, the shares whose revision turned wrong into right (w2r) and right into wrong (r2w), and of
  the revisions that changed the answer's correctness, the share that turned it from wrong into right
  (``w2r_share`` = w2r / (w2r + r2w)).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/pag/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "pag-cpu.yaml"
FIGURES = ("precision", "recall", "recall_negative", "revised", "w2r", "r2w", "w2r_share", "first")


def measure(trainer, config, size: int) -> dict:
    from stackrl.blocks.turns import verifier_figures
    from stackrl.rewards import OUTCOME_REWARDS
    from stackrl.tasks import parse_verdict
    from stackrl.tasks.arithmetic import make_dataset
    from stackrl_pag.plugin import trajectories

    settings = config.plugin_configs["pag"]
    rows = make_dataset("test", size, seed=0, categories=config.host.data.options.get("categories"))
    policy = trainer._shared_policy
    ctx = SimpleNamespace(generate=policy.generate, tokenizer=trainer.processing_class, eos_token_ids=policy.eos_token_ids)
    torch.manual_seed(1234)
    check = OUTCOME_REWARDS[settings.metric]
    answers, verdicts = [], []
    for trajectory, answer in zip(trajectories(list(rows["question"]), ctx, settings), rows["answer"]):
        answers.append([check(s.text, answer) == 1.0 for s in trajectory.of_kind("answer")])
        verdicts.append(parse_verdict(trajectory.of_kind("verify")[0].text))
    figures = verifier_figures([a[0] for a in answers], verdicts)
    revised = [a for a in answers if len(a) > 1]
    fixed, broken = sum(not a[0] and a[1] for a in revised), sum(a[0] and not a[1] for a in revised)
    return {
        **figures,
        "revised": len(revised) / len(answers),
        "w2r": fixed / max(len(revised), 1),
        "r2w": broken / max(len(revised), 1),
        "w2r_share": fixed / max(fixed + broken, 1),
        "first": sum(a[0] for a in answers) / len(answers),
    }


def run(seed: int, steps: int, folder: Path, overrides, size: int) -> dict:
    from stackrl.run import build_trainer
    from stackrl.testing.heldout import recipe_config

    config = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=folder / f"pag-{seed}", overrides=overrides)
    trainer = build_trainer(config)
    if steps:
        trainer.train()
    return measure(trainer, config, size)


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=30, eval_size=300).parse_args()
    measured = lambda seed, steps, folder: run(seed, steps, folder, args.overrides, args.eval_size)  # noqa: E731
    compare(args, ("pag",), lambda method, seed, folder: measured(seed, args.steps, folder), figures=FIGURES,
            before=lambda folder: measured(0, 0, folder))


if __name__ == "__main__":
    main()
