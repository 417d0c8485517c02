"""Every setting of the ExPO plugin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl import ConfigError

MODES = ("loss", "insert")

# The paper's conditioning in our words: the question and its true answer, and a request to explain the way there.
EXPLANATION_TEMPLATE = (
    "{prompt}\n\nThe correct final answer to this problem is {answer}. Explain step by step how to reach it, "
    "then state the final answer.\n"
)


@dataclass
class ExpoConfig:
    # "loss": ExP-GRPO: a negative log-likelihood term on (original prompt -> explanation), weighted by
    # losses.expo. "insert": the explanation takes the place of one sampled completion of its group and is
    # trained, on the original prompt, as any other rollout (its reward makes it the group's positive).
    mode: str = "loss"
    # The prompt an explanation is sampled from, formatted with {prompt}, the dataset columns ({answer}: the true
    # answer) and {last_step}, the line before the last of the `solution` column (the built-in task's last
    # computation step; empty without such a line).
    explanation_template: str = EXPLANATION_TEMPLATE
    answer_column: str = "answer"
    # Which rows count as correct. The loss mode reads this reward component; the insert mode decides before any
    # reward exists: a sample is correct when its final answer is `answer_column`'s, up to math equivalence.
    correct_reward: str = "exact_match"
    correct_threshold: float = 1.0
    # Explain every group, not only those without a correct sample.
    every_group: bool = False
    # Explanations sampled per explained group (loss mode; the insert mode replaces one row).
    explanations_per_group: int = 1
    # Keep only explanations whose own final answer is the true one, up to math equivalence.
    only_reaching: bool = True
    # The explanations' sampling temperature; null: the run's (trainer.temperature).
    temperature: Optional[float] = None


def check(config: ExpoConfig) -> None:
    """Refuse settings no run could use, naming the key (the host has already checked the types)."""

    def refuse(key: str, message: str):
        raise ConfigError(f"expo.{key}: {message}")

    if config.mode not in MODES:
        refuse("mode", f"must be one of {', '.join(MODES)}, not '{config.mode}'")
    if config.explanations_per_group < 1:
        refuse("explanations_per_group", f"must be at least 1, not {config.explanations_per_group}")
    if config.temperature is not None and config.temperature <= 0:
        refuse("temperature", f"must be positive, not {config.temperature}")
