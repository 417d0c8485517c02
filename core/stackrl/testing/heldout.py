"""Held-out measurements on the built-in task, for mechanism tests and their benchmark scripts.

- :func:`heldout_rollout`: held-out problems, a group of sampled completions each, with the outcome reward and
  GRPO's advantages, as the advantage stage would see them;
- :func:`advantage_context`: the context a ``reshape_advantages`` hook gets for such a rollout;
- :func:`written_rollout`: a rollout written by hand on two built-in problems, for rule tests, and
  :func:`right_and_wrong_rollout`, each of them answered right and then wrong (:data:`WRITTEN_SLIPS`);
- :func:`completion_logits`: a model's raw logits over a completion, for tests that write a loss out by hand;
- :func:`line_index`: the line of its completion each token falls on;
- :func:`greedy_accuracy`, :func:`train_and_measure` and :func:`against_grpo`: held-out accuracy after a short
  run, of a recipe and of the same recipe without its plugins (:func:`without_plugins`); :func:`sampling_noise`,
  the margin such a figure is read with, and :func:`assert_accuracy_holds`, the check that the plugins cost no
  accuracy beyond it;
- :func:`recipe_config`: a recipe's config for one seeded run, with or without its plugins, and
  :func:`trained_for` its trainer after a short run, with its plugin or as plain GRPO on single attempts;
- :func:`sampled_attempts`: a model's seeded sampled attempts at a config's held-out problems, the fixed attempts
  a benchmark has every model verify or retry;
- :func:`self_correction`: held-out self-correction of a model retrying its own attempts (``eval.skill: repair``),
  the figures of the two-attempt methods' benchmarks, and :func:`self_correction_after` the same after a short run
  of a recipe or of plain GRPO.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from dataclasses import replace
from pathlib import Path

import torch
import yaml

from stackrl.context import AdvantageContext, Rollout
from stackrl.rewards import exact_match
from stackrl.tasks.arithmetic import make_dataset


def grpo_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """TRL's default advantages: each reward minus its group's mean, over the group's standard deviation (a group
    of one has no spread, and its advantage is 0, where the sample deviation would be NaN)."""
    grouped = rewards.view(-1, group_size)
    centred = grouped - grouped.mean(1, keepdim=True)
    spread = grouped.std(1, keepdim=True) if group_size > 1 else torch.zeros_like(centred)
    return (centred / (spread + 1e-4)).flatten()


# Two built-in problems and their reference solutions, for rollouts written by hand.
WRITTEN_PROBLEMS = {
    "(4 * 2) + 3": "4 * 2 = 8\n8 + 3 = 11\nThe answer is 11.",
    "(3 + 5) - 2": "3 + 5 = 8\n8 - 2 = 6\nThe answer is 6.",
}

# A wrong solution of each written problem, slipping at its first step and carrying the slip to its answer.
WRITTEN_SLIPS = {
    "(4 * 2) + 3": "4 * 2 = 9\n9 + 3 = 12\nThe answer is 12.",
    "(3 + 5) - 2": "3 + 5 = 7\n7 - 2 = 5\nThe answer is 5.",
}


def written_rollout(tokenizer, problems: list[str], completions: list[str], advantages=None, group_size=2) -> Rollout:
    """Completion ``i`` answers "What is ``problems[i]``?" (a key of :data:`WRITTEN_PROBLEMS`); the rollout has the
    ``solution`` and ``answer`` columns, the ``exact_match`` reward of each completion and the given advantages."""
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    prompts = [f"What is {problem}?\n" for problem in problems]
    solutions = [WRITTEN_PROBLEMS[problem] for problem in problems]
    answers = [solution.rsplit(" ", 1)[1].rstrip(".") for solution in solutions]
    return Rollout(
        prompts=prompts, completions=list(completions), prompt_ids=[encode(p) for p in prompts],
        completion_ids=[encode(c) for c in completions], group_size=group_size,
        columns={"solution": solutions, "answer": answers},
        rewards={"exact_match": torch.tensor([exact_match(c, a) for c, a in zip(completions, answers)])},
        advantages=advantages,
    )


def right_and_wrong_rollout(tokenizer, advantages=(0.7, -0.7, 0.7, -0.7)) -> Rollout:
    """Two groups of two, one a written problem: its reference solution, then its slip (:data:`WRITTEN_SLIPS`),
    with the given advantages (by default GRPO's sign for each)."""
    problems = [problem for problem in WRITTEN_PROBLEMS for _ in range(2)]
    completions = [text for problem in WRITTEN_PROBLEMS for text in (WRITTEN_PROBLEMS[problem], WRITTEN_SLIPS[problem])]
    return written_rollout(tokenizer, problems, completions, advantages=torch.tensor(advantages))


def completion_logits(model, context: list[int], completion: list[int]) -> torch.Tensor:
    """The logits ``model`` predicts each token of ``completion`` from after ``context``, ``(len(completion), V)``,
    float64: one plain forward, no host code in between."""
    with torch.no_grad():
        logits = model(torch.tensor([context + completion])).logits[0].double()
    return logits[len(context) - 1 : len(context) + len(completion) - 1]


def heldout_rollout(trainer, size: int, seed: int, group_size: int = 4, temperature: float = 1.0) -> Rollout:
    """``size`` held-out problems, ``group_size`` completions each sampled by the policy as it is now."""
    rows = make_dataset(split="test", size=size, seed=seed)
    prompts = [q for q in rows["question"] for _ in range(group_size)]
    torch.manual_seed(seed)
    generations = trainer._shared_policy.generate(prompts, do_sample=True, temperature=temperature)
    columns = {k: [v for v in rows[k] for _ in range(group_size)] for k in ("answer", "solution", "category")}
    completions = [g.text for g in generations]
    rewards = torch.tensor([exact_match(c, a) for c, a in zip(completions, columns["answer"])])
    return Rollout(
        prompts=prompts,
        completions=completions,
        prompt_ids=[g.prompt_ids for g in generations],
        completion_ids=[g.completion_ids for g in generations],
        columns=columns,
        group_size=group_size,
        rewards={"exact_match": rewards},
        advantages=grpo_advantages(rewards, group_size),
    )


def advantage_context(trainer, rollout: Rollout, plugin: str = "", reward: str = "exact_match") -> AdvantageContext:
    """What the advantage stage hands a plugin for ``rollout``, its total reward the component ``reward`` (what it
    logs is dropped)."""
    return AdvantageContext(
        step=0, tokenizer=trainer.processing_class, policy=trainer._shared_policy, _log=lambda *_: None,
        _plugin=plugin, rollout=rollout, total_reward=rollout.rewards[reward],
    )


def line_index(tokenizer, completion_ids: list[int]) -> list[int]:
    """For each token, the number of line breaks its completion has before the token's first character."""
    lines, text = [], ""
    for token in completion_ids:
        lines.append(text.count("\n"))
        text = tokenizer.decode(completion_ids[: len(lines)], skip_special_tokens=True)
    return lines


def greedy_accuracy(trainer, size: int, seed: int) -> float:
    """Greedy exact-match accuracy on ``size`` held-out problems."""
    rows = make_dataset(split="test", size=size, seed=seed)
    greedy = trainer._shared_policy.generate(list(rows["question"]), do_sample=False)
    return sum(exact_match(g.text, a) for g, a in zip(greedy, rows["answer"])) / size


def train_and_measure(files, overrides=(), *, steps: int, heldout: int, seed: int) -> float:
    """Train the config ``files`` + ``overrides`` for ``steps`` steps; the greedy held-out accuracy after."""
    from stackrl.config import load_config
    from stackrl.run import build_trainer

    with tempfile.TemporaryDirectory() as out:
        config = load_config(
            list(files), [f"trainer.seed={seed}", f"trainer.max_steps={steps}", f"output_dir={out}", *overrides]
        )
        trainer = build_trainer(config)
        trainer.train()
        return greedy_accuracy(trainer, heldout, seed=1000 + seed)


@contextlib.contextmanager
def without_plugins(recipe):
    """The path of a temporary copy of the config file ``recipe`` without its plugins, their sections and their
    reward and loss weights: plain GRPO with the same settings."""
    tree = yaml.safe_load(Path(recipe).read_text())
    for name in tree.pop("plugins", []):
        tree.pop(name, None)
        for weights in (tree.get("rewards") or {}, tree.get("losses") or {}):
            weights.pop(name, None)
    with tempfile.TemporaryDirectory() as folder:
        plain = Path(folder) / "grpo.yaml"
        plain.write_text(yaml.safe_dump(tree))
        yield plain


def recipe_config(recipe, *, plugins: bool, seed: int, steps: int, output_dir, overrides=()):
    """The config file ``recipe`` at ``seed`` for ``steps`` steps, writing to ``output_dir``: as it is, or with
    ``plugins=False`` as plain GRPO (:func:`without_plugins`)."""
    from stackrl.config import load_config

    settings = [f"trainer.seed={seed}", f"trainer.max_steps={steps}", f"output_dir={output_dir}", *overrides]
    if plugins:
        return load_config([recipe], settings)
    with without_plugins(recipe) as plain:
        return load_config([plain], settings)


def against_grpo(recipe, overrides=(), *, steps: int, heldout: int, seed: int) -> dict[str, float]:
    """Held-out greedy accuracy after ``steps`` steps of ``recipe``, and of the same recipe without its plugins."""
    with without_plugins(recipe) as plain:
        return {
            "method": train_and_measure([recipe], overrides, steps=steps, heldout=heldout, seed=seed),
            "grpo": train_and_measure([plain], overrides, steps=steps, heldout=heldout, seed=seed),
        }


def sampling_noise(accuracy: float, samples: int) -> float:
    """The standard error of an accuracy measured on ``samples`` independent samples."""
    return math.sqrt(accuracy * (1 - accuracy) / samples)


def assert_accuracy_holds(recipe, *, steps: int, heldout: int, seed: int) -> None:
    """Fail unless ``recipe``'s held-out greedy accuracy after ``steps`` steps is at least plain GRPO's less its
    sampling noise (:func:`against_grpo`): a method whose signal helps must not cost the accuracy it trains for."""
    accuracy = against_grpo(recipe, steps=steps, heldout=heldout, seed=seed)
    floor = accuracy["grpo"] - sampling_noise(accuracy["grpo"], heldout)
    if accuracy["method"] < floor:
        raise AssertionError(f"held-out accuracy {accuracy} below plain GRPO's less its noise, {floor:.3f}")


def sampled_attempts(model, tokenizer, config, size: int) -> list[tuple[str, str, str]]:
    """``model``'s sampled attempts (seed 0, the config's completion length) at ``size`` problems of the test split
    of ``config``'s data: question, attempt, reference answer."""
    from stackrl.data import load_prompts
    from stackrl.tasks.pretrain import generate

    rows = load_prompts(config.host.data, split="test", size=size, keep_answer=True)
    questions, answers = list(rows["prompt"]), list(rows[config.host.data.answer_column])
    attempts = generate(model, tokenizer, questions, greedy=False, seed=0,
                        max_new_tokens=config.host.trainer["max_completion_length"])
    return list(zip(questions, attempts, answers))


def self_correction(model, tokenizer, config) -> dict[str, float]:
    """``config``'s held-out problems (``eval.size`` of them) attempted by ``model`` and each attempt retried after
    the built-in retry instruction (``eval.skill: repair``): ``net`` = (wrong -> right minus right -> wrong) over
    all problems, its halves ``fix`` (of wrong attempts) and ``keep`` (of right ones), and ``first``, the attempts'
    accuracy."""
    from stackrl.evaluation import evaluate

    evaluation = replace(config.host.eval, skill="repair")
    figures = evaluate(model, tokenizer, replace(config, host=replace(config.host, eval=evaluation)),
                       config.host.trainer["max_completion_length"])  # fmt: skip
    wrong, right = figures["wrong_attempts"], figures["right_attempts"]
    fixed, broken = figures["fix"] * wrong, (1 - figures["keep"]) * right
    return {"net": (fixed - broken) / (wrong + right), "fix": figures["fix"], "keep": figures["keep"],
            "first": right / (wrong + right)}  # fmt: skip


def trained_for(recipe, plugin: str, method: str, *, seed: int, steps: int, folder: Path, overrides=()):
    """The trainer of ``recipe`` at ``seed`` after ``steps`` steps (``folder`` for the run's outputs), and its config:
    with its plugin ``plugin`` where ``method`` names it, else as plain GRPO on single attempts (``exact_match``
    back on; overrides of the plugin's section go to the plugin's runs alone)."""
    from stackrl.run import build_trainer

    if method != plugin:
        overrides = [*(o for o in overrides if not o.startswith(f"{plugin}.")), "rewards.exact_match=1.0"]
    config = recipe_config(recipe, plugins=method == plugin, seed=seed, steps=steps,
                           output_dir=folder / f"{method}-{seed}", overrides=overrides)  # fmt: skip
    trainer = build_trainer(config)
    if steps:
        trainer.train()
    return trainer, config


def self_correction_after(recipe, plugin: str, method: str, *, seed: int, steps: int, folder: Path,
                          overrides=()) -> dict[str, float]:
    """:func:`self_correction` after ``steps`` steps of ``recipe`` (:func:`trained_for`)."""
    trainer, config = trained_for(recipe, plugin, method, seed=seed, steps=steps, folder=folder, overrides=overrides)
    return self_correction(trainer.model, trainer.processing_class, config)


def solution_logp(trainer, prompts: list[str], solutions: list[str]) -> float:
    """The mean over problems of the policy's per-token log-probability of each solution after its bare question."""
    encode = lambda text: trainer.processing_class(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    with torch.no_grad():
        scores = trainer._shared_policy.score(prompts, [encode(s) for s in solutions])
    per_row = (scores.logprobs * scores.mask).sum(1) / scores.mask.sum(1)
    return per_row.mean().item()


def solution_figures(trainer, prompts: list[str], solutions: list[str], answers: list[str]) -> dict[str, float]:
    """``solution_logp`` of the correct solutions and greedy ``accuracy`` on the problems: how far a run taught the
    bare question the verified approach (the benchmarks of methods whose teacher shows a stored solution)."""
    greedy = trainer._shared_policy.generate(prompts, do_sample=False)
    accuracy = sum(exact_match(g.text, a) for g, a in zip(greedy, answers)) / len(prompts)
    return {"solution_logp": solution_logp(trainer, prompts, solutions), "accuracy": accuracy}
