"""The main the plugins' benchmark scripts share: each method compared, trained and measured at each seed, one
line a run as it ends, then the means over the seeds as a table.

- :func:`arguments`: the flags such scripts take (``--seeds``, and as they apply ``--steps``, ``--eval-size`` and
  ``--methods``, and ``key=value`` overrides of the recipe); a script adds its own to the parser it returns;
- :func:`compare`: the seeds × methods loop, with what differs passed in: ``run`` trains and measures one method
  at one seed, ``before`` measures the untrained model, ``figures`` names what is shown;
- :func:`changes`: one run's figures measured before and after training, as one dict;
- :func:`diagnosed`: the main of the benchmarks that measure a plugin's signal on held-out rollouts of the
  untrained model, then held-out greedy accuracy after a short run against plain GRPO
  (:func:`stackrl.testing.heldout.against_grpo`);
- :class:`ShortEvaluation`: the held-out evaluation of a mechanism test's short run of the script, and its noise;
- :func:`against_plain_grpo`: the main of the benchmarks whose ``run(method, seed, steps, folder, overrides, size)``
  measures one plugin's own rollout on held-out problems, after the plugin's runs and plain GRPO's (svrr1,
  selfcorrect);
- :func:`self_correcting`: the main of the two-attempt methods' benchmarks, held-out self-correction after a short
  run against plain GRPO (:func:`stackrl.testing.heldout.self_correction_after`);
- :func:`training_rollouts`: one short training run of a recipe given as a dict, with each step's training rollout
  measured as it ends (the environment runner's benchmarks measure the episodes they train on);
- :func:`recorded_generations`: every ``ctx.generate`` call one plugin makes, recorded at the policy (below the
  plugin), for a monitor that redoes the plugin's rule by hand from what it sampled (aero, saas).

A script keeps its ``run(...)`` (or what its mechanism test calls) and its main is a few lines: parse, then
``compare(args, methods, lambda method, seed, folder: ..., figures=...)``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch


@dataclass(frozen=True)
class ShortEvaluation:
    """A mechanism test's held-out evaluation: ``problems`` problems, ``samples`` sampled answers to each."""

    problems: int
    samples: int

    @property
    def overrides(self) -> list[str]:
        """The run's settings for it (and no progress bar in the test's output)."""
        return [f"eval.size={self.problems}", f"eval.samples={self.samples}", "trainer.disable_tqdm=true"]

    def noise(self, accuracy: float) -> float:
        """The standard error of an accuracy measured on every sample of it."""
        from stackrl.testing.heldout import sampling_noise

        return sampling_noise(accuracy, self.problems * self.samples)


def arguments(description: str, *, steps: int | None, eval_size: int | None = None, methods: Sequence[str] = (),
              seeds: Sequence[int] = (0, 1, 2)) -> argparse.ArgumentParser:
    """The parser of a benchmark script: ``--seeds`` (the seeds themselves), ``--steps`` (training steps a run;
    where ``steps`` is given), ``--eval-size`` (held-out problems; where ``eval_size`` is given), ``--methods``
    (which of ``methods`` to run, all by default; where more than one is given) and the recipe overrides."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(seeds))
    if steps is not None:
        parser.add_argument("--steps", type=int, default=steps)
    if eval_size is not None:
        parser.add_argument("--eval-size", type=int, default=eval_size, help="held-out problems measured")
    if len(methods) > 1:
        parser.add_argument("--methods", nargs="+", choices=list(methods), default=list(methods))
    # --seeds and --methods take every word after them: overrides go before them, or after a one-value option
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the recipe, for every run (not right "
                        "after --seeds or --methods)")
    return parser


def _value(figures: dict, name: str) -> float:
    """A figure, NaN where a run did not measure it (``None``: nothing to measure, e.g. an AUROC of one class)."""
    value = figures.get(name)
    return math.nan if value is None else float(value)


def _means(rows: list[dict], names: Sequence[str]) -> dict[str, float]:
    """The mean of each figure over the runs ``rows`` (NaN where any run lacks it)."""
    return {name: sum(_value(r, name) for r in rows) / len(rows) for name in names}


@contextlib.contextmanager
def one_thread():
    """Torch on one thread inside the block, restored after: the built-in models' small matmuls gain nothing from
    more, and threads spinning on a loaded machine made short mechanism tests take minutes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def recorded_generations(calls: list, caller: str):
    """Inside the block, every ``ctx.generate`` call of the plugin ``caller`` is appended to ``calls`` as
    ``(prompts, texts)``; the policy's generation is restored after."""
    from stackrl.policy import PolicyAccess

    original, wanted = PolicyAccess.generate, caller

    def generate(self, prompts, *, model="policy", caller="", **sampling):
        out = original(self, prompts, model=model, caller=caller, **sampling)
        if caller == wanted:
            calls.append((list(prompts), [g.text for g in out]))
        return out

    PolicyAccess.generate = generate
    try:
        yield
    finally:
        PolicyAccess.generate = original


def signal_flag(description: str, signal: Callable[..., dict]) -> bool:
    """Where the script was called with ``--signal``: print ``signal(seed, overrides=...)`` (a one-step measure of
    the mechanism) at each of ``--seeds`` and return True; else False, the script's main going on to train."""
    import sys

    if "--signal" not in sys.argv:
        return False
    sys.argv.remove("--signal")
    args = arguments(description, steps=None).parse_args()
    for seed in args.seeds:
        print(f"seed {seed}: {signal(seed, overrides=args.overrides)}", flush=True)
    return True


def compare(args: argparse.Namespace, methods: Sequence[str], run: Callable[[str, int, Path], dict], *,
            figures: Sequence[str] = (), before: Callable[[Path], dict] | None = None,
            number_format: str = ".3f") -> dict[str, list[dict]]:
    """Train and measure each of ``methods`` at each of ``args.seeds``: ``run(method, seed, folder)`` returns the
    run's figures (``folder``: a temporary folder for its outputs, shared by every run). ``before(folder)``, where
    given, measures the untrained model first. Prints those of ``figures`` (by default every number the runs
    returned) a run measured, in the format ``number_format``, as it ends; then the settings and a table of the means
    over the seeds. Returns each method's figures, a dict a seed, for what a script prints besides."""
    torch.set_num_threads(1)
    numbers = lambda found: [k for k, v in found.items() if isinstance(v, (int, float))]  # noqa: E731
    show = lambda found: "  ".join(f"{n} {_value(found, n):{number_format}}" for n in names if n in found)  # noqa: E731
    width = max(len(m) for m in (*methods, "before" if before else ""))
    results: dict[str, list[dict]] = {method: [] for method in methods}
    with tempfile.TemporaryDirectory() as tmp:
        untrained = {"before": before(Path(tmp))} if before else {}
        names = list(figures) or numbers(untrained.get("before", {}))
        if untrained:
            print(f"before training: {show(untrained['before'])}", flush=True)
        for seed in args.seeds:
            for method in methods:
                results[method].append(run(method, seed, Path(tmp)))
                if not figures:  # every number measured, a method's own among them
                    names += [name for name in numbers(results[method][-1]) if name not in names]
                print(f"seed {seed} {method:>{width}}: {show(results[method][-1])}", flush=True)
    settings = [f"{args.steps} steps"] if hasattr(args, "steps") else []
    settings.append(f"seeds {args.seeds}")
    if hasattr(args, "eval_size"):
        settings.append(f"held-out problems {args.eval_size}")
    print(f"\n{', '.join(settings)}, overrides {args.overrides}; means over the seeds")
    columns = [max(8, len(name)) for name in names]
    print(f"{'':>{width}} " + " ".join(f"{name:>{c}}" for name, c in zip(names, columns)))
    rows = {**untrained, **{method: _means(found, names) for method, found in results.items()}}
    for method, found in rows.items():
        cells = (f"{format(_value(found, name), number_format):>{c}}" for name, c in zip(names, columns))
        print(f"{method:>{width}} " + " ".join(cells))
    return results


def changes(before: dict, after: dict) -> dict:
    """The figures of a run measured before training (``name_before``) and after it (``name``), for :func:`compare`."""
    return {**{f"{name}_before": value for name, value in before.items()}, **after}


def diagnosed(description: str, recipe: Path, diagnose: Callable[[int, int], dict], figures: Sequence[str]) -> None:
    """The main of a benchmark that runs ``diagnose(problems, seed)`` (the plugin's signal on ``--problems``
    held-out problems, sampled by the untrained model) and then compares held-out greedy accuracy after
    ``--steps`` steps of ``recipe`` (``accuracy``) and of the same recipe without its plugins (``grpo_accuracy``),
    the overrides applied to both runs; one method, named after the recipe's plugin."""
    from stackrl.testing.heldout import against_grpo

    parser = arguments(description, steps=30, eval_size=128)
    parser.add_argument("--problems", type=int, default=64, help="held-out problems diagnosed")
    args = parser.parse_args()

    def run(method: str, seed: int, folder: Path) -> dict:
        accuracy = against_grpo(recipe, args.overrides, steps=args.steps, heldout=args.eval_size, seed=seed)
        return {**diagnose(args.problems, seed), "accuracy": accuracy["method"], "grpo_accuracy": accuracy["grpo"]}

    plugin = recipe.name.removesuffix("-cpu.yaml")
    compare(args, (plugin,), run, figures=(*figures, "accuracy", "grpo_accuracy"))


def against_plain_grpo(description: str, plugin: str, run: Callable[..., dict], figures: Sequence[str], *,
                       steps: int, eval_size: int) -> None:
    """Parse the shared flags (``--methods`` the plugin and ``grpo``) and :func:`compare`: ``run(method, seed,
    steps, folder, overrides, size)`` at each seed, and once for the untrained model (the plugin's run at 0 steps)."""
    args = arguments(description, steps=steps, eval_size=eval_size, methods=(plugin, "grpo")).parse_args()

    def measured(method: str, seed: int, steps: int, folder: Path) -> dict:
        return run(method, seed, steps, folder, args.overrides, args.eval_size)

    compare(args, args.methods, lambda method, seed, folder: measured(method, seed, args.steps, folder),
            figures=figures, before=lambda folder: measured(plugin, 0, 0, folder))


def self_correcting(description: str, plugin: str) -> None:
    """The main of a benchmark that trains the plugin's CPU recipe (``configs/recipes/<plugin>-cpu.yaml``) and the
    same recipe as plain GRPO (``grpo``) for ``--steps`` steps at each seed, and measures the untrained and each trained model's held-out self-correction on
    ``--eval-size`` problems: ``net``, ``fix``, ``keep`` and ``first``
    (:func:`stackrl.testing.heldout.self_correction`)."""
    from stackrl.testing.heldout import self_correction_after

    recipe = Path(__file__).resolve().parents[3] / "configs" / "recipes" / f"{plugin}-cpu.yaml"
    args = arguments(description, steps=30, eval_size=300).parse_args()
    overrides = [f"eval.size={args.eval_size}", *args.overrides]

    def run(method: str, seed: int, steps: int, folder: Path) -> dict:
        return self_correction_after(recipe, plugin, method, seed=seed, steps=steps, folder=folder, overrides=overrides)

    compare(args, ("grpo", plugin), lambda method, seed, folder: run(method, seed, args.steps, folder),
            figures=("net", "fix", "keep", "first"), before=lambda folder: run(plugin, 0, 0, folder),
            number_format="+.3f")


def training_rollouts(tree: dict, measure: Callable[[object], dict], *, seed: int, steps: int, overrides=()):
    """Train the recipe ``tree`` (a config as a dict) ``steps`` steps at ``seed`` with ``key=value`` ``overrides``,
    torch on one thread, in a temporary folder; returns ``measure`` of each step's training rollout, in order, and
    the trainer (its last rollout and loss inputs still on it)."""
    import yaml
    from transformers import TrainerCallback

    from stackrl.config import load_config
    from stackrl.run import build_trainer

    with one_thread(), tempfile.TemporaryDirectory() as out:
        recipe = Path(out) / "recipe.yaml"
        recipe.write_text(yaml.safe_dump(tree))
        settings = [f"trainer.seed={seed}", f"trainer.max_steps={steps}", f"output_dir={out}/run", *overrides]
        trainer = build_trainer(load_config([recipe], settings))
        seen: list[dict] = []

        class Measure(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                seen.append(measure(trainer._rollouts["train"]))

        trainer.add_callback(Measure())
        trainer.train()
    return seen, trainer


class LossAdvantages:
    """Wraps a trainer's ``_compute_loss`` to check the per-token advantages where TRL's loss receives them: each
    micro-batch row's against ``want(rollout)`` (each row's per-token advantages, computed once a training rollout;
    ``None``: a rollout not checked), within ``atol``. ``counts`` holds ``batches`` (rollouts checked), ``rows`` and
    ``mismatches``, and whatever ``want`` adds to it; ``notes`` the first five mismatches (row, received, wanted)."""

    def __init__(self, trainer, want: Callable, atol: float = 1e-5):
        from collections import Counter

        from stackrl.trainer import ROW_INDEX

        self.trainer, self.original, self.want_of, self.atol, self.row_index = (
            trainer, trainer._compute_loss, want, atol, ROW_INDEX)
        self.seen, self.want = None, None
        self.counts, self.notes = Counter(), []
        trainer._compute_loss = self

    def __call__(self, model, inputs):
        rollout = self.trainer._rollouts["train"]
        if rollout is not self.seen:
            self.seen, self.want = rollout, self.want_of(rollout)
            self.counts["batches"] += self.want is not None
        if self.want is not None:
            for i, row in enumerate(inputs[self.row_index].tolist()):
                n = len(rollout.completion_ids[row])
                received = inputs["advantages"][i]
                received = received[:n] if received.dim() else received.expand(n)
                self.counts["rows"] += 1
                want = torch.tensor(self.want[row])
                if not torch.allclose(received.detach().cpu().float(), want, atol=self.atol):
                    self.counts["mismatches"] += 1
                    if len(self.notes) < 5:
                        self.notes.append((row, received.tolist()[:24], self.want[row][:24]))
        return self.original(model, inputs)


def trained_solution_figures(recipe, *, plugins: bool, seed: int, steps: int, overrides=()):
    """Train the config file ``recipe`` (``plugins=False``: as plain GRPO) for ``steps`` steps on one thread,
    measuring :func:`stackrl.testing.heldout.solution_figures` on the run's own pool before and after:
    ``(before, after, trainer, answers)``, ``answers`` the pool's answer to each prompt."""
    from stackrl.run import build_trainer
    from stackrl.testing.heldout import recipe_config, solution_figures

    with one_thread(), tempfile.TemporaryDirectory() as out:
        trainer = build_trainer(recipe_config(recipe, plugins=plugins, seed=seed, steps=steps, output_dir=out,
                                              overrides=overrides))
        rows = trainer.train_dataset
        prompts, answers, solutions = list(rows["prompt"]), list(rows["answer"]), list(rows["solution"])
        before = solution_figures(trainer, prompts, solutions, answers)
        trainer.train()
        after = solution_figures(trainer, prompts, solutions, answers)
    return before, after, trainer, dict(zip(prompts, answers))
