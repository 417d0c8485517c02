"""Self-explanations: the policy, shown a problem with its true answer, writes the way to it."""

from __future__ import annotations

from stackrl import Generation, PluginError
from stackrl.blocks.insertion import reaches
from stackrl.blocks.teacher import teacher_prompts
from stackrl_expo.config import ExpoConfig


def last_step(solution: str) -> str:
    """The line before the last of a worked solution: on the built-in task, the computation the answer line states
    the result of (``"7 * 2 = 14"`` of ``"3 + 4 = 7\\n7 * 2 = 14\\nThe answer is 14."``); empty for one line."""
    lines = [line for line in str(solution).strip().splitlines() if line.strip()]
    return lines[-2] if len(lines) > 1 else ""


def explanation_prompts(prompts: list, columns: dict[str, list], rows: list[int], template: str, *, where: str) -> list:
    """The prompt an explanation of row ``rows[j]`` is sampled from: ``template`` over the row's prompt, its
    columns and ``{last_step}`` (from the ``solution`` column, when there is one)."""
    picked = {name: [values[i] for i in rows] for name, values in columns.items()}
    if "solution" in picked:
        picked["last_step"] = [last_step(s) for s in picked["solution"]]
    return teacher_prompts([prompts[i] for i in rows], picked, template, where=where)


def explain(ctx, prompts: list, columns: dict[str, list], groups: list[int], config: ExpoConfig, *, where: str,
            per_group: int) -> dict[int, list[Generation]]:
    """``per_group`` explanations of each group in ``groups`` (from its first row), sampled by the current policy;
    with ``only_reaching``, those whose final answer is not the true one are dropped. Logs the share kept."""
    if not groups:
        return {}
    if config.answer_column not in columns:
        raise PluginError(
            f"{where}: the rollout has no column '{config.answer_column}' to condition explanations on (a label-free "
            "run hides it)"
        )
    size = ctx.group_size
    rows = [g * size for g in groups for _ in range(per_group)]
    sampling = {} if config.temperature is None else {"temperature": config.temperature}
    generations = ctx.generate(
        explanation_prompts(prompts, columns, rows, config.explanation_template, where=where), **sampling
    )
    answers = columns[config.answer_column]
    kept: dict[int, list[Generation]] = {}
    reaching = 0
    for row, generation in zip(rows, generations):
        reached = reaches(generation.text, answers[row])
        reaching += reached
        if reached or not config.only_reaching:
            kept.setdefault(row // size, []).append(generation)
    ctx.log("reaching_answer", reaching / len(rows))
    return kept
