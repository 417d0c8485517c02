"""What the model does: a few whole groups of every logged step's rollout in ``samples.jsonl``, one line per
completion, and their printing in the terminal (``stackrl samples RUN``)."""

from __future__ import annotations

import json
import math
from itertools import groupby
from pathlib import Path

from stackrl.context import Rollout
from stackrl.errors import StackrlError

SAMPLES_FILE = "samples.jsonl"


def _number(value: float) -> float | None:
    """JSON has no NaN: a component that did not score a completion is ``null``."""
    return None if math.isnan(value) else round(float(value), 6)


def sample_records(
    step: int,
    rollout: Rollout,
    groups: int,
    weights: dict[str, float],
    answer_column: str,
    trained_prompts: dict[int, str],
) -> list[dict]:
    """One record per completion of the rollout's first ``groups`` groups.

    ``weights`` maps each reward component to its weight (for the total reward); ``trained_prompts`` maps a row to
    the prompt it was trained on, for the rows where a sample-stage plugin changed it.
    """
    records = []
    for row in range(min(groups, rollout.num_groups) * rollout.group_size):
        components = {name: float(rollout.rewards[name][row]) for name in weights}
        scored = [weights[name] * v for name, v in components.items() if not math.isnan(v)]
        record = {"step": step, "group": row // rollout.group_size, "prompt": rollout.prompts[row]}
        if row in trained_prompts:
            record["trained_prompt"] = trained_prompts[row]
        if answer_column in rollout.columns:
            record["answer"] = rollout.columns[answer_column][row]
        record["completion"] = rollout.completions[row]
        record["rewards"] = {name: _number(v) for name, v in components.items()}
        record["reward"] = _number(sum(scored)) if scored else None  # TRL's total: the weighted sum of the scored
        advantage = rollout.advantages[row]
        if advantage.dim() == 1:  # per token: the mean over the completion's tokens, and every token's
            tokens = advantage[: len(rollout.completion_ids[row])]
            record["token_advantages"] = [_number(v) for v in tokens.tolist()]
            advantage = tokens.mean() if len(tokens) else advantage.new_zeros(())
        record["advantage"] = _number(advantage)
        records.append(record)
    return records


def append_samples(run_dir, records: list[dict]) -> None:
    with open(Path(run_dir) / SAMPLES_FILE, "a") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")


def read_samples(run_dir, step: int | None = None) -> list[dict]:
    """The records of ``step`` (default: the last step written) from the run's ``samples.jsonl``."""
    path = Path(run_dir) / SAMPLES_FILE
    if not path.is_file():
        raise StackrlError(f"{run_dir}: no {SAMPLES_FILE}; is this a stackrl run folder, trained with log_samples > 0?")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    steps = sorted({r["step"] for r in records})
    if not steps:
        raise StackrlError(f"{path}: holds no samples yet")
    step = steps[-1] if step is None else step
    if step not in steps:
        raise StackrlError(f"{path}: no samples of step {step}; steps written: {', '.join(map(str, steps))}")
    return [r for r in records if r["step"] == step]


def _prompt_text(prompt) -> str:
    """A text prompt as it is; chat messages one per line, with their role."""
    if isinstance(prompt, str):
        return prompt.rstrip()
    return "\n".join(f"{m['role']}: {m['content']}" for m in prompt)


def _figure(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def print_samples(records: list[dict], console=None) -> None:
    """Each group as a prompt and a table of its completions with their rewards and advantages."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console()
    for (step, group), rows in groupby(records, key=lambda r: (r["step"], r["group"])):
        rows = list(rows)
        console.rule(f"step {step}, group {group}")
        console.print(Text("prompt: ", style="bold") + Text(_prompt_text(rows[0]["prompt"])))
        if "answer" in rows[0]:
            console.print(Text("answer: ", style="bold") + Text(str(rows[0]["answer"])))
        components = list(rows[0]["rewards"])
        table = Table(show_lines=True)
        table.add_column("completion", ratio=1)
        for name in [*components, "reward", "advantage"]:
            table.add_column(name, justify="right", no_wrap=True)
        for row in rows:
            completion = Text(row["completion"])
            if "trained_prompt" in row:  # the plugin's prompt, shown where the model saw it: before the completion
                completion = Text("trained on: ", style="dim bold") + Text(row["trained_prompt"], style="dim") + "\n"
                completion += Text(row["completion"])
            figures = [row["rewards"][name] for name in components] + [row["reward"], row["advantage"]]
            table.add_row(completion, *map(_figure, figures))
        console.print(table)
