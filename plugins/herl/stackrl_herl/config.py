"""Every setting of the HeRL plugin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError
from stackrl.rewards import OutcomeSettings
from stackrl_herl.rubric import GUIDANCE_TEMPLATE, RUBRICS


@dataclass
class HerlConfig(OutcomeSettings):
    section: ClassVar[str] = "herl"  # its metric scores the samples and the guided regenerations
    # What a response is checked against: "lines", the built-in task's per-line checks (each step worked out afresh,
    # the first wrong one marked with its right value); "answer", one item, the final answer (any verifiable task).
    rubric: str = "lines"
    # The guided regeneration's prompt: {prompt} the question, {attempt} the failed response, {check} its rubric
    # check. The default is the built-in task's retry after a check (stackrl.tasks.checked_retry_prompt).
    guidance_template: str = GUIDANCE_TEMPLATE
    # Of a failed group's equally scored responses, how many (most rubric items met first) get a guided
    # regeneration each (the authors' candidate_limit).
    candidates: int = 16
    # The guided regenerations' sampling temperature (the authors' 0.3).
    temperature: float = 0.3
    # The bonus: a response regenerated under guidance earns alpha * (guided score - its own score) on top of its
    # reward (the authors' reward_shaping_alpha); 0 switches it off.
    alpha: float = 0.05
    # How many guided regenerations take rows of their group (the authors' replace_top_n): better than the group's
    # best first, then as good; 0 keeps the groups as sampled (the bonus alone).
    replace: int = 1
    # The prompt a guided row is trained on: "guided", the guidance it was written after (the authors'
    # train_use_rewrite_prompt), or "question", the group's own prompt (as r3 and expo insert their rows).
    train_on: str = "guided"
    # The weight of a guided row's token ratio r, r / (r + gamma) (the authors' he_shaping_gamma: 1 in their
    # instruction-following script, 0.1 in the medical one); 0 keeps r, an on-policy row's weight.
    gamma: float = 1.0

    def check(self):
        if self.rubric not in RUBRICS:
            raise ConfigError(f"herl.rubric: must be one of {', '.join(RUBRICS)}, not {self.rubric!r}")
        missing = [name for name in ("prompt", "attempt", "check") if "{" + name + "}" not in self.guidance_template]
        if missing:
            raise ConfigError(f"herl.guidance_template: must contain {{{missing[0]}}}")
        if self.candidates < 1:
            raise ConfigError(f"herl.candidates: must be at least 1, not {self.candidates}")
        if not self.temperature > 0:
            raise ConfigError(f"herl.temperature: must be above 0, not {self.temperature}")
        if self.alpha < 0:
            raise ConfigError(f"herl.alpha: must be 0 or more, not {self.alpha}")
        if self.replace < 0:
            raise ConfigError(f"herl.replace: must be 0 or more, not {self.replace}")
        if self.train_on not in ("guided", "question"):
            raise ConfigError(f"herl.train_on: must be one of guided, question, not {self.train_on!r}")
        if self.gamma < 0:
            raise ConfigError(f"herl.gamma: must be 0 or more, not {self.gamma}")
