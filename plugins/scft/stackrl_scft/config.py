"""Every setting of the SCFT + RLERR plugin, with the authors' values as defaults where they give them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from stackrl import ConfigError
from stackrl.blocks.supervised import SupervisedSettings
from stackrl.blocks.turns import check_instruction
from stackrl.rewards import OutcomeSettings
from stackrl.tasks import JUDGE_MARKER, RETRY_INSTRUCTION

SCORES = ("score_silent", "score_hallucinated", "score_superficial", "score_corrected", "score_confirmed")


@dataclass
class ScftConfig(OutcomeSettings, SupervisedSettings):
    section: ClassVar[str] = "scft"  # its metric is the verifier that tells a right answer (the authors' Acc)
    # The self-critique: injected after the answer, masked out of the loss, the built-in judge marker (the authors'
    # "Please critique whether the following solution to the question is correct."); after a "wrong" verdict the
    # retry instruction, and the critique goes on with a corrected solution.
    critique_instruction: str = "\n" + JUDGE_MARKER + "\n"
    revise_instruction: str = "\n" + RETRY_INSTRUCTION + "\n"

    # SCFT: every `every` steps a supervised phase on the critiques the filter kept since the last one (the
    # authors: one pass of fine-tuning before RL, lr 1e-5, 10 epochs, batch 64). A critique is kept when it ends
    # right (the authors' Acc(c) = 1) and, with strict_verdict, when its verdict also says what the answer is.
    strict_verdict: bool = True
    # Critiques that confirm a right answer kept per critique that corrects a wrong one, at each phase (the
    # authors' best mix: i->c : c->c = 2 : 1); null keeps all.
    confirm_per_fix: Optional[float] = 0.5
    # RL starts from the SCFT policy: the plugin's reward weighs 0 until the first phase (its default schedule,
    # {0: 0, every: 1}); false weighs it from the start.
    rl_after_phase: bool = True

    # RLERR: the row's reward is outcome_weight times its final answer's correctness (the outcome reward) plus
    # reflection_weight times the reflection's score / 10 (the authors' judge scores 0-10); the authors' ablation
    # trains on each alone (outcome_weight 0: the reflection reward alone; reflection_weight 0: the outcome alone). The scores below stand in for the judge's rubric
    # bands on the built-in check: no verdict; a verdict that says a right answer is wrong or a wrong one right
    # (P1 failed, 0-2); a right "wrong" that does not correct the answer or marks a line that is not the wrong one
    # (superficial, 3-5); a right "wrong" at the wrong line followed by a right answer (effective correction, 6-8);
    # a right "correct" after a check of every line (a confirmation).
    outcome_weight: float = 1.0
    reflection_weight: float = 1.0
    score_silent: float = 0.0
    score_hallucinated: float = 1.0
    score_superficial: float = 4.0
    score_corrected: float = 7.0
    score_confirmed: float = 7.0
    # A "wrong" verdict corrects effectively only when its check stops at the attempt's first wrong line (P3,
    # specificity); false: any right "wrong" followed by a right answer does.
    locate: bool = True

    def check(self):
        name = self.section
        self.check_supervised(name)
        for key in ("critique_instruction", "revise_instruction"):
            check_instruction(name, key, getattr(self, key))
        if self.confirm_per_fix is not None and self.confirm_per_fix < 0:
            raise ConfigError(f"{name}.confirm_per_fix: must be 0 or more, or null, not {self.confirm_per_fix}")
        for key in ("outcome_weight", "reflection_weight"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{name}.{key}: must be 0 or more, not {getattr(self, key)}")
        if self.outcome_weight == self.reflection_weight == 0:
            raise ConfigError(f"{name}.reflection_weight: outcome_weight and reflection_weight are both 0: no reward")
        for key in SCORES:
            if not 0 <= getattr(self, key) <= 10:
                raise ConfigError(f"{name}.{key}: must lie in the judge's range 0-10, not {getattr(self, key)}")
        ladder = ("score_hallucinated", "score_superficial", "score_corrected")
        for low, high in zip(ladder, ladder[1:]):
            if not getattr(self, low) < getattr(self, high):
                raise ConfigError(f"{name}.{high}: must be above {low} (the rubric's order), not {getattr(self, high)}")
