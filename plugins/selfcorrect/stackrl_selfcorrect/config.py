"""Every setting of the self-rewarding correction plugin, with the paper's values as defaults where it gives them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from stackrl import ConfigError
from stackrl.blocks.turns import check_instruction
from stackrl.rewards import OutcomeSettings
from stackrl.tasks import JUDGE_MARKER, RETRY_INSTRUCTION, VERDICT_PREFIX, WRONG


@dataclass
class SelfcorrectConfig(OutcomeSettings):
    section: ClassVar[str] = "selfcorrect"  # its metric is the rule verifier that tells a right answer
    # Answers per trajectory at most: the first, then one more after each "wrong" verdict (the paper's horizon 2).
    turns: int = 2
    # Injected after an answer, masked out of the loss: the built-in judge marker, whose check ends in the verdict
    # line (the authors ask for a self-evaluation ending in "[VERIFY] correct" or "[VERIFY] wrong").
    verify_instruction: str = "\n" + JUDGE_MARKER + "\n"
    # Injected after a "wrong" verdict: the built-in retry instruction (the authors: identify the mistake, revise).
    revise_instruction: str = "\n" + RETRY_INSTRUCTION + "\n"
    # The last answer is verified too, its verdict ending the row whatever it says; false ends at the last answer,
    # as the paper's fine-tuning trajectories do.
    verify_last: bool = False

    # Stage 1, self-rewarding fine-tuning: the first collect_steps steps sample trajectories by sequential
    # rejection sampling; at the end of the last one the weights go back to the start and are fine-tuned on the
    # kept trajectories, and RL (stage 2) goes on from there. 0: no stage 1.
    collect_steps: int = 4
    # Verifications sampled per first answer until one's verdict matches the truth (the paper's N2 = 8).
    verdict_tries: int = 8
    # Revisions sampled after a right "wrong" verdict until one is right (M1 = 8).
    revision_tries: int = 8
    # Revisions sampled for a right first answer told it was wrong, kept when right: the "correct-to-correct"
    # trajectories (M2 = 4); 0 leaves them out.
    told_wrong_tries: int = 4
    # The verdict injected (masked) to tell a right first answer it was wrong.
    told_wrong: str = VERDICT_PREFIX + WRONG
    # Fine-tune on the right first answer of the trajectories that stop at a right "correct" verdict too (the
    # paper's remedy for a first-attempt drop); false trains only their verdict, as the paper's Eq. 1.
    train_first_answer: bool = True
    # The fine-tuning: constant learning rate (the paper's 1e-5), passes over the kept trajectories (the paper kept
    # its first epoch's model), pairs per optimizer step on each process (null: trainer.per_device_train_batch_size).
    sft_learning_rate: float = 1.0e-5
    sft_epochs: int = 1
    sft_batch_size: int | None = None

    # Stage 2: the row's reward is its final answer's correctness plus verdict_weight times the share of its
    # verdicts that say what the answer they check is; 0 is the paper's PPO reward, the final answer's alone.
    verdict_weight: float = 0.5

    def check(self):
        name = self.section
        for key, least in (("turns", 1), ("verdict_tries", 1), ("revision_tries", 1), ("sft_epochs", 1),
                           ("collect_steps", 0), ("told_wrong_tries", 0)):
            if getattr(self, key) < least:
                raise ConfigError(f"{name}.{key}: must be at least {least}, not {getattr(self, key)}")
        if not self.sft_learning_rate > 0:
            raise ConfigError(f"{name}.sft_learning_rate: must be positive, not {self.sft_learning_rate}")
        if self.sft_batch_size is not None and self.sft_batch_size < 1:
            raise ConfigError(f"{name}.sft_batch_size: must be at least 1 or null, not {self.sft_batch_size}")
        if self.verdict_weight < 0:
            raise ConfigError(f"{name}.verdict_weight: must be 0 or more, not {self.verdict_weight}")
        for key in ("verify_instruction", "revise_instruction", "told_wrong"):
            check_instruction(name, key, getattr(self, key))
