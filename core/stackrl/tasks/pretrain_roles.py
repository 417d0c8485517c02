"""Make the built-in ``stackrl/arith-roles`` checkpoint: ``stackrl/arith-skills`` taught three more roles, to corrupt
a solution (SPC's sneaky generator), to model the task's transitions forward and inverse (SWIRL's world model) and
to decompose a question for a separate solver and solve a decomposition (Role Anchor's pipeline).

Remake it (CPU, one thread, so the result does not depend on the core count; see
core/stackrl/assets/arith-roles/README.md for the command the shipped checkpoint was made with)::

    HF_HUB_OFFLINE=1 python -m stackrl.tasks.pretrain_roles --out core/stackrl/assets/arith-roles --init core/stackrl/assets/arith-skills --threads 1

One phase, from arith-skills' weights: first arith-skills' own attempts at ``--redo-problems`` training problems are
sampled (temperature 1, seeded) and the wrong ones kept, as the roles phase of :mod:`stackrl.tasks.pretrain` does;
then ``--steps`` of a mix where each example teaches one role drawn with the weights of ``--mix``. The earlier roles
(solve, read, judge, repair, redo, recheck, debate, pose, compare, mark) are made by
:func:`stackrl.tasks.pretrain._skills_batches` unchanged, so they do not fade; the new ones are

- "corrupt": :func:`stackrl.tasks.roles.corrupt_prompt` of a training problem's solution, the target a
  :func:`~stackrl.tasks.roles.slip` of it (one step's result, or the answer, moved by a small amount and carried on);
- "forward" and "inverse": one transition of a training problem (:mod:`stackrl.tasks.transitions`), the target the
  next state or the action;
- "decompose": the question after the decompose marker, the target its decomposition
  (:mod:`stackrl.tasks.decomposition`), with its results planted a :data:`~stackrl.tasks.decomposition.PLANTED_SHARE`
  of the time (so the shortcut a drifting decomposer takes is in its repertoire, rare);
- "subsolve": a decomposition, planted half the time, after which the solver works each line out.

Batches of 64, AdamW at a constant rate after 50 warmup steps, the loss a mean over examples (as the roles phase of
:mod:`stackrl.tasks.pretrain`; the same ``_fit`` and ``_example``). The checkpoint carries ``stackrl_pretrain.json``
with the settings, the hash of :data:`RECIPE` (the task, every role format and the training code, arith-skills'
recipe included), the hash of the starting weights and the figures of :func:`evaluate_roles` beside those of
:func:`stackrl.tasks.pretrain.evaluate` and :func:`~stackrl.tasks.pretrain.evaluate_skills`.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from stackrl.tasks.pretrain import (
    _RECIPE, RECORD_FILE, _example, _fit, _misses, _skills_batches, evaluate, evaluate_skills, file_hash, generate,
    recipe_hash,
)

__all__ = ["DEFAULT_MIX", "NEW_ROLES", "RECIPE", "evaluate_roles", "finish_snapshot", "main", "phase_main",
           "pretrain_roles"]

NEW_ROLES = ("corrupt", "forward", "inverse", "decompose", "subsolve")
DEFAULT_MIX = (
    "solve=0.5,read=0.25,judge=1,repair=0.5,redo=0.5,recheck=0.5,debate=0.5,pose=0.25,compare=0.5,mark=1,"
    "corrupt=2,forward=1.5,inverse=1.5,decompose=1,subsolve=2"
)
_SOLVER_PLANTED = 0.5  # the share of decompositions shown to the solver in training with their results planted


def _roles_batches(tokenizer, train, rng: random.Random, batch_size: int, mix: dict[str, float], misses=()):
    """Problems drawn from ``train`` with replacement, each taught in one role drawn with the weights of ``mix``:
    the roles of :func:`stackrl.tasks.pretrain._skills_batches` (made by it, from an rng of their own) and the new
    ones of :data:`NEW_ROLES` (the module docstring says what each is)."""
    from stackrl.tasks.decomposition import PLANTED_SHARE, decompose, decompose_prompt, solve_decomposition, solve_prompt
    from stackrl.tasks.roles import corrupt_prompt, slip
    from stackrl.tasks.transitions import forward_prompt, inverse_prompt, transitions

    earlier = {role: weight for role, weight in mix.items() if role not in NEW_ROLES}
    batches = _skills_batches(tokenizer, train, random.Random(rng.random()), 1, earlier, misses) if earlier else None
    roles = ["earlier", *(role for role in mix if role in NEW_ROLES)]
    weights = [sum(earlier.values()), *(mix[role] for role in roles[1:])]
    while True:
        batch = []
        for _ in range(batch_size):
            role = rng.choices(roles, weights)[0]
            if role == "earlier":
                batch += next(batches)
                continue
            row = train[rng.randrange(len(train))]
            question, solution = row["question"], row["solution"]
            if role == "corrupt":
                batch.append(_example(tokenizer, corrupt_prompt(question, solution), slip(solution, rng)))
            elif role in ("forward", "inverse"):
                state, action, following = rng.choice(transitions(question, solution))
                if role == "forward":
                    batch.append(_example(tokenizer, forward_prompt(state, action), following))
                else:
                    batch.append(_example(tokenizer, inverse_prompt(state, following), action))
            elif role == "decompose":
                target = decompose(question, planted=rng.random() < PLANTED_SHARE)
                batch.append(_example(tokenizer, decompose_prompt(question), target))
            else:
                shown = decompose(question, planted=rng.random() < _SOLVER_PLANTED)
                batch.append(_example(tokenizer, solve_prompt(shown), solve_decomposition(shown)))
        yield batch


def evaluate_roles(model, tokenizer, dataset, *, seed: int = 0) -> dict[str, dict]:
    """The figures of the new skills (:func:`stackrl.tasks.skills.measure_role`) on ``dataset``: corrupted
    solutions, decompositions and the solver's replies sampled at temperature 1 (as the policy writes them in RL),
    the judge's verdicts on the corrupted solutions and the transitions greedy."""
    from stackrl.rewards import exact_match
    from stackrl.tasks.skills import ROLE_SKILLS, measure_role

    questions, solutions, answers, categories = (
        list(dataset[c]) for c in ("question", "solution", "answer", "category")
    )
    sample = lambda texts, offset: generate(model, tokenizer, texts, greedy=False, seed=seed + 10 + offset)  # noqa: E731
    greedy = lambda texts, offset: generate(model, tokenizer, texts, max_new_tokens=128)  # noqa: E731
    right = lambda texts: [exact_match(t, a) for t, a in zip(texts, answers)]  # noqa: E731
    return {
        skill: measure_role(skill, questions, solutions, right, greedy if skill == "transition" else sample,
                            judge=greedy, categories=categories)
        for skill in ROLE_SKILLS
    }


# What decides the weights, besides the settings and the starting checkpoint: arith-skills' recipe (the task, the
# earlier roles and the training loop) and the new roles' formats and batches.
RECIPE = (
    *_RECIPE,
    "stackrl.tasks.roles:CORRUPT_TEMPLATE",
    "stackrl.tasks.roles:corrupt_prompt",
    "stackrl.tasks.transitions:FORWARD_TEMPLATE",
    "stackrl.tasks.transitions:INVERSE_TEMPLATE",
    "stackrl.tasks.transitions:_write",
    "stackrl.tasks.transitions:read_state",
    "stackrl.tasks.transitions:states",
    "stackrl.tasks.transitions:actions",
    "stackrl.tasks.transitions:transitions",
    "stackrl.tasks.decomposition:DECOMPOSE_TEMPLATE",
    "stackrl.tasks.decomposition:SOLVE_TEMPLATE",
    "stackrl.tasks.decomposition:NAMES",
    "stackrl.tasks.decomposition:PLANTED_SHARE",
    "stackrl.tasks.decomposition:decompose",
    "stackrl.tasks.decomposition:read_decomposition",
    "stackrl.tasks.decomposition:solve_decomposition",
    "stackrl.tasks.pretrain_roles:_roles_batches",
    "stackrl.tasks.pretrain_roles:_SOLVER_PLANTED",
    "stackrl.tasks.pretrain_roles:pretrain_roles",
)


def pretrain_roles(
    out: str | Path,
    *,
    init: str | Path,
    steps: int = 500,
    batch_size: int = 64,
    lr: float = 1e-3,
    warmup: int = 50,
    mix: str = DEFAULT_MIX,
    redo_problems: int = 512,
    train_size: int = 100_000,
    eval_per_category: int = 50,
    save_every: int = 0,
    seed: int = 0,
    threads: int | None = None,
) -> dict:
    """Train from ``init`` on the roles of ``mix`` (role=weight,...) for ``steps``, save the checkpoint in ``out``
    with its record, and return the figures (solving, the earlier skills and the new ones)."""
    settings = {name: str(value) if isinstance(value, Path) else value for name, value in locals().items()}
    recipe = recipe_hash(RECIPE)  # now, while the source on disk is the code running
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stackrl.tasks.arithmetic import CATEGORIES, make_dataset

    if threads:
        torch.set_num_threads(threads)
    random.seed(seed)
    torch.manual_seed(seed)
    test = make_dataset("test", eval_per_category * len(CATEGORIES), seed=seed)
    tokenizer, model = AutoTokenizer.from_pretrained(init), AutoModelForCausalLM.from_pretrained(init)
    n_params = sum(p.numel() for p in model.parameters())
    out = Path(out)

    def save(folder: Path, **record) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        record = {"settings": settings, "recipe_sha256": recipe,
                  "init_sha256": file_hash(Path(init) / "model.safetensors"), **record}
        (folder / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")

    train_s = 0.0
    misses = []
    if redo_problems:
        t_misses = time.time()
        misses = _misses(model, tokenizer, make_dataset("train", redo_problems, seed=seed + 4), seed)
        train_s += time.time() - t_misses
        print(f"{len(misses)} wrong attempts of {redo_problems}  {time.time() - t_misses:.0f}s", flush=True)
    weights = {role: float(weight) for role, weight in (part.split("=") for part in mix.split(","))}
    train = make_dataset("train", train_size, seed=seed + 5, distinct=False)
    batches = _roles_batches(tokenizer, train, random.Random(seed + 5), batch_size, weights, misses)
    train_s += _fit(
        model, tokenizer, batches, steps=steps, lr=lr, schedule=lambda s: min(1.0, (s + 1) / warmup), test=test,
        save_every=save_every, snapshot=lambda step: save(Path(f"{out}-roles{step}"), snapshot={"step": step}),
        per_example=True,
    )
    t_eval = time.time()
    summary = {
        "params": n_params,
        "train_seconds": round(train_s),
        "greedy": evaluate(model, tokenizer, test),
        "sampled": evaluate(model, tokenizer, test, greedy=False, seed=seed),
        "skills": evaluate_skills(model, tokenizer, test, seed=seed),
        "roles": evaluate_roles(model, tokenizer, test, seed=seed),
    }
    summary["eval_seconds"] = round(time.time() - t_eval)
    save(out, summary=summary)
    print(json.dumps(summary), flush=True)
    return summary


def finish_snapshot(folder: str | Path, train_seconds: int) -> dict:
    """Measure a snapshot a run saved (``--save-every``) and record it as the run of that many steps it is: the
    rate is constant after warmup and nothing else depends on the run's length, so the snapshot at step k is the
    model ``--steps k`` makes. Its record's settings take ``steps`` k and ``save_every`` 0, keep the run it came
    from under ``snapshot``, and gain the summary ``pretrain_roles`` would have written (``train_seconds`` as the
    run's log gave it at step k)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stackrl.tasks.arithmetic import CATEGORIES, make_dataset

    folder = Path(folder)
    record = json.loads((folder / RECORD_FILE).read_text())
    settings = record["settings"]
    if settings.get("threads"):
        torch.set_num_threads(settings["threads"])
    record["snapshot"] = {**record["snapshot"], "of_steps": settings["steps"], "out": settings["out"]}
    settings.update(steps=record["snapshot"]["step"], save_every=0, out=str(folder))
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    test = make_dataset("test", settings["eval_per_category"] * len(CATEGORIES), seed=settings["seed"])
    t_eval, seed = time.time(), settings["seed"]
    summary = {
        "params": sum(p.numel() for p in model.parameters()),
        "train_seconds": train_seconds,
        "greedy": evaluate(model, tokenizer, test),
        "sampled": evaluate(model, tokenizer, test, greedy=False, seed=seed),
        "skills": evaluate_skills(model, tokenizer, test, seed=seed),
        "roles": evaluate_roles(model, tokenizer, test, seed=seed),
    }
    summary["eval_seconds"] = round(time.time() - t_eval)
    record["summary"] = summary
    (folder / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(summary), flush=True)
    return summary


def phase_main(phase, argv: list[str] | None, *, starts_from: str, snapshots: str) -> None:
    """The command line of a phase that starts from an earlier built-in model: ``--out`` and ``--init``, then a flag
    for each other setting of ``phase`` with its default (``--save-every`` saves snapshots in OUT-<snapshots><step>),
    and the phase run with them."""
    import inspect

    parser = argparse.ArgumentParser(description=inspect.getmodule(phase).__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="checkpoint folder to write")
    parser.add_argument("--init", required=True, help=f"the checkpoint to start from ({starts_from})")
    for name, setting in inspect.signature(phase).parameters.items():
        if name not in ("out", "init"):
            saves = f"also save snapshots in OUT-{snapshots}<step>" if name == "save_every" else None
            kind = int if setting.default is None else type(setting.default)
            parser.add_argument("--" + name.replace("_", "-"), type=kind, default=setting.default, help=saves)
    phase(**vars(parser.parse_args(argv)))


def main(argv: list[str] | None = None) -> None:
    phase_main(pretrain_roles, argv, starts_from="arith-skills", snapshots="roles")


if __name__ == "__main__":
    main()
