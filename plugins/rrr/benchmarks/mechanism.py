"""Reflect, Retry, Reward's mechanism on the built-in task: retries after a reflection succeed more often.

Trains the CPU recipe (configs/recipes/rrr-cpu.yaml, stackrl/arith-skills) and the same run at learning rate 0
(the untrained policy on the same prompts and draws), for the same steps and seeds, and prints the mean over the
last half of the steps of ``rrr/retry_success``: the share of retries, after a reflection on a failed first
attempt, that reach the right answer.

``--probe`` measures instead what the untrained model offers RL: on held-out problems of the recipe's categories,
its sampled first attempts, and for each failed one ``--reflections`` reflections with their retries (the plugin's
templates), the share of retries that are right and of attempts whose retries split, the share of reflections that
find the slip (``stackrl.testing.judging.finds_the_slip``) and the retry success after those and after the others;
beside it the plain retry prompt's success on the same attempts (``stackrl.tasks.retry_prompt``, no reflection).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rrr/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
    OMP_NUM_THREADS=1 .venv/bin/python plugins/rrr/benchmarks/mechanism.py --probe data.options.categories='["2 steps, 1-digit","3 steps, 1-digit","4 steps, 1-digit"]'
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import yaml

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rrr-cpu.yaml"
METHODS = ("untrained", "rrr")


def load(method: str, seed: int, steps: int, folder: Path, overrides=()):
    from stackrl.config import load_config

    tree = yaml.safe_load(RECIPE.read_text())
    if method == "untrained":
        tree["trainer"]["learning_rate"] = 0.0
    tree["output_dir"] = str(folder / f"{method}-{seed}")
    path = folder / f"{method}-{seed}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return load_config([path], [f"trainer.seed={seed}", f"trainer.max_steps={steps}", *overrides])


def run(method: str, seed: int, steps: int, folder: Path, overrides=()) -> dict:
    """Train one run; the mean retry success over its last half of steps, and over all of them."""
    from stackrl.testing.fixtures import train_steps

    trainer = train_steps(load(method, seed, steps, folder, overrides))
    values = [log["rrr/retry_success"] for log in trainer.state.log_history if "rrr/retry_success" in log]
    assert len(values) == steps, f"expected one rrr/retry_success per step, got {len(values)}"
    late = values[steps // 2 :]
    return {"late": sum(late) / len(late), "all": sum(values) / len(values)}


def share(values: list) -> float:
    """The share of true values, NaN where there are none."""
    return sum(values) / len(values) if values else math.nan


def probe(problems: int, reflections: int, overrides=()) -> dict:
    """Retry success on the untrained model's own failed first attempts, after its reflection and without one."""
    from stackrl.data import load_prompts
    from stackrl.rewards import exact_match
    from stackrl.run import build_trainer
    from stackrl.tasks import retry_prompt
    from stackrl.tasks.pretrain import generate
    from stackrl.testing.judging import finds_the_slip

    with tempfile.TemporaryDirectory() as tmp:
        config = load("untrained", 0, 0, Path(tmp), overrides)
        trainer = build_trainer(config)
    model, tokenizer, settings = trainer.model, trainer.processing_class, config.plugin_configs["rrr"]
    rows = load_prompts(config.host.data, split="test", size=problems, keep_answer=True)
    questions, answers = list(rows["prompt"]), list(rows[config.host.data.answer_column])
    length = config.host.trainer["max_completion_length"]
    attempts = generate(model, tokenizer, questions, greedy=False, seed=0, max_new_tokens=length)
    failed = [(q, t, a) for q, t, a in zip(questions, attempts, answers) if not exact_match(t, a)]
    shown = [row for row in failed for _ in range(reflections)]
    notes = generate(model, tokenizer, [settings.reflect_template.format(prompt=q, attempt=t) for q, t, _ in shown],
                     greedy=False, seed=1, max_new_tokens=length)
    retries = generate(model, tokenizer, [settings.retry_template.format(prompt=q, attempt=t, reflection=r)
                                          for (q, t, _), r in zip(shown, notes)], greedy=False, seed=2, max_new_tokens=length)
    plain = generate(model, tokenizer, [retry_prompt(q, t) for q, t, _ in shown], greedy=False, seed=2, max_new_tokens=length)
    right = [exact_match(r, a) == 1.0 for r, (_, _, a) in zip(retries, shown)]
    split = [0 < sum(right[i : i + reflections]) < reflections for i in range(0, len(right), reflections)]
    found = [finds_the_slip(note, t) for note, (_, t, _) in zip(notes, shown)]
    after = lambda value: share([r for r, f in zip(right, found) if f == value])  # noqa: E731
    return {
        "problems": len(questions), "failed": len(failed), "retries": len(right),
        "retry_success": sum(right) / len(right), "attempts_split": sum(split) / len(split),
        "slip_found": sum(found) / len(found),
        "after_found": after(True), "after_missed": after(False),
        "plain_retry_success": sum(exact_match(r, a) for r, (_, _, a) in zip(plain, shown)) / len(shown),
    }


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.split("\n\n")[0], steps=20)
    parser.add_argument("--probe", action="store_true", help="measure the untrained model's retries instead")
    parser.add_argument("--problems", type=int, default=60, help="held-out problems the probe attempts")
    parser.add_argument("--reflections", type=int, default=4, help="reflections the probe samples per failed attempt")
    args = parser.parse_args()
    if args.probe:
        print(probe(args.problems, args.reflections, args.overrides))
        return
    # late: retry success over the last half of the steps; all: over every step
    compare(args, METHODS, lambda method, seed, folder: run(method, seed, args.steps, folder, args.overrides),
            figures=("late", "all"))


if __name__ == "__main__":
    main()
