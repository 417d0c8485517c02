"""PivoARL's mechanism on the built-in task: retries from the pivotal step, and the credit split at it.

``measure`` trains one step of the CPU recipe (configs/recipes/pivoarl-cpu.yaml) and reads the step's own rollout:

- verbatim: the share of retries whose prompt is the question followed by their failed attempt's lines before its
  first wrong line, exactly;
- retry / fresh: the share of retries (continuations of a failed attempt from its first wrong line, the lines
  before it kept) that reach the answer, and the share of fresh attempts at the same questions that do, sampled by
  the same (untrained) policy: the signal a retry from the pivot finds near the error boundary;
- prefix / suffix: after the step, the change of the policy's mean log-prob of the retried failures' kept prefix
  lines, and of their wrong line and what follows: the credit split raises (or keeps) the first and lowers the
  second, where whole-trajectory credit (plain GRPO's, ``pivoarl.prefix_credit=outcome``) lowers both.

The main (``--methods``) compares held-out greedy accuracy after ``--steps`` steps of the recipe, of the recipe
with whole-trajectory credit (``outcome``) and of plain GRPO at each seed:

    OMP_NUM_THREADS=1 .venv/bin/python plugins/pivoarl/benchmarks/mechanism.py --seeds 0 1 2 --steps 8
"""

from __future__ import annotations

from pathlib import Path

import torch

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "pivoarl-cpu.yaml"
METHODS = ("pivoarl", "outcome", "grpo")


def _logps(model, context: list[int], completion: list[int]) -> torch.Tensor:
    from stackrl.testing.heldout import completion_logits

    logits = completion_logits(model, context, completion)
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(completion)[:, None])[:, 0]


def _fresh_success(model, tokenizer, question: str, answer: str, samples: int) -> float:
    from stackrl.rewards import exact_match

    ids = tokenizer(question, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=64,
                             num_return_sequences=samples, pad_token_id=tokenizer.pad_token_id)
    texts = tokenizer.batch_decode(out[:, ids.size(1):], skip_special_tokens=True)
    return sum(exact_match(t, answer) for t in texts) / samples


def _kept_verbatim(rollout, row: int, tokenizer) -> bool:
    """Whether retry ``row`` was sampled from its question and its failed attempt's lines before the first wrong
    one, exactly, and that line is its pivot."""
    from stackrl.blocks.roles import split_steps
    from stackrl.tasks import first_wrong_line

    columns, size = rollout.columns, rollout.group_size
    steps = split_steps(rollout.completions[(row // size) * size + columns["pivoarl_retry_of"][row]])
    pivot = columns["pivoarl_pivot"][row]
    kept = rollout.prompts[row] + "".join(steps[:pivot])
    return pivot == first_wrong_line(steps) and tokenizer.decode(rollout.prompt_ids[row]) == kept


def measure(seed: int, folder: Path, overrides=(), fresh_samples: int = 8) -> dict:
    """One step of the recipe; the retries' and fresh attempts' success and the log-prob changes (above)."""
    from stackrl.blocks.turns import NewlineTokens, line_spans
    from stackrl.config import load_config
    from stackrl.run import build_trainer
    from stackrl.tasks import BUILTIN_MODELS
    from stackrl_pivoarl.credit import prefix_end
    from transformers import AutoModelForCausalLM

    config = load_config([RECIPE], [f"trainer.seed={seed}", "trainer.max_steps=1", f"output_dir={folder / f'm{seed}'}",
                                    *overrides])
    trainer = build_trainer(config)
    before = AutoModelForCausalLM.from_pretrained(BUILTIN_MODELS[config.tree.model.name_or_path]()).eval()  # the start
    trainer.train()
    after, tokenizer = trainer.model.eval(), trainer.processing_class
    rollout = trainer._rollouts["train"]
    size, columns = rollout.group_size, rollout.columns
    reward = rollout.rewards["exact_match"]
    retries = [i for i, j in enumerate(columns["pivoarl_retry_of"]) if j >= 0]
    sources = sorted({(i // size) * size + columns["pivoarl_retry_of"][i] for i in retries})
    torch.manual_seed(seed)
    fresh = [_fresh_success(before, tokenizer, rollout.prompts[s], columns["answer"][s], fresh_samples)
             for s in sources]
    verbatim = [_kept_verbatim(rollout, i, tokenizer) for i in retries]
    newline = NewlineTokens(tokenizer)
    prefix, suffix = [], []
    for s in sources:
        context, completion = list(rollout.prompt_ids[s]), list(rollout.completion_ids[s])
        change = _logps(after, context, completion) - _logps(before, context, completion)
        cut = prefix_end(line_spans(completion, newline), columns["pivoarl_pivot"][s])
        if cut:
            prefix.append(change[:cut].mean().item())
        suffix.append(change[cut:].mean().item())
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    return {"verbatim": mean([float(v) for v in verbatim]), "retry": mean([float(reward[i] >= 1) for i in retries]),
            "fresh": mean(fresh),
            "prefix": mean(prefix), "suffix": mean(suffix), "retried": len(sources), "with_prefix": len(prefix)}


def run(method: str, seed: int, steps: int, folder: Path, overrides=(), eval_size: int = 200) -> dict:
    """Train ``method`` (``pivoarl``, ``outcome``: the same with whole-trajectory credit, ``grpo``: without the
    plugin) for ``steps`` steps; held-out greedy accuracy after, and the retries' success where it retries."""
    from stackrl.testing.fixtures import train_steps
    from stackrl.testing.heldout import greedy_accuracy, recipe_config

    extra = ["pivoarl.prefix_credit=outcome"] if method == "outcome" else []
    config = recipe_config(RECIPE, plugins=method != "grpo", seed=seed, steps=steps,
                           output_dir=folder / f"{method}-{seed}", overrides=[*extra, *overrides])
    trainer = train_steps(config)
    figures = {"accuracy": greedy_accuracy(trainer, eval_size, seed=1000 + seed)}
    for name in ("retry_success", "first_success"):
        values = [log[f"pivoarl/{name}"] for log in trainer.state.log_history if f"pivoarl/{name}" in log]
        if values:
            figures[name] = sum(values) / len(values)
    return figures


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=8, eval_size=200, methods=METHODS).parse_args()
    compare(args, args.methods,
            lambda method, seed, folder: run(method, seed, args.steps, folder, args.overrides, args.eval_size),
            figures=("accuracy", "retry_success", "first_success"))


if __name__ == "__main__":
    main()
