"""Every setting of the SAGE plugin, with the authors' defaults where their code has one."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl import ConfigError
from stackrl.rewards import OUTCOME_REWARDS

MODES = ("sage", "light")
HINT_SOURCES = ("policy", "solution")

HINT_SYSTEM_PROMPT = (
    "You help a student who is stuck on a problem. You are shown the problem and a reference solution. Write "
    "three hints of increasing strength, each of which can be read on its own:\n"
    "- level_1 (minimal): name the key idea or concept the problem turns on;\n"
    "- level_2 (medium): outline the method and the main intermediate steps;\n"
    "- level_3 (detailed): walk through most of the solution, stopping before the result.\n"
    "No hint may state the final answer. Reply with a single JSON object inside a ```json code block, with the "
    'string fields "level_1", "level_2" and "level_3", and nothing else.'
)
HINT_REQUEST_TEMPLATE = "Problem:\n{prompt}\n\nReference solution:\n{solution}\n"
HINTED_PROMPT_TEMPLATE = "{prompt}\n\nA hint that may help:\n{hint}"


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
    hint_max_new_tokens: int = 1024
    hint_temperature: float = 0.0  # 0 = greedy, as the authors decode hints
    hint_retries: int = 3  # further attempts for answers that do not parse
    retry_temperature: float = 1.0  # retries sample: a greedy retry would repeat the failure
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


_MINIMUMS = {"hint_max_new_tokens": 1, "hint_retries": 0, "hint_refresh_steps": 0, "hint_temperature": 0.0,
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
        if getattr(config, key) < minimum:
            refuse(key, f"must be at least {minimum}, not {getattr(config, key)}")
    if config.level_up_at > config.level_down_above:
        refuse("level_up_at", f"{config.level_up_at} is above level_down_above ({config.level_down_above})")
    if "{hint}" not in config.hinted_prompt_template:
        refuse("hinted_prompt_template", "must contain {hint}")
