"""Make the built-in ``stackrl/arith-tools`` checkpoint: ``stackrl/arith-tiny`` taught to use the built-in tools
in the runner's ``tag`` grammar: the calculator (:mod:`stackrl.blocks.env.calculator`) for some steps of an
arithmetic problem and not others, so that RL in the ``env`` plugin starts from a policy that calls it correctly some
of the time and has a share of correct tool use to raise; and the search tool (:mod:`stackrl.blocks.env.search`) to
look up the named number of a ``lookup`` question (:mod:`stackrl.tasks.lookup`) before working it out.

Remake it (CPU, one thread; core/stackrl/assets/arith-tools/README.md gives the command the shipped checkpoint was
made with)::

    HF_HUB_OFFLINE=1 python -m stackrl.blocks.env.pretrain_tools --out core/stackrl/assets/arith-tools --init core/stackrl/assets/arith-tiny --threads 1

A demonstration is one training problem worked line by line as arith-tiny learned it. An arithmetic problem (a share
``1 - search_share`` of them) leaves each step, with probability ``call_share``, to the calculator instead: the turn
so far ends with ``<calc>a op b</calc>`` (and the end-of-sequence token), the runner shows the result, and the next
turn goes on from it (``14 + 5 = 19``, or the final ``The answer is 14.``). A lookup problem first searches its name
(``<search>kavo</search>``, shown ``kavo is 37.``), then works the chain out by hand. The final line is a turn
without a call: the episode's answer, as TRL's tool convention reads it. Episodes are laid out exactly as the runner lays them out
(:func:`stackrl.blocks.env.layout.episode_layout`) and each turn is trained after its exact context
(:func:`~stackrl.blocks.env.layout.turn_examples`), the loss a mean over turns, AdamW at a constant rate after
``--warmup`` steps (the ``_fit`` of the earlier phases). The checkpoint carries ``stackrl_pretrain.json`` with the
settings, the hash of :data:`RECIPE`, the hash of the starting weights and the figures of :func:`evaluate_tools`.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from stackrl.blocks.env.actions import parse_action
from stackrl.blocks.env.calculator import Calculator
from stackrl.blocks.env.layout import episode_layout, observation_ids, tokens, turn_examples
from stackrl.blocks.env.search import Search
from stackrl.tasks.pretrain import RECORD_FILE, _fit, file_hash, recipe_hash
from stackrl.tasks.pretrain_roles import phase_main

__all__ = ["RECIPE", "TEMPLATE", "demo_examples", "demo_turns", "evaluate_tools", "main", "pretrain_tools",
           "tool_figures", "tools_of", "use_tool"]

TEMPLATE = "\n{observation}\n"  # the runner's default observation_template


def tools_of(problem: dict) -> dict:
    """The tools of a problem's environment, by name: search for a lookup problem (it has a ``name``), else calc."""
    if "name" in problem:
        search = Search()
        search.reset()
        return {"search": search.search}
    calculator = Calculator()
    calculator.reset()
    return {"calc": calculator.calc}


def demo_turns(problem: dict, rng: random.Random, call_share: float) -> list[tuple[str, str | None]]:
    """A problem's demonstration as the runner's turns, (action text, the observation shown after it): a lookup
    problem's search for its name first; each step written out, or for an arithmetic problem with probability
    ``call_share`` left to the calculator; the last turn is the answer line."""
    *steps, answer = problem["solution"].split("\n")
    turns, written = [], ""
    if "name" in problem:
        turns.append((f"<search>{problem['name']}</search>", tools_of(problem)["search"](problem["name"])))
        call_share = 0.0
    for line in steps:
        expression, result = line.split(" = ")
        if rng.random() < call_share:
            turns.append((f"{written}<calc>{expression}</calc>", result))
            written = ""
        else:
            written += line + "\n"
    turns.append((written + answer, None))
    return turns


def demo_examples(tokenizer, problem: dict, turns: list[tuple[str, str | None]]) -> list[tuple[list[int], list[int]]]:
    """(context, turn and eos) pairs of a demonstration's turns, laid out as the runner lays out the episode."""
    eos = tokenizer.eos_token_id
    layout = episode_layout(tokenizer, tokens(tokenizer, problem["question"]), turns, eos, template=TEMPLATE)
    ids, _, segments = layout.packed()
    return turn_examples(layout.prompt_ids, ids, segments, eos)


def _tool_batches(tokenizer, rng: random.Random, batch_size: int, call_share: float, search_share: float):
    """Batches of single turns of demonstrations of training problems (every category alike): fresh arithmetic
    problems, and a ``search_share`` of lookup problems."""
    from stackrl.tasks.arithmetic import CATEGORIES, make_problem, split_of
    from stackrl.tasks.lookup import make_dataset as lookups

    named = lookups("train", size=8192, seed=0)
    pool = []
    while True:
        while len(pool) < batch_size:
            if rng.random() < search_share:
                problem = named[rng.randrange(len(named))]
            else:
                problem = make_problem(rng, rng.choice(CATEGORIES))
            if split_of(problem["question"]) != "train":
                continue
            pool += demo_examples(tokenizer, problem, demo_turns(problem, rng, call_share))
        rng.shuffle(pool)
        yield pool[:batch_size]
        pool = pool[batch_size:]


def use_tool(model, tokenizer, problems: list[dict], *, greedy: bool = True, seed: int = 0, max_turns: int = 6,
             turn_tokens: int = 96) -> list[dict]:
    """Each problem played in its environment (:func:`tools_of`) as the runner plays it (``actions: tag``, the
    default observation template, at most ``max_turns`` turns of ``turn_tokens`` tokens): per problem its
    ``completion`` text (turns and results) and its ``calls``, (argument, result shown) pairs."""
    import torch

    from stackrl.blocks.env.imitation import _continue

    eos = tokenizer.eos_token_id
    plays = [{"context": tokens(tokenizer, p["question"]), "tools": tools_of(p), "calls": [], "done": False}
             for p in problems]
    for p in plays:
        p["start"] = len(p["context"])
    was_training = model.training
    model.eval()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for _ in range(max_turns):
                live = [p for p in plays if not p["done"]]
                if not live:
                    break
                news = _continue(model, tokenizer, [p["context"] for p in live], greedy=greedy,
                                 max_new_tokens=turn_tokens)
                for p, new in zip(live, news):
                    p["context"] += [t for t in new if t != eos]  # the runner holds the eos back
                    call = parse_action("tag", tokenizer.decode(new, skip_special_tokens=True))
                    if call is None or eos not in new:
                        p["done"] = True  # the answer (or a turn the budget cut)
                        continue
                    tool = p["tools"].get(call.name)
                    shown = tool(*call.args) if tool else f"unknown tool '{call.name}'; tools: {', '.join(p['tools'])}"
                    p["calls"].append((call.args[0], shown))
                    p["context"] += observation_ids(tokenizer, TEMPLATE, shown, None)[0]
    finally:
        model.train(was_training)
    return [{"completion": tokenizer.decode(p["context"][p["start"]:], skip_special_tokens=True), "calls": p["calls"]}
            for p in plays]


def evaluate_tools(model, tokenizer, dataset, *, greedy: bool = True, seed: int = 0) -> dict[str, float]:
    """The tool-use figures on ``dataset`` (the arithmetic task's columns, or the lookup task's): ``accuracy`` with
    the tool (exact match of the episode's answer), ``no_tool`` (the plain task, no runner: a call is left unanswered,
    so only an episode worked out by hand can be right), ``call_rate`` (calls per step of the problems; per problem on
    lookup), ``call_correct`` (the share of calls that are right: a calculation whose result is one of the problem's
    step results, a search for the problem's name) and ``any_call`` (the share of episodes with a call)."""
    from stackrl.tasks.pretrain import evaluate

    problems = list(dataset)
    played = use_tool(model, tokenizer, problems, greedy=greedy, seed=seed)
    plain = evaluate(model, tokenizer, dataset, greedy=greedy, seed=seed)["all"]
    return tool_figures(problems, played) | {"no_tool": plain}


def tool_figures(problems: list[dict], played: list[dict]) -> dict[str, float]:
    """:func:`evaluate_tools`' figures but ``no_tool``, from the problems and :func:`use_tool`'s episodes of them."""
    from stackrl.rewards import exact_match

    calls = [call for p in played for call in p["calls"]]
    if all("name" in p for p in problems):
        due = len(problems)
        correct = sum(query.strip() == p["name"] for p, q in zip(problems, played) for query, _ in q["calls"])
    else:
        due = sum(p["solution"].count("\n") for p in problems)
        results = [{line.rsplit(" = ", 1)[1] for line in p["solution"].split("\n")[:-1]} for p in problems]
        correct = sum(shown in truth for q, truth in zip(played, results) for _, shown in q["calls"])
    return {
        "accuracy": sum(exact_match(q["completion"], p["answer"]) for q, p in zip(played, problems)) / len(played),
        "call_rate": len(calls) / due,
        "call_correct": correct / max(1, len(calls)),
        "any_call": sum(bool(q["calls"]) for q in played) / len(played),
    }


# What decides the weights, besides the settings and the starting checkpoint: the task, the tool and its grammar, the
# demonstrations and layout, and the training loop.
RECIPE = (
    "stackrl.tasks.arithmetic:make_problem",
    "stackrl.tasks.arithmetic:split_of",
    "stackrl.tasks.lookup:_names",
    "stackrl.tasks.lookup:make_dataset",
    "stackrl.blocks.env.calculator:Calculator",
    "stackrl.blocks.env.search:Search",
    "stackrl.blocks.retrieval:LexicalIndex",
    "stackrl.blocks.env.actions:parse_action",
    "stackrl.blocks.env.layout:episode_layout",
    "stackrl.blocks.env.layout:turn_examples",
    "stackrl.blocks.env.layout:observation_ids",
    "stackrl.blocks.env.pretrain_tools:TEMPLATE",
    "stackrl.blocks.env.pretrain_tools:tools_of",
    "stackrl.blocks.env.pretrain_tools:demo_turns",
    "stackrl.blocks.env.pretrain_tools:demo_examples",
    "stackrl.blocks.env.pretrain_tools:_tool_batches",
    "stackrl.blocks.env.pretrain_tools:pretrain_tools",
    "stackrl.tasks.pretrain:_fit",
)


def pretrain_tools(
    out: str | Path,
    *,
    init: str | Path,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 2e-3,
    warmup: int = 30,
    call_share: float = 0.3,
    search_share: float = 0.25,
    eval_size: int = 300,
    save_every: int = 0,
    seed: int = 0,
    threads: int | None = None,
) -> dict:
    """Train from ``init`` on demonstrations for ``steps``, save the checkpoint in ``out`` with its record, and
    return the figures (greedy and sampled on ``eval_size`` test problems of each task)."""
    settings = {name: str(value) if isinstance(value, Path) else value for name, value in locals().items()}
    recipe = recipe_hash(RECIPE)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stackrl.tasks import TASKS

    if threads:
        torch.set_num_threads(threads)
    random.seed(seed)
    torch.manual_seed(seed)
    tokenizer, model = AutoTokenizer.from_pretrained(init), AutoModelForCausalLM.from_pretrained(init)
    out = Path(out)

    def save(folder: Path, **record) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        record = {"settings": settings, "recipe_sha256": recipe,
                  "init_sha256": file_hash(Path(init) / "model.safetensors"), **record}
        (folder / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")

    batches = _tool_batches(tokenizer, random.Random(seed + 13), batch_size, call_share, search_share)
    train_s = _fit(model, tokenizer, batches, steps=steps, lr=lr, schedule=lambda s: min(1.0, (s + 1) / warmup),
                   test=None, save_every=save_every,
                   snapshot=lambda step: save(Path(f"{out}-tools{step}"), snapshot={"step": step}), per_example=True)
    t_eval = time.time()
    summary = {"train_seconds": round(train_s), "params": sum(p.numel() for p in model.parameters())}
    for task in ("arithmetic", "lookup"):
        test = TASKS[task]("test", size=eval_size, seed=seed)
        summary[task] = {mode: evaluate_tools(model, tokenizer, test, greedy=mode == "greedy", seed=seed)
                         for mode in ("greedy", "sampled")}
    summary["eval_seconds"] = round(time.time() - t_eval)
    save(out, summary=summary)
    print(json.dumps(summary), flush=True)
    return summary


def main(argv: list[str] | None = None) -> None:
    phase_main(pretrain_tools, argv, starts_from="arith-tiny", snapshots="tools")


if __name__ == "__main__":
    main()
