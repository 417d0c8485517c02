"""Every setting of the SEAL plugin: the inner loop (the scratch update a self-edit is applied by), the downstream
evaluation of the updated copy, the reward, and the optional ReST-EM phase of the authors' outer loop."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl import ConfigError
from stackrl.rewards import OutcomeSettings

METRICS = ("accuracy", "likelihood")
REWARDS = ("gain", "improved")


@dataclass
class SealConfig(OutcomeSettings):
    section = "seal"
    # The inner loop: each completion (a self-edit) is applied to a scratch copy of the policy by `steps` plain
    # gradient steps of size `learning_rate` on its token-mean negative log-likelihood given its prompt (SFT of a
    # copy; the live weights untouched). The authors fine-tune a fresh LoRA adapter for 10 epochs at 1e-3 (AdamW)
    # per self-edit; on CPU one or two plain steps are what a step can afford.
    learning_rate: float = 0.02
    steps: int = 1
    # The downstream evaluation of the updated copy on the row's question (`question_column`, or the row's own
    # prompt when null): "accuracy", its greedy answer judged against `answer_column` by `metric` (the paper's);
    # "likelihood", the mean log-prob of the row's `target_column` text after the question (dense and cheaper).
    evaluation: str = "accuracy"
    question_column: str | None = None
    target_column: str = "solution"
    max_new_tokens: int | None = None  # the greedy answer's length; null: the run's max_completion_length
    # The reward of a self-edit: "gain", the copy's downstream score less the live policy's on the same question;
    # "improved", 1 where the gain is positive and 0 elsewhere (the paper's binary reward of ReST-EM).
    reward: str = "gain"
    # The authors' outer loop (ReST-EM): every `rest_em_every` steps (0: never; GRPO's advantages on the reward are
    # then the outer loop), a supervised phase fine-tunes the live policy on the self-edits kept since the last
    # one: per prompt, the `keep_per_prompt` best by reward among those whose gain is positive.
    rest_em_every: int = 0
    keep_per_prompt: int = 1
    rest_em_learning_rate: float = 1.0e-5
    rest_em_epochs: int = 1

    def check(self) -> None:
        if not self.learning_rate > 0:
            raise ConfigError(f"seal.learning_rate: must be positive, not {self.learning_rate}")
        if self.steps < 1:
            raise ConfigError(f"seal.steps: must be at least 1, not {self.steps}")
        if self.evaluation not in METRICS:
            raise ConfigError(f"seal.evaluation: must be one of {', '.join(METRICS)}, not {self.evaluation!r}")
        if self.reward not in REWARDS:
            raise ConfigError(f"seal.reward: must be one of {', '.join(REWARDS)}, not {self.reward!r}")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise ConfigError(f"seal.max_new_tokens: must be at least 1 or null, not {self.max_new_tokens}")
        if self.rest_em_every < 0:
            raise ConfigError(f"seal.rest_em_every: must be 0 (no phase) or a number of steps, not {self.rest_em_every}")
        if self.keep_per_prompt < 1:
            raise ConfigError(f"seal.keep_per_prompt: must be at least 1, not {self.keep_per_prompt}")
        if not self.rest_em_learning_rate > 0:
            raise ConfigError(f"seal.rest_em_learning_rate: must be positive, not {self.rest_em_learning_rate}")
        if self.rest_em_epochs < 1:
            raise ConfigError(f"seal.rest_em_epochs: must be at least 1, not {self.rest_em_epochs}")
