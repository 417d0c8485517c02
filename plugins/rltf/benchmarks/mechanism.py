"""RLTF's mechanism on the built-in task: what self-distillation and feedback modelling move, against plain GRPO.

Before training, the untrained model attempts each problem of the recipe's pool (configs/recipes/rltf-cpu.yaml,
stackrl/arith-skills, ``--attempts`` sampled attempts a problem); each failed attempt the rule critic can read
gets its check and one sampled second attempt after it (the plugin's templates). Those are the probes, the same
for every method at a seed. Before and after each run we measure, with the model's own forward:

- ``fixed_logp``: the mean per-token log-probability of the second attempts that are right (the ones the
  feedback fixed) after the bare question: what self-distillation raises;
- ``unfixed_logp``: the same for the second attempts still wrong: what it lowers, where the group's first attempts
  were right some of the time (their advantage is ``0 - mean r1``);
- ``feedback_nll``: the per-token negative log-likelihood of the critic's check after the question and the failed
  attempt: what feedback modelling lowers;
- ``accuracy``: greedy accuracy on ``--eval-size`` held-out problems: the single-turn skill the paper raises;
- ``second_success``: a run's share of second attempts that were right, over its steps (rltf runs only).

Methods: ``both`` (the recipe), ``sd`` and ``fm`` (one term), ``grpo`` (the recipe without its plugin).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rltf/benchmarks/mechanism.py --seeds 0 1 2 --steps 12
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import NamedTuple

import torch

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rltf-cpu.yaml"
FIGURES = ("fixed_logp_before", "fixed_logp", "unfixed_logp_before", "unfixed_logp", "feedback_nll_before",
           "feedback_nll", "accuracy_before", "accuracy", "second_success")


class Probe(NamedTuple):
    prompt: str  # the bare question
    second: str  # the second attempt after the feedback
    fixed: bool  # whether it is right
    asked: str  # the prompt the feedback answers (question and failed attempt)
    feedback: str  # the critic's check of the failed attempt


def probes(model, tokenizer, settings, length: int, questions: list[str], answers: list[str], attempts: int,
           seed: int) -> list[Probe]:
    """The untrained model's failed attempts at ``questions``, the critic's feedback on each and a second attempt."""
    from stackrl.rewards import exact_match
    from stackrl.tasks.pretrain import generate
    from stackrl_rltf.feedback import critic_feedback

    shown = [(q, a) for q, a in zip(questions, answers) for _ in range(attempts)]
    first = generate(model, tokenizer, [q for q, _ in shown], greedy=False, seed=seed, max_new_tokens=length)
    failed = [(q, a, t, critic_feedback(t)) for (q, a), t in zip(shown, first) if not exact_match(t, a)]
    failed = [row for row in failed if row[3] is not None]
    retries = [settings.retry_template.format(prompt=q, attempt=t, feedback=f) for q, _, t, f in failed]
    seconds = generate(model, tokenizer, retries, greedy=False, seed=seed + 1, max_new_tokens=length)
    return [Probe(q, s, exact_match(s, a) == 1.0, settings.feedback_template.format(prompt=q, attempt=t), f)
            for (q, a, t, f), s in zip(failed, seconds)]


def mean_logp(model, tokenizer, pairs: list[tuple[str, str]]) -> float:
    """The mean over ``(context, continuation)`` pairs of the continuation's per-token log-probability, its end of
    sequence included (NaN for no pairs)."""
    from stackrl.testing.heldout import completion_logits

    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    values = []
    for context, continuation in pairs:
        ids = encode(continuation) + [tokenizer.eos_token_id]
        logps = torch.log_softmax(completion_logits(model, encode(context), ids), -1)
        values.append(logps.gather(1, torch.tensor(ids)[:, None]).mean().item())
    return sum(values) / len(values) if values else float("nan")


def measure(trainer, found: list[Probe], eval_size: int, seed: int) -> dict[str, float]:
    from stackrl.testing.heldout import greedy_accuracy

    model, tokenizer = trainer.model, trainer.processing_class
    model.eval()
    return {
        "fixed_logp": mean_logp(model, tokenizer, [(p.prompt, p.second) for p in found if p.fixed]),
        "unfixed_logp": mean_logp(model, tokenizer, [(p.prompt, p.second) for p in found if not p.fixed]),
        "feedback_nll": -mean_logp(model, tokenizer, [(p.asked, p.feedback) for p in found]),
        "accuracy": greedy_accuracy(trainer, eval_size, seed) if eval_size else float("nan"),
    }


def run(seed: int, steps: int, method: str = "both", overrides=(), *, attempts: int = 4, eval_size: int = 64,
        folder: Path | None = None) -> tuple[dict, dict, dict]:
    """``(before, after, run)``: the figures before and after ``steps`` steps of the recipe (``method`` ``both``,
    ``sd``, ``fm``, or ``grpo``: without its plugin), the probes' counts and the run's ``second_success``."""
    from stackrl.run import build_trainer
    from stackrl.testing.heldout import recipe_config

    if method == "grpo":
        overrides = [o for o in overrides if not o.startswith("rltf.")]
    else:
        overrides = [f"rltf.variant={method}", *overrides]
    with tempfile.TemporaryDirectory(dir=folder) as out:
        config = recipe_config(RECIPE, plugins=method != "grpo", seed=seed, steps=steps, output_dir=out,
                               overrides=["trainer.disable_tqdm=true", *overrides])
        settings = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=out).plugin_configs["rltf"]
        trainer = build_trainer(config)
        rows = trainer.train_dataset
        found = probes(trainer.model, trainer.processing_class, settings, config.host.trainer["max_completion_length"],
                       list(rows["prompt"]), list(rows["answer"]), attempts, seed)
        before = measure(trainer, found, eval_size, seed)
        trainer.train()
        after = measure(trainer, found, eval_size, seed)
    seconds = [log["rltf/second_success"] for log in trainer.state.log_history if "rltf/second_success" in log]
    counts = {"fixed": sum(p.fixed for p in found), "unfixed": sum(not p.fixed for p in found),
              "second_success": sum(seconds) / len(seconds) if seconds else float("nan")}
    return before, after, counts


def main() -> None:
    from stackrl.testing.benchmark import arguments, changes, compare

    parser = arguments(__doc__.split("\n\n")[0], steps=12, eval_size=64, methods=("both", "sd", "fm", "grpo"))
    parser.add_argument("--attempts", type=int, default=4, help="sampled first attempts a problem, for the probes")
    args = parser.parse_args()

    def one(method: str, seed: int, folder: Path) -> dict:
        before, after, counts = run(seed, args.steps, method, args.overrides, attempts=args.attempts,
                                    eval_size=args.eval_size, folder=folder)
        return {**changes(before, after), **counts}

    compare(args, args.methods, one, figures=(*FIGURES, "fixed", "unfixed"), number_format=".4f")


if __name__ == "__main__":
    main()
