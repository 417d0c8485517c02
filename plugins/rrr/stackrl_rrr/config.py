"""Every setting of the Reflect, Retry, Reward plugin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError
from stackrl.rewards import OutcomeSettings
from stackrl.tasks import JUDGE_MARKER, RETRY_INSTRUCTION

# On the built-in task a reflection is a check of the failed attempt (the judge format: it redoes the attempt's
# lines up to the first wrong one and gives a verdict); the retry sees the attempt, that check and the retry
# instruction. The paper's prompts ask in words for a reflection and a new attempt; set both templates for a
# model that follows instructions.
REFLECT_TEMPLATE = "{prompt}{attempt}\n" + JUDGE_MARKER + "\n"
RETRY_TEMPLATE = "{prompt}{attempt}\n" + JUDGE_MARKER + "\n{reflection}\n" + RETRY_INSTRUCTION + "\n"


@dataclass
class RrrConfig(OutcomeSettings):
    section: ClassVar[str] = "rrr"  # its metric judges first attempts and retries
    attempts: int = 4  # first attempts sampled per group to find a failed one; none failed: the group is not trained
    reflect_template: str = REFLECT_TEMPLATE  # {prompt}, {attempt}: the prompt a reflection is written from
    retry_template: str = RETRY_TEMPLATE  # {prompt}, {attempt}, {reflection}: the prompt of the second try

    def check(self):
        if self.attempts < 1:
            raise ConfigError(f"rrr.attempts: must be at least 1, not {self.attempts}")
        for key, fields in (("reflect_template", ("prompt", "attempt")), ("retry_template", ("prompt", "attempt", "reflection"))):
            template = getattr(self, key)
            missing = [name for name in fields if "{" + name + "}" not in template]
            if missing:
                raise ConfigError(f"rrr.{key}: must contain {{{missing[0]}}}")
