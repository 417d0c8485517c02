"""Every setting of the CoVo reward, with the authors' code's values as defaults (paper: arXiv 2506.08745)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional

from stackrl.answers import Extractor


class Aggregation(Enum):
    riv = "riv"  # vectorial: the norm of the mean of (con cos vol, con sin vol) over an answer's trajectories
    ril = "ril"  # linear: mean consistency minus mean volatility


class RewardMode(Enum):
    binary = "binary"  # 1 for every trajectory whose answer's aggregate reaches its threshold, else 0 (authors' code)
    continuous = "continuous"  # the aggregate of the trajectory's answer itself (the code's commented alternative)


class Curiosity(Enum):
    log = "log"  # compute and log it only: what the released code does (the bonus never reaches the reward)
    add = "add"  # add the bonus to the reward, as the paper describes; only in groups with two answers or more
    off = "off"  # neither (saves the curiosity probes)


class Scoring(Enum):
    shared_prefix = "shared_prefix"  # ctx.score_probes: one forward per trajectory and all its probes
    per_probe = "per_probe"  # ctx.score: one prefix per probe, as the authors' vLLM pass (same numbers, slower)


@dataclass
class CoVoConfig:
    # Answers: extracted from each completion, then clustered into a group's distinct answers y_1..y_K.
    # None: the run's answer format (data.answer_format; on boxed data, boxed: the wrapper kept, as the authors'
    # probes carry it); the built-in task's is answer_is.
    answer_extractor: Optional[Extractor] = None
    answer_regex: Optional[str] = None  # with answer_extractor: regex
    math_verify: bool = True  # answers also count as one when math-verify finds them equal (the authors' check)
    # Steps: non-empty lines; \[ ... \] blocks kept whole; at most max_steps (colon lines merged, then chunks).
    max_steps: int = 15
    # Probes: after each step, the log-prob of "{template with each distinct answer}" gives one distance.
    probe_template: str = "\nThe answer is: {answer}"
    greedy_next_token: bool = True  # also average in the most likely next token's log-prob (the code's vLLM call)
    scoring: Scoring = Scoring.shared_prefix
    batch_size: Optional[int] = None  # trajectories (per_probe: prefixes) per forward; default the train batch
    # Reward.
    aggregation: Aggregation = Aggregation.riv
    reward_mode: RewardMode = RewardMode.binary
    riv_threshold: float = 0.5
    ril_threshold: float = 0.05
    # Curiosity: mean over steps of (perplexity of the step - ln(KL(P || U)^(1/3) + 1)).
    curiosity: Curiosity = Curiosity.log
    curiosity_threshold: float = 2.0  # the bonus goes to trajectories whose curiosity exceeds this
    curiosity_bonus: float = 0.4
    # The authors' accuracy filter: groups whose mean CoVo reward (before any bonus) is below 0.001 are kept out
    # of the policy loss (rollout.exclude_from_loss) in training.
    group_filter: bool = False
