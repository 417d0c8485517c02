"""Reflect, Retry, Reward's mechanism on the built-in task: retries after a reflection succeed more often.

On held-out problems of the recipe's categories (``--problems``), the untrained model's sampled first attempts; the
failed ones are the attempts every model reflects on, ``--reflections`` reflections each (the plugin's templates,
sampled, seeded), each followed by one sampled retry. Measured with the untrained model and with each model trained
by the CPU recipe (configs/recipes/rrr-cpu.yaml, stackrl/arith-skills), for the same steps and seeds:

- ``retry_success``: the share of retries after a reflection that reach the right answer, what the plugin raises;
- ``attempts_split``: the share of failed attempts whose retries split (some right, some wrong);
- ``slip_found``: the share of reflections that find the slip (``stackrl.testing.judging.finds_the_slip``), and
  the retry success after those (``after_found``) and after the others (``after_missed``);
- ``plain_retry_success``: the plain retry prompt's success on the same attempts (``stackrl.tasks.retry_prompt``,
  no reflection), which the plugin does not train;
- ``train_success``: a trained run's ``rrr/retry_success`` over its last half of steps.

``--probe`` measures the untrained model alone.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rrr/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
    OMP_NUM_THREADS=1 .venv/bin/python plugins/rrr/benchmarks/mechanism.py --probe data.options.categories='["2 steps, 1-digit","3 steps, 1-digit","4 steps, 1-digit"]'
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rrr-cpu.yaml"
FIGURES = ("retry_success", "attempts_split", "slip_found", "after_found", "after_missed", "plain_retry_success",
           "train_success")


def load(seed: int, steps: int, folder: Path, overrides=()):
    from stackrl.testing.heldout import recipe_config

    return recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=folder / f"rrr-{seed}",
                         overrides=["trainer.disable_tqdm=true", *overrides])


def share(values: list) -> float:
    """The share of true values, NaN where there are none."""
    return sum(values) / len(values) if values else math.nan


def failed_attempts(model, tokenizer, config, problems: int) -> list[tuple[str, str, str]]:
    """``model``'s sampled first attempts at ``problems`` held-out problems that fail: question, attempt, answer."""
    from stackrl.rewards import exact_match
    from stackrl.testing.heldout import sampled_attempts

    return [(q, t, a) for q, t, a in sampled_attempts(model, tokenizer, config, problems) if not exact_match(t, a)]


def retries(model, tokenizer, config, failed, reflections: int) -> dict:
    """``model``'s retries on the ``failed`` attempts, after its reflections and without one."""
    from stackrl.rewards import exact_match
    from stackrl.tasks import retry_prompt
    from stackrl.tasks.pretrain import generate
    from stackrl.testing.judging import finds_the_slip

    settings, length = config.plugin_configs["rrr"], config.host.trainer["max_completion_length"]
    shown = [row for row in failed for _ in range(reflections)]
    notes = generate(model, tokenizer, [settings.reflect_template.format(prompt=q, attempt=t) for q, t, _ in shown],
                     greedy=False, seed=1, max_new_tokens=length)
    retried = generate(model, tokenizer, [settings.retry_template.format(prompt=q, attempt=t, reflection=r)
                                          for (q, t, _), r in zip(shown, notes)], greedy=False, seed=2, max_new_tokens=length)
    plain = generate(model, tokenizer, [retry_prompt(q, t) for q, t, _ in shown], greedy=False, seed=2, max_new_tokens=length)
    right = [exact_match(r, a) == 1.0 for r, (_, _, a) in zip(retried, shown)]
    split = [0 < sum(right[i : i + reflections]) < reflections for i in range(0, len(right), reflections)]
    found = [finds_the_slip(note, t) for note, (_, t, _) in zip(notes, shown)]
    after = lambda value: share([r for r, f in zip(right, found) if f == value])  # noqa: E731
    return {
        "failed": len(failed), "retries": len(right),
        "retry_success": share(right), "attempts_split": share(split), "slip_found": share(found),
        "after_found": after(True), "after_missed": after(False),
        "plain_retry_success": share([exact_match(r, a) == 1.0 for r, (_, _, a) in zip(plain, shown)]),
    }


def run(seed: int, steps: int, folder: Path, failed, reflections: int, overrides=()) -> dict:
    """Train one run; its retries on the ``failed`` attempts, and its retry success over the last half of steps."""
    from stackrl.testing.fixtures import train_steps

    config = load(seed, steps, folder, overrides)
    trainer = train_steps(config)
    values = [log["rrr/retry_success"] for log in trainer.state.log_history if "rrr/retry_success" in log]
    late = values[steps // 2 :]
    return {**retries(trainer.model, trainer.processing_class, config, failed, reflections),
            "train_success": share(late)}


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.split("\n\n")[0], steps=20)
    parser.add_argument("--probe", action="store_true", help="measure the untrained model's retries alone")
    parser.add_argument("--problems", type=int, default=120, help="held-out problems attempted")
    parser.add_argument("--reflections", type=int, default=4, help="reflections per failed attempt")
    args = parser.parse_args()
    failed = []

    def before(folder: Path) -> dict:
        from stackrl.run import build_trainer

        config = load(0, 0, folder, args.overrides)
        trainer = build_trainer(config)
        failed.extend(failed_attempts(trainer.model, trainer.processing_class, config, args.problems))
        return retries(trainer.model, trainer.processing_class, config, failed, args.reflections)

    if args.probe:
        with tempfile.TemporaryDirectory() as folder:
            print(before(Path(folder)))
        return
    compare(args, ("rrr",), lambda method, seed, folder: run(seed, args.steps, folder, failed, args.reflections,
                                                           args.overrides),
            figures=FIGURES, before=before)


if __name__ == "__main__":
    main()
