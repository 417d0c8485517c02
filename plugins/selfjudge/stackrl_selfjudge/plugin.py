"""Self-judging: the live policy checks each of its solutions — working through it, then a verdict line — and the
verdict (1 correct, 0 wrong) is the reward; no reference solution is read. A judgement without a verdict scores
nothing (``None``), so the completion counts only through the run's other rewards. With ``self_instruct`` the
policy also writes practice problems into the prompt pool, which it then solves and judges like any other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from stackrl import PluginError, hookimpl
from stackrl.blocks.judges import JudgeReward, JudgeSettings, Scale
from stackrl.blocks.selfinstruct import SelfInstruct, SelfInstructSettings

VERIFICATION = (
    "Problem:\n{prompt}\nProposed solution:\n{attempt}\n"
    "Check the solution step by step without trusting it, then finish with a line \"Verdict: correct\" or "
    "\"Verdict: wrong\".\n"
)


@dataclass
class SelfJudgeConfig(JudgeSettings):
    judge_template: str = VERIFICATION
    scale: Scale = Scale.correct_wrong
    verdict_prefix: Optional[str] = "Verdict:"
    max_new_tokens: int = 1024
    # The practice-problem loop (off until every_steps is set): written problems join the pool label-free.
    self_instruct: SelfInstructSettings = field(default_factory=SelfInstructSettings)


class SelfJudge(JudgeReward):
    """Self-judging RL (Simonds et al., 2025, arXiv 2505.08827) on the reward hook."""

    Config = SelfJudgeConfig
    section = "selfjudge"

    def __init__(self, config=None):
        super().__init__(config)
        self.instruct = SelfInstruct(self.config.self_instruct, self.section)

    @hookimpl
    def post_step(self, ctx):
        if not self.instruct.due(ctx.step):
            return
        if ctx.pool is None:
            raise PluginError("selfjudge.self_instruct needs the prompt pool, which this run lacks (its training data "
                              "is not a map-style dataset)")
        # Every practice problem kept by the rules may be shown to later requests: the paper filters no further.
        self.instruct.examples.extend(self.instruct.round(ctx))

    @hookimpl
    def state_dict(self):
        return {"instruct": self.instruct.state_dict()}

    @hookimpl
    def load_state_dict(self, state):
        self.instruct.load_state_dict(state["instruct"])
