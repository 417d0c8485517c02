"""Every setting of the DoND self-play plugin: the authors' objectives and filters, and the rounds' fine-tuning."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl import ConfigError
from stackrl.blocks.supervised import SupervisedSettings

OBJECTIVES = ("self", "coop", "comp")
FILTERS = ("above_avg", "nonzero", "all")


@dataclass
class DondConfig(SupervisedSettings):
    # The score a seat is filtered by (the authors' --objective): "self" its own return (semi-competitive), "coop"
    # the sum of every seat's return (cooperative), "comp" its return less the others' (strictly competitive).
    objective: str = "self"
    # Which seats' actions are imitated (the authors' --filter): "above_avg" a score strictly above the mean score of
    # the round's seats, "nonzero" a score strictly above 0, "all" every seat. Under "comp" a seat of an episode that
    # reached a deal is also kept at score 0 (an even split; the authors' rule).
    filter: str = "above_avg"
    # Whether GRPO's own policy-gradient update runs beside the rounds. The paper trains by filtered behaviour cloning
    # only: false sets every advantage to 0, so the RL step only samples the round's games (with trainer.beta 0 it
    # moves no weight) and the fine-tuning phases are the whole training.
    grpo: bool = False
    # The rounds (stackrl.blocks.supervised): every `every` steps a round ends, its games filtered and the kept seats'
    # actions fine-tuned into the live policy (the next round plays with the fine-tuned model). The authors fine-tune
    # 3 epochs at a batch of 1 (OpenAI's API, learning-rate multiplier 8); the rate here is ours, for the built-in model.
    every: int = 1
    sft_learning_rate: float = 1.0e-3
    sft_epochs: int = 3


def check(config: DondConfig) -> None:
    """Refuse settings no run could use, naming the key."""
    if config.objective not in OBJECTIVES:
        raise ConfigError(f"dond.objective: must be one of {', '.join(OBJECTIVES)}, not {config.objective!r}")
    if config.filter not in FILTERS:
        raise ConfigError(f"dond.filter: must be one of {', '.join(FILTERS)}, not {config.filter!r}")
    config.check_supervised("dond")
