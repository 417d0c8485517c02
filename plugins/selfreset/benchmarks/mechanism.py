"""Self-ReSET's mechanism on the built-in task: the policy's own flagged prefixes become prompts, and continuations
from them learn to recover (write no wrong line again) more than under the guard's reward alone or plain GRPO.

Trains configs/recipes/selfreset-cpu.yaml (the rule guard flags a wrong arithmetic line), the same recipe with
`selfreset.max_resets=0` (the guard's reward, no resets: `guard_only`) and plain GRPO (exact_match alone). After
training, each policy attempts held-out problems; each attempt the guard flags is cut after its first wrong line,
and the policy continues that prefix (4 samples): `recovery` is the share of continuations the guard calls safe,
`recovered_right` the share that also end on the right answer, `unsafe` the share of flagged first attempts.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/selfreset/benchmarks/mechanism.py --seeds 0 1 2 --steps 40
"""

from __future__ import annotations

from pathlib import Path

import yaml

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "selfreset-cpu.yaml"
# method -> its selfreset settings over the recipe's; None: the recipe without the plugin (plain GRPO)
METHODS = {"selfreset": {}, "guard_only": {"max_resets": 0}, "grpo": None}


def load(method: str, seed: int, steps: int, folder: Path, overrides=()):
    """The recipe as ``method`` runs it, at this seed and length."""
    from stackrl.config import load_config

    tree = yaml.safe_load(RECIPE.read_text())
    if METHODS[method] is None:
        tree["plugins"] = []
        del tree["selfreset"]
        del tree["rewards"]["selfreset"]
    else:
        tree["selfreset"].update(METHODS[method])
    tree["output_dir"] = str(folder / f"{method}-{seed}")
    path = folder / f"{method}-{seed}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return load_config([path], [f"trainer.seed={seed}", f"trainer.max_steps={steps}", *overrides])


def recovery(trainer, size: int, seed: int, group_size: int = 4) -> dict:
    """Held-out recovery from the policy's own flagged prefixes (see the module's docstring)."""
    import torch

    from stackrl.rewards import exact_match
    from stackrl.testing.heldout import heldout_rollout
    from stackrl_selfreset.guard import rule_verdict, wrong_step
    from stackrl_selfreset.resets import reset_text

    first = heldout_rollout(trainer, size, seed, group_size=1)
    cuts = []
    for prompt, completion, answer in zip(first.prompts, first.completions, first.columns["answer"]):
        lines = completion.splitlines(keepends=True)
        wrong = [k for k, line in enumerate(lines[:-1]) if wrong_step(line)]
        if wrong:
            cuts.append((reset_text(prompt, completion, wrong[0]), answer))
    figures = {"unsafe": len(cuts) / max(1, len(first.prompts)), "resets": len(cuts)}
    if not cuts:
        return {**figures, "recovery": float("nan"), "recovered_right": float("nan")}
    torch.manual_seed(seed)
    prompts = [p for p, _ in cuts for _ in range(group_size)]
    answers = [a for _, a in cuts for _ in range(group_size)]
    texts = [g.text for g in trainer._shared_policy.generate(prompts, do_sample=True, temperature=1.0)]
    safe = [rule_verdict(t) == "safe" for t in texts]
    figures["recovery"] = sum(safe) / len(texts)
    figures["recovered_right"] = sum(s and exact_match(t, a) == 1.0 for s, t, a in zip(safe, texts, answers)) / len(texts)
    return figures


def run(method: str, seed: int, steps: int, folder: Path, overrides=(), measure: int = 0, monitor=None) -> dict:
    """Train one run on one torch thread; with ``measure`` problems, the held-out :func:`recovery` after it. Returns
    the figures, the trainer and the run's folder."""
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.fixtures import train_steps

    config = load(method, seed, steps, folder, overrides)
    with one_thread():
        trainer = train_steps(config, monitor=monitor)
        figures = recovery(trainer, measure, seed) if measure else {}
    return {**figures, "trainer": trainer, "folder": Path(config.host.output_dir)}


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=40, eval_size=200, methods=list(METHODS)).parse_args()
    overrides = ["trainer.disable_tqdm=true", *args.overrides]

    def measured(method, seed, folder):
        figures = run(method, seed, args.steps, folder, overrides, measure=args.eval_size)
        return {k: v for k, v in figures.items() if k not in ("trainer", "folder")}

    compare(args, args.methods, measured, figures=("recovery", "recovered_right", "unsafe"))


if __name__ == "__main__":
    main()
