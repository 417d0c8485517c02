"""Every setting of the SAGE plugin, with the authors' defaults where their code has one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl import ConfigError
from stackrl.rewards import OUTCOME_REWARDS

MODES = ("sage", "light")
HINT_SOURCES = ("policy", "solution")

# The authors' prompts are in recipe/hint/prompt.py of github.com/BaohaoLiao/SAGE (HINT_SYSTEM_PROMPT,
# HINT_USER_PROMPT_TEMPLATE); ours carry the same content in the same sections, in our own words. To reproduce
# their runs word for word, paste theirs into hint_system_prompt and hint_request_template (their {problem} is a
# dataset column here, as in the paper recipe; {prompt} names the prompt's text).
HINT_SYSTEM_PROMPT = """You are a tutor. A student is stuck on a hard problem, and you write hints that lead them \
towards solving it on their own, without handing them the solution.

TASK:
You are given a question and its solution. Write hints at 3 levels, each taking the student a step further \
towards solving the problem by themselves.

HINT LEVELS:
- Level 1: Minimal hint - identifies the central idea or approach, nothing more specific
- Level 2: Medium hint - points the way further: which method to use, or which intermediate steps to take
- Level 3: Detailed hint - leads the student a long way, but the student must still finish the solution themselves

GUIDELINES:
- Do not state the final answer
- A hint should get the student thinking, not give them steps to copy out
- Make each hint just strong enough to bridge the gap between where the student is and the solution

OUTPUT FORMAT:
```json
{
    "level_1": "the minimal hint",
    "level_2": "the medium hint",
    "level_3": "the detailed hint"
}
```"""
HINT_REQUEST_TEMPLATE = "Question:\n{prompt}\n\nSolution:\n{solution}\n"
# The authors' hinted prompt (hint_trainer.py, _build_answer_messages_with_hint): the question under a label,
# then a line that introduces the hint, then the hint.
HINTED_PROMPT_TEMPLATE = "Question:\n{prompt}\n\nA hint to help you:\n{hint}"


@dataclass
class SageConfig:
    # How hints enter training. "sage": roll out on the original prompts, then re-roll every group with no
    # rewarded completion under a level-1, then level-2, then level-3 hint (generate_rollout). "light": one
    # rollout per step, each prompt hinted at the level a tracker keeps for it across epochs (transform_prompts).
    mode: str = "sage"
    # Who writes the hints. "policy": the policy itself, from the problem and its reference solution (the
    # authors' method). "solution": cut from the reference solution, level k revealing a longer prefix of its
    # steps (a deterministic stand-in for models too small to write hints).
    hint_source: str = "policy"
    # The built-in outcome reward that decides whether a completion solved its prompt.
    metric: str = "exact_match"
    answer_column: str = "answer"  # the dataset column `metric` compares with
    solution_column: str = "solution"  # the dataset column holding the reference solution hints are written from
    # Hint request (hint_source=policy), sent as a system and a user message through the chat template. The
    # request template is formatted with {prompt} (the prompt, or its last user message) and the dataset columns.
    hint_system_prompt: str = HINT_SYSTEM_PROMPT
    hint_request_template: str = HINT_REQUEST_TEMPLATE
    # Tokens a hint answer may take; None = the rollout's completion budget (trainer.max_completion_length), as
    # the authors generate hints with their rollout settings.
    hint_max_new_tokens: Optional[int] = None
    hint_temperature: float = 0.0  # 0 = greedy, as the authors decode hints
    # Attempts in all at a prompt's hints: an answer holding no hint is asked again, up to 3 attempts as the
    # authors. Retries decode at retry_temperature, greedy as the authors by default; with transformers a greedy
    # retry mostly repeats the failed answer, so a positive temperature lets it differ.
    hint_attempts: int = 3
    retry_temperature: float = 0.0
    # Cached hints older than this many steps are written anew when next needed; 0 = never rewrite a good hint.
    # The default 1 writes fresh hints in every step that needs them, as the authors do.
    hint_refresh_steps: int = 1
    # The prompt a hinted rollout is generated from, formatted with {prompt} (the prompt, or its last user
    # message, whose content it replaces), {hint} and the dataset columns.
    hinted_prompt_template: str = HINTED_PROMPT_TEMPLATE
    # Train on the original prompt's tokens instead of the hinted prompt the completion was sampled from.
    train_on_original: bool = False
    # mode=light: after a visit, a prompt's hint level goes up when its accuracy was at most `level_up_at`,
    # down when it was above `level_down_above` (the authors' script: 0.1 and 0.35).
    level_up_at: float = 0.1
    level_down_above: float = 0.35


_MINIMUMS = {"hint_max_new_tokens": 1, "hint_attempts": 1, "hint_refresh_steps": 0, "hint_temperature": 0.0,
             "retry_temperature": 0.0}


def check(config: SageConfig) -> None:
    """Refuse settings no run could use, naming the key (the host has already checked the types)."""

    def refuse(key: str, message: str):
        raise ConfigError(f"sage.{key}: {message}")

    if config.mode not in MODES:
        refuse("mode", f"must be one of {', '.join(MODES)}, not '{config.mode}'")
    if config.hint_source not in HINT_SOURCES:
        refuse("hint_source", f"must be one of {', '.join(HINT_SOURCES)}, not '{config.hint_source}'")
    if config.metric not in OUTCOME_REWARDS:
        refuse("metric", f"must be a built-in outcome reward ({', '.join(OUTCOME_REWARDS)}), not '{config.metric}'")
    for key, minimum in _MINIMUMS.items():
        value = getattr(config, key)
        if value is not None and value < minimum:
            refuse(key, f"must be at least {minimum}, not {value}")
    if config.level_up_at > config.level_down_above:
        refuse("level_up_at", f"{config.level_up_at} is above level_down_above ({config.level_down_above})")
    if "{hint}" not in config.hinted_prompt_template:
        refuse("hinted_prompt_template", "must contain {hint}")
