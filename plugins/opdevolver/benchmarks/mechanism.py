"""OPD-Evolver's mechanism on the built-in task: outcome-calibrated attribution tells helpful memory from harmful,
and the plain rows are distilled from a teacher shown hindsight, the student seeing no memory.

run(): a short run of configs/recipes/opdevolver-cpu.yaml whose library starts with a correct trial (the worked
solution) of every other pool question. A group's candidates are then its own question's trial, where there is one
(helpful: the built-in model copies it), and trials of other questions (harmful: it copies their answer, though each
was correct where it came from). Measured on the run: each attribution's with/without gap by kind (same question or
another), and every distillation the loss term scores: whether the student's context holds memory, whether the
teacher's holds the row's hindsight, and on rows whose teacher saw no memory, how much more the teacher than the
student raises the completion's tokens when the completion is right than when it is wrong.

main: the CPU recipe against the same recipe as plain GRPO at equal steps, three seeds: greedy accuracy on the
training pool and on held-out problems, asked without memory (the deployable policy).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/opdevolver/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl.blocks.experience import Experience
from stackrl.policy import PolicyAccess
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import greedy_accuracy, recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "opdevolver-cpu.yaml"


def seed_library(trainer, plugin) -> dict[str, dict]:
    """Each pool question as ``{question: {answer, solution, seeded}}``; every other one (in pool order) gets its
    worked solution stored as a correct trial."""
    pool = trainer.train_dataset
    questions = {}
    for i, (prompt, answer, solution) in enumerate(zip(pool["prompt"], pool["answer"], pool["solution"])):
        seeded = i % 2 == 0
        questions[prompt] = {"answer": answer, "solution": solution, "seeded": seeded}
        if seeded:
            encode = lambda text: trainer.processing_class(text, add_special_tokens=False)["input_ids"]  # noqa: E731
            plugin.library.add(Experience(prompt_ids=encode(prompt), completion_ids=encode(solution), prompt=prompt,
                                          completion=solution, rewards={"exact_match": 1.0}, key=f"seed:{i}"))
    return questions


class Distillations:
    """Every scoring of the loss term: teacher calls (no gradient, full vocabulary) and student calls (gradient)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.teacher, self.student = tokenizer, [], []

    def recording(self, score):
        def scored(policy, contexts, continuation_ids, **options):
            result = score(policy, contexts, continuation_ids, **options)
            if options.get("full_vocab"):
                rows = (result.logprobs * result.mask).sum(1) / result.mask.sum(1).clamp_min(1)
                side = self.student if options.get("grad") else self.teacher
                for context, ids, value in zip(contexts, continuation_ids, rows.tolist()):
                    text = context if isinstance(context, str) else self.tokenizer.decode(context)
                    side.append((text, tuple(ids), value))
            return result
        return scored


def figures(events, distillations: Distillations, questions: dict[str, dict]) -> dict[str, float]:
    """The attribution gaps by kind, and what the distillations' contexts held and their scores told apart."""
    same = [gap for kind, gap in events if kind == "same"]
    other = [gap for kind, gap in events if kind == "other"]
    student = {ids: (text, value) for text, ids, value in distillations.student}
    memory_in_student = [text not in questions for text, _ in student.values()]
    hindsight, right, wrong = [], [], []
    for text, ids, value in distillations.teacher:
        question = next(q for q in questions if text.endswith(q))
        facts = questions[question]
        hindsight.append(facts["solution"] in text)
        if text == f"{facts['solution']}\n\n{question}" and ids in student:  # the teacher saw hindsight only
            correct = exact_match(distillations.tokenizer.decode(list(ids), skip_special_tokens=True), facts["answer"])
            (right if correct else wrong).append(value - student[ids][1])
    mean = lambda values: sum(values) / len(values) if values else float("nan")  # noqa: E731
    return {"gap_same": mean(same), "gap_other": mean(other), "attributions": len(events),
            "memory_in_student": mean(memory_in_student), "hindsight_in_teacher": mean(hindsight),
            "lift_right": mean(right), "lift_wrong": mean(wrong), "distilled": len(distillations.teacher)}


def run(seed: int = 0, steps: int = 2, overrides=()) -> dict[str, float]:
    """A short run of the CPU recipe from a seeded library, measured as the module's docstring says."""
    with one_thread(), tempfile.TemporaryDirectory() as out:
        events = []  # (kind, gap) of every attribution, read from the plugin after each advantage stage

        def monitor(hook, name, kwargs, result):
            if hook == "reshape_advantages" and name == "opdevolver":
                for prompt, record, gap in plugin.attributions:
                    events.append(("same" if record.prompt == prompt else "other", gap))

        trainer = build_trainer(recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=out,
                                              overrides=overrides), monitor=monitor)
        plugin = trainer.plugins.plugins["opdevolver"]
        questions = seed_library(trainer, plugin)
        distillations, score = Distillations(trainer.processing_class), PolicyAccess.score
        PolicyAccess.score = distillations.recording(score)
        try:
            trainer.train()
        finally:
            PolicyAccess.score = score
    return figures(events, distillations, questions)


def trained(method: str, seed: int, steps: int, folder: Path, overrides, size: int) -> dict[str, float]:
    """Greedy accuracy, asked without memory, on the training pool and on ``size`` held-out problems after
    ``steps`` steps of the recipe (``opdevolver``) or of the same recipe as plain GRPO (``grpo``)."""
    with one_thread():
        config = recipe_config(RECIPE, plugins=method != "grpo", seed=seed, steps=steps, output_dir=folder / method,
                               overrides=overrides)
        trainer = build_trainer(config)
        if steps:
            trainer.train()
        pool = trainer.train_dataset
        greedy = trainer._shared_policy.generate(list(pool["prompt"]), do_sample=False)
        on_pool = sum(exact_match(g.text, a) for g, a in zip(greedy, pool["answer"])) / len(pool)
        return {"pool": on_pool, "heldout": greedy_accuracy(trainer, size, seed=1000 + seed)}


def main():
    from stackrl.testing.benchmark import against_plain_grpo

    against_plain_grpo(__doc__.splitlines()[0], "opdevolver", trained, ("pool", "heldout"), steps=30,
                       eval_size=128)


if __name__ == "__main__":
    main()
