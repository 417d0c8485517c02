"""Make the built-in ``stackrl/arith-code`` checkpoint: ``stackrl/arith-roles`` taught to answer the arithmetic task
with a Python program (:mod:`stackrl.tasks.programs`) and to write the SQL query of a text-to-SQL question
(:mod:`stackrl.tasks.sql`), so that rewards that run the policy's code or queries have signal.

Remake it (CPU, one thread, so the result does not depend on the core count; see
core/stackrl/assets/arith-code/README.md for the command the shipped checkpoint was made with)::

    HF_HUB_OFFLINE=1 python -m stackrl.tasks.pretrain_code --out core/stackrl/assets/arith-code --init core/stackrl/assets/arith-roles --threads 1

One phase, from arith-roles' weights: first arith-roles' own attempts at ``--redo-problems`` training problems are
sampled and the wrong ones kept (the retry examples of the earlier roles); then ``--steps`` of a mix where each
example teaches one role drawn with the weights of ``--mix``. The earlier roles (arith-skills' and arith-roles')
are made by :func:`stackrl.tasks.pretrain_roles._roles_batches` unchanged, so they do not fade; the new ones are

- "code": a training question after the code marker (:func:`stackrl.tasks.programs.code_prompt`), the target its
  program (:func:`~stackrl.tasks.programs.write_program`);
- "sql": a training problem of the SQL task (its question is the whole prompt), the target its query.

Batches of 64, AdamW at a constant rate after 50 warmup steps, the loss a mean over examples (the same ``_fit`` and
``_example`` as the earlier phases). The checkpoint carries ``stackrl_pretrain.json`` with the settings, the hash
of :data:`RECIPE` (arith-roles' recipe, the program format and the SQL task), the hash of the starting weights
and the figures of :func:`evaluate_code` beside solving's (:func:`stackrl.tasks.pretrain.evaluate`).

Programs are run by :func:`stackrl.tasks.programs.run_program` (a plain subprocess with a timeout) and queries by
:func:`stackrl.tasks.sql.run_query` (sqlite3 in memory), not by the sandbox block: they are the built-in model's
own programs, written for the task's questions.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from stackrl.tasks.pretrain import RECORD_FILE, _by_category, _example, _fit, _misses, evaluate, file_hash, generate
from stackrl.tasks.pretrain import recipe_hash
from stackrl.tasks.pretrain_roles import RECIPE as ROLES_RECIPE
from stackrl.tasks.pretrain_roles import _roles_batches, phase_main

__all__ = ["DEFAULT_MIX", "NEW_ROLES", "RECIPE", "evaluate_code", "main", "pretrain_code"]

NEW_ROLES = ("code", "sql")
DEFAULT_MIX = (
    "solve=1,read=0.25,judge=0.5,repair=0.25,redo=0.25,recheck=0.25,debate=0.25,pose=0.25,compare=0.25,mark=0.5,"
    "corrupt=0.5,forward=0.5,inverse=0.5,decompose=0.5,subsolve=0.5,code=1.5,sql=6"
)
_SQL_TOKENS = 128  # new tokens a query may take when measured (the longest reference query takes 80)


def _code_batches(tokenizer, train, rng: random.Random, batch_size: int, mix: dict[str, float], misses=()):
    """Examples each teaching one role drawn with the weights of ``mix``: the roles of arith-roles (made by
    :func:`stackrl.tasks.pretrain_roles._roles_batches` from an rng of their own, on ``train``) and the new ones of
    :data:`NEW_ROLES` (the module docstring says what each is; SQL problems drawn fresh, of the train split)."""
    from stackrl.tasks.arithmetic import split_of
    from stackrl.tasks.programs import code_prompt, write_program
    from stackrl.tasks.sql import CATEGORIES as SQL_CATEGORIES
    from stackrl.tasks.sql import make_problem

    earlier = {role: weight for role, weight in mix.items() if role not in NEW_ROLES}
    batches = _roles_batches(tokenizer, train, random.Random(rng.random()), 1, earlier, misses) if earlier else None
    roles = ["earlier", *(role for role in mix if role in NEW_ROLES)]
    weights = [sum(earlier.values()), *(mix[role] for role in roles[1:])]
    while True:
        batch = []
        for _ in range(batch_size):
            role = rng.choices(roles, weights)[0]
            if role == "earlier":
                batch += next(batches)
            elif role == "code":
                question = train[rng.randrange(len(train))]["question"]
                batch.append(_example(tokenizer, code_prompt(question), write_program(question)))
            else:
                problem = make_problem(rng, rng.choice(SQL_CATEGORIES))
                while split_of(problem["question"]) != "train":
                    problem = make_problem(rng, problem["category"])
                batch.append(_example(tokenizer, problem["question"], problem["solution"]))
        yield batch


def evaluate_code(model, tokenizer, arithmetic, sql, *, seed: int = 0) -> dict[str, dict]:
    """The new skills, greedy and sampled at temperature 1: on the arithmetic problems ``arithmetic``, the shares of
    programs that run to a clean exit (``runs``) and that print the answer (``right``); on the SQL problems
    ``sql``, the shares of queries that sqlite3 parses, that run, and whose result is the reference query's
    (``right``); each overall ("all") and per category."""
    from stackrl.tasks.programs import code_prompt, prints_answer, run_program
    from stackrl.tasks.sql import run_query, same_result

    figures: dict[str, dict] = {"code": {}, "sql": {}}
    for mode, greedy in (("greedy", True), ("sampled", False)):
        programs = generate(model, tokenizer, [code_prompt(q) for q in arithmetic["question"]], greedy=greedy,
                            seed=seed + 20)
        runs = [run_program(program) for program in programs]
        categories = arithmetic["category"]
        figures["code"][mode] = {
            "runs": _by_category([run.returncode == 0 for run in runs], categories),
            "right": _by_category([prints_answer(run, a) for run, a in zip(runs, arithmetic["answer"])], categories),
        }
        queries = generate(model, tokenizer, sql["question"], greedy=greedy, seed=seed + 21, max_new_tokens=_SQL_TOKENS)
        done = [run_query(setup, query) for setup, query in zip(sql["setup"], queries)]
        references = [run_query(setup, query).rows for setup, query in zip(sql["setup"], sql["solution"])]
        figures["sql"][mode] = {
            "parses": _by_category([run.parsed for run in done], sql["category"]),
            "runs": _by_category([run.rows is not None for run in done], sql["category"]),
            "right": _by_category([same_result(run.rows, want) for run, want in zip(done, references)],
                                  sql["category"]),
        }
    return figures


# What decides the weights, besides the settings and the starting checkpoint: arith-roles' recipe (the task, every
# earlier role and the training loop), the program format and the SQL task.
RECIPE = (
    *ROLES_RECIPE,
    "stackrl.tasks.programs:CODE_TEMPLATE",
    "stackrl.tasks.programs:VARIABLES",
    "stackrl.tasks.programs:write_program",
    "stackrl.tasks.decomposition:_operations",
    "stackrl.tasks.sql:SQL_MARKER",
    "stackrl.tasks.sql:_QUESTION_PREFIX",
    "stackrl.tasks.sql:SCHEMAS",
    "stackrl.tasks.sql:NAMES",
    "stackrl.tasks.sql:CATEGORIES",
    "stackrl.tasks.sql:_ask",
    "stackrl.tasks.sql:_render",
    "stackrl.tasks.sql:make_problem",
    "stackrl.tasks.pretrain_code:_code_batches",
    "stackrl.tasks.pretrain_code:pretrain_code",
)


def _measure(model, tokenizer, *, eval_per_category: int, seed: int) -> dict:
    """Every figure the record holds: solving (greedy and sampled) and the new skills. The earlier roles are not
    measured again (a machine shared by five runs could not spare the time; their examples were in the mix):
    :func:`stackrl.tasks.pretrain.evaluate_skills` and :func:`stackrl.tasks.pretrain_roles.evaluate_roles` measure
    them on any checkpoint."""
    from stackrl.tasks import sql
    from stackrl.tasks.arithmetic import CATEGORIES, make_dataset

    test = make_dataset("test", eval_per_category * len(CATEGORIES), seed=seed)
    sql_test = sql.make_dataset("test", eval_per_category * len(sql.CATEGORIES), seed=seed)
    t_eval = time.time()
    summary = {
        "params": sum(p.numel() for p in model.parameters()),
        "greedy": evaluate(model, tokenizer, test),
        "sampled": evaluate(model, tokenizer, test, greedy=False, seed=seed),
        "code": evaluate_code(model, tokenizer, test, sql_test, seed=seed),
    }
    summary["eval_seconds"] = round(time.time() - t_eval)
    return summary


def pretrain_code(
    out: str | Path,
    *,
    init: str | Path,
    steps: int = 300,
    batch_size: int = 64,
    lr: float = 1e-3,
    warmup: int = 50,
    mix: str = DEFAULT_MIX,
    redo_problems: int = 256,
    train_size: int = 100_000,
    eval_per_category: int = 50,
    save_every: int = 0,
    seed: int = 0,
    threads: int | None = None,
) -> dict:
    """Train from ``init`` on the roles of ``mix`` (role=weight,...) for ``steps``, save the checkpoint in ``out``
    with its record, and return the figures (solving and the new skills)."""
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
        misses = _misses(model, tokenizer, make_dataset("train", redo_problems, seed=seed + 6), seed)
        train_s += time.time() - t_misses
        print(f"{len(misses)} wrong attempts of {redo_problems}  {time.time() - t_misses:.0f}s", flush=True)
    weights = {role: float(weight) for role, weight in (part.split("=") for part in mix.split(","))}
    train = make_dataset("train", train_size, seed=seed + 7, distinct=False)
    batches = _code_batches(tokenizer, train, random.Random(seed + 7), batch_size, weights, misses)
    train_s += _fit(
        model, tokenizer, batches, steps=steps, lr=lr, schedule=lambda s: min(1.0, (s + 1) / warmup), test=test,
        save_every=save_every, snapshot=lambda step: save(Path(f"{out}-code{step}"), snapshot={"step": step}),
        per_example=True,
    )
    summary = {"train_seconds": round(train_s), **_measure(model, tokenizer, eval_per_category=eval_per_category,
                                                           seed=seed)}
    save(out, summary=summary)
    print(json.dumps(summary), flush=True)
    return summary


def main(argv: list[str] | None = None) -> None:
    phase_main(pretrain_code, argv, starts_from="arith-roles", snapshots="code")


if __name__ == "__main__":
    main()
