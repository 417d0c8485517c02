"""CSC-SQL on the built-in SQL task: execution-grouped voting against a single sample, on stackrl/arith-code's
own sampled queries, and GRPO with the merge reviser against GRPO on the execution reward alone.

``run`` samples ``group`` queries (temperature 1) at each of ``problems`` held-out problems of the SQL task, runs
them with the plugin's databases and groups them with the plugin's ``execution_groups``. It returns the share of
sampled queries that are right (``sample_accuracy``: what one sample scores), the share of problems whose voted
query is right (``vote_accuracy``), whose two largest groups hold a right query (``top2_accuracy``: what a perfect
merge reviser could reach), all read from the plugin's reward stage, and checks of it by hand on the same samples:
``reward_errors`` counts rewards that are not the hand-run execution match, ``grouping_errors`` the problems whose
groups (``Cscsql.last_groups``) are not the classes of ``same_rows`` among the queries that ran, largest first;
``hand_vote_accuracy`` is the vote by hand; ``text_vote_accuracy`` and ``failed_vote_accuracy`` are the vote's accuracy when queries
are grouped by their text, and when the failed queries form a group of their own (two ways to get the rule wrong).

The main (``--train``) trains configs/recipes/cscsql-cpu.yaml with the reviser against the same recipe without it
(GRPO on the plugin's execution reward alone: no built-in reward reads a query) at equal steps, three seeds, and
measures the figures above after training, with the reviser's logged accuracy on its merge prompts during training
(``revised_accuracy``) and the merge prompts added to the pool (``reviser_rows``).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/cscsql/benchmarks/mechanism.py --steps 12 --seeds 0 1 2
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from stackrl.blocks.sandbox import same_rows
from stackrl.testing.benchmark import one_thread
from stackrl_cscsql.plugin import Databases

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "cscsql-cpu.yaml"
HELD_OUT = 100  # the held-out problems (and sampling seed) measured before and after training
QUERY_TOKENS = 96  # the longest reference query takes 80 tokens


def _first_of_largest(keys, right) -> bool:
    """Whether the first sample of the most frequent key (first sampled on ties; ``None`` keys vote not) is right."""
    counts = Counter(k for k in keys if k is not None)
    if not counts:
        return right[0]
    best = max(counts.values())
    return right[next(i for i, k in enumerate(keys) if k is not None and counts[k] == best)]


def _classes(results) -> list[tuple[int, ...]]:
    """The groups by hand: classes of the queries that ran under ``same_rows``, largest first, ties by first."""
    classes: list[list[int]] = []
    for i, result in enumerate(results):
        if result.ok:
            home = next((c for c in classes if same_rows(results[c[0]], result)), None)
            home.append(i) if home is not None else classes.append([i])
    return [tuple(c) for c in sorted(classes, key=lambda c: (-len(c), c[0]))]


def measure(model, tokenizer, *, problems: int, group: int, seed: int) -> dict:
    """The plugin's reward stage on ``group`` sampled queries at each of ``problems`` held-out problems, and the
    same figures by hand."""
    from stackrl import RewardContext, Rollout
    from stackrl.tasks.pretrain import generate
    from stackrl.tasks.sql import make_dataset
    from stackrl.testing.fixtures import make_plugin

    rows = make_dataset("test", problems, seed=seed)
    prompts = [q for q in rows["question"] for _ in range(group)]
    texts = generate(model, tokenizer, prompts, greedy=False, seed=seed, max_new_tokens=QUERY_TOKENS)
    columns = {k: [v for v in rows[k] for _ in range(group)] for k in ("answer", "solution", "category", "setup")}
    rollout = Rollout(prompts=prompts, completions=texts, prompt_ids=[[0]] * len(texts),
                      completion_ids=[[0]] * len(texts), columns=columns, group_size=group, rewards={})
    logged: dict[str, float] = {}
    plugin = make_plugin("cscsql")
    rewards = plugin.reward(RewardContext(step=0, tokenizer=tokenizer, policy=None, _plugin="cscsql",
                                          _log=lambda name, value: logged.__setitem__(name.split("/")[-1], value),
                                          rollout=rollout))
    databases = Databases(timeout_s=5.0)
    figures = Counter()
    for k, (setup, solution) in enumerate(zip(rows["setup"], rows["solution"])):
        queries = texts[k * group:(k + 1) * group]
        reference = databases.run(setup, solution)
        results = [databases.run(setup, q) for q in queries]
        right = [same_rows(r, reference) for r in results]
        classes = _classes(results)
        figures["reward_errors"] += sum(float(r) != got for r, got in zip(right, rewards[k * group:(k + 1) * group]))
        figures["grouping_errors"] += classes != plugin.last_groups[k]
        figures["hand_vote_accuracy"] += right[classes[0][0]] if classes else right[0]
        figures["top2_accuracy"] += any(right[c[0]] for c in classes[:2])
        figures["text_vote_accuracy"] += _first_of_largest([q.strip() for q in queries], right)
        figures["failed_vote_accuracy"] += _first_of_largest(
            [tuple(sorted(map(repr, r.rows))) if r.ok else "failed" for r in results], right)
        figures["ran"] += sum(r.ok for r in results) / group
        figures["same_rows_other_text"] += any(len({queries[i].strip() for i in c}) > 1 for c in classes)
    counts = ("reward_errors", "grouping_errors")
    out = {name: (value if name in counts else value / problems) for name, value in figures.items()}
    out.update(sample_accuracy=sum(rewards) / len(rewards), vote_accuracy=logged["vote_accuracy"],
               plugin_top2_accuracy=logged["candidates_hold_right"])
    return out


def run(problems: int = 28, group: int = 8, seed: int = 0, model_path: str | None = None) -> dict:
    """The figures above for stackrl/arith-code (or the model at ``model_path``), torch on one thread."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stackrl.tasks import arith_code_path

    path = model_path or arith_code_path()
    with one_thread():
        model = AutoModelForCausalLM.from_pretrained(path)
        tokenizer = AutoTokenizer.from_pretrained(path)
        return measure(model, tokenizer, problems=problems, group=group, seed=seed)


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare
    from stackrl.testing.heldout import recipe_config
    from stackrl.run import build_trainer

    args = arguments(__doc__.splitlines()[0], steps=16, methods=("cscsql", "grpo")).parse_args()
    overrides = {"cscsql": ["cscsql.revise=true"], "grpo": ["cscsql.revise=false"]}

    def trained(method: str, seed: int, folder: Path) -> dict:
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=args.steps, output_dir=folder,
                               overrides=[*overrides[method], *args.overrides])
        with one_thread():
            trainer = build_trainer(config)
            trainer.train()
            model = trainer.accelerator.unwrap_model(trainer.model)
            figures = measure(model, trainer.processing_class, problems=28, group=8, seed=HELD_OUT)
        logged = [row for row in trainer.state.log_history if "cscsql/revised_accuracy" in row]
        figures["reviser_rows"] = sum(row.get("cscsql/reviser_rows_added", 0.0) for row in trainer.state.log_history)
        figures["revised_accuracy"] = (sum(row["cscsql/revised_accuracy"] for row in logged) / len(logged)
                                       if logged else float("nan"))
        return figures

    compare(args, args.methods, trained, before=lambda folder: run(problems=28, group=8, seed=HELD_OUT))


if __name__ == "__main__":
    main()
