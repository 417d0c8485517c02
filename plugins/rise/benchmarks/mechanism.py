"""RISE's mechanism on the built-in task: held-out judging improves, held-out solving does not drop.

Trains a CPU recipe (configs/recipes/rise-cpu.yaml, or selfverify-cpu.yaml with ``--plugin selfverify``; both on
stackrl/arith-skills) and the same run without the plugin (plain GRPO on exact_match), for the same steps (60 by
default, three times the recipes' 20: at 20 the critic has seen too few attempts to move) and seeds, and measures
each trained model and the untrained one on held-out problems:

- verify: balanced accuracy of greedy verdicts on held-out attempts: the untrained model's sampled attempts at the
  held-out problems, the same attempts for every model (what the plugin trains: verifying the policy's own
  attempts); ``verify_right`` and ``verify_wrong`` are its two halves, the share of right attempts judged correct
  and of wrong ones judged wrong (a missing verdict counts against both);
- judge: balanced accuracy of greedy verdicts on the test split's solutions and slipped copies of them
  (``eval.skill: judge``);
- pass@1, maj@k and vmaj@k: solving, with the plain and the verification-weighted vote (``eval.verify_vote``).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rise/benchmarks/mechanism.py trainer.learning_rate=1e-4 --seeds 0 1 2
"""

from __future__ import annotations

from pathlib import Path

import yaml

RECIPES = Path(__file__).resolve().parents[3] / "configs" / "recipes"
FIGURES = ("verify", "verify_right", "verify_wrong", "judge", "pass@1", "maj", "vmaj")


def load(plugin: str, method: str, seed: int, steps: int, folder: Path, overrides=()):
    """``plugin``'s CPU recipe as ``method`` runs it: with the plugin, or without it (``grpo``)."""
    from stackrl.config import load_config

    tree = yaml.safe_load((RECIPES / f"{plugin}-cpu.yaml").read_text())
    if method == "grpo":
        tree["plugins"] = []
        tree["rewards"] = {"exact_match": 1.0}
        del tree[plugin]
    tree["output_dir"] = str(folder / f"{method}-{seed}")
    path = folder / f"{method}-{seed}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return load_config([path], [f"trainer.seed={seed}", f"trainer.max_steps={steps}", *overrides])


def held_out_attempts(model, tokenizer, config) -> list[tuple[str, str, bool]]:
    """``model``'s sampled attempts at the ``eval.size`` held-out problems: question, attempt, and whether the
    attempt is right."""
    from stackrl.rewards import exact_match
    from stackrl.testing.heldout import sampled_attempts

    attempts = sampled_attempts(model, tokenizer, config, config.host.eval.size)
    return [(q, t, exact_match(t, a) == 1.0) for q, t, a in attempts]


def verification(model, tokenizer, attempts, length: int) -> dict:
    """Balanced accuracy of ``model``'s greedy verdicts on ``attempts`` (:func:`held_out_attempts`), and its halves."""
    from stackrl.tasks import judge_prompt, parse_verdict
    from stackrl.tasks.pretrain import generate

    replies = generate(model, tokenizer, [judge_prompt(q, t) for q, t, _ in attempts], max_new_tokens=length)
    verdicts = [parse_verdict(reply) for reply in replies]
    share = lambda values: sum(values) / max(len(values), 1)  # noqa: E731
    right = share([v is True for v, (_, _, c) in zip(verdicts, attempts) if c])
    wrong = share([v is False for v, (_, _, c) in zip(verdicts, attempts) if not c])
    return {"verify": (right + wrong) / 2, "verify_right": right, "verify_wrong": wrong}


def measure(model, tokenizer, config, attempts) -> dict:
    """Verification of ``attempts``, held-out judging (balanced accuracy, greedy) and solving (pass@1, maj@k,
    vmaj@k) of ``model``."""
    from dataclasses import replace

    from stackrl.evaluation import evaluate

    def with_eval(**settings):
        return replace(config, host=replace(config.host, eval=replace(config.host.eval, **settings)))

    length = config.host.trainer["max_completion_length"]
    judging = evaluate(model, tokenizer, with_eval(skill="judge", temperature=0.0), length)
    solving = evaluate(model, tokenizer, with_eval(verify_vote=True), length)
    k = config.host.eval.samples
    return {
        **verification(model, tokenizer, attempts, length),
        "judge": judging["balanced_accuracy"],
        "pass@1": solving["pass@1"],
        "maj": solving[f"maj@{k}"],
        "vmaj": solving[f"vmaj@{k}"],
    }


def run(plugin: str, method: str, seed: int, steps: int, folder: Path, attempts, overrides=()) -> dict:
    """Train one run (``method``: ``plugin`` or ``grpo``); its held-out figures after training."""
    from stackrl.testing.fixtures import train_steps

    config = load(plugin, method, seed, steps, folder, overrides)
    trainer = train_steps(config)
    return measure(trainer.model, trainer.processing_class, config, attempts)


def untrained(plugin: str, folder: Path, overrides=()) -> tuple[dict, list]:
    """The untrained model's held-out figures, and its held-out attempts every model then verifies."""
    from stackrl.run import build_trainer

    config = load(plugin, "grpo", 0, 0, folder, overrides)
    trainer = build_trainer(config)
    attempts = held_out_attempts(trainer.model, trainer.processing_class, config)
    return measure(trainer.model, trainer.processing_class, config, attempts), attempts


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.split("\n\n")[0], steps=60, eval_size=200, methods=("grpo", "plugin"))
    parser.add_argument("--plugin", choices=["rise", "selfverify"], default="rise")
    args = parser.parse_args()
    overrides = [f"eval.size={args.eval_size}", *args.overrides]
    attempts = []

    def before(folder: Path) -> dict:
        figures, found = untrained(args.plugin, folder, overrides)
        attempts.extend(found)
        return figures

    methods = [args.plugin if m == "plugin" else m for m in args.methods]
    compare(args, methods,
            lambda method, seed, folder: run(args.plugin, method, seed, args.steps, folder, attempts, overrides),
            figures=FIGURES, before=before)


if __name__ == "__main__":
    main()
