"""Every setting of the Octopus plugin, with the authors' values as defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError
from stackrl.blocks.turns import check_instruction
from stackrl.rewards import OutcomeSettings
from stackrl.tasks import RETRY_INSTRUCTION

SELECTIONS = ("code", "paper")


@dataclass
class OctopusConfig(OutcomeSettings):
    section: ClassVar[str] = "octopus"  # its metric tells a right attempt
    # The share of each group's rows sampled; the rest are recombined from them (the authors: 8 sampled, 16 trained).
    sampled_share: float = 0.5
    # Between the two attempts, masked out of the loss: the built-in retry instruction stands for the authors'
    # "<self-correction></self-correction>" marker, so the pair reads as the retry format (docs/roles.md).
    marker: str = "\n" + RETRY_INSTRUCTION + "\n"
    # Which rows fill a group: "code", the authors' code (every pair i, j; half the missing positives wrong -> right
    # and half right -> right, one right -> wrong, then wrong -> wrong); "paper", the paper's Algorithm 1 (pairs with
    # j != i; the missing positives wrong -> right first, then right -> right, negatives at random, random pairs
    # where every sampled row is right or every one wrong).
    selection: str = "code"
    # The shaped reward r' of a (first, second) attempt pair, the paper's Eq. 3 (after Wan et al.).
    fix_reward: float = 1.0  # wrong -> right
    keep_reward: float = 0.75  # right -> right
    miss_reward: float = 0.0  # wrong -> wrong
    break_reward: float = -0.25  # right -> wrong
    # The format reward's weight, Eq. 6: (1 - w) r' + w min(format(o1), format(o2)); an attempt's format is that it
    # states an answer.
    format_weight: float = 0.1
    # The authors' code caps r' at this when the two attempts are the same text (a copy is no correction); null: no cap.
    identical_cap: float | None = 0.5
    # The first step of stage II, which trains the first attempt too where both attempts are right or both wrong,
    # without stage I's KL. 0 skips stage I.
    stage_two_step: int = 60
    # Stage I's KL coefficient on first-attempt tokens, to the policy as training began (the authors' y1_kl_coef).
    first_attempt_kl: float = 0.01

    def check(self):
        check_instruction("octopus", "marker", self.marker)
        if not 0 < self.sampled_share <= 1:
            raise ConfigError(f"octopus.sampled_share: must be in (0, 1], not {self.sampled_share}")
        if self.selection not in SELECTIONS:
            raise ConfigError(f"octopus.selection: must be one of {', '.join(SELECTIONS)}, not {self.selection!r}")
        if not 0 <= self.format_weight <= 1:
            raise ConfigError(f"octopus.format_weight: must be in [0, 1], not {self.format_weight}")
        if self.stage_two_step < 0:
            raise ConfigError(f"octopus.stage_two_step: must be 0 or more, not {self.stage_two_step}")
        if self.first_attempt_kl < 0:
            raise ConfigError(f"octopus.first_attempt_kl: must be 0 or more, not {self.first_attempt_kl}")

    def sampled(self, group_size: int) -> int:
        """How many rows of a group of ``group_size`` are sampled: at least one."""
        return max(1, round(self.sampled_share * group_size))
