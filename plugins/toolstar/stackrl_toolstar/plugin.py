"""Tool-Star: a hierarchical reward for multi-tool reasoning over the environment runner's episodes.

Paper: Dong, Chen, Li, Jin, Qian, Zhu, Mao, Zhou, Dou, Wen, "Tool-Star: Empowering LLM-Brained Multi-Tool Reasoner via
Reinforcement Learning" (arXiv 2505.16410; seed-000 catalogue line 187). Code followed: dongguanting/Tool-Star@d12222c
(Tool_Star_RL/src/verl/verl/utils/reward_score/re_search.py). The cold-start SFT and the optional self-critic DPO
stage are left out (README.md says why).
"""

from __future__ import annotations

import stackrl
from stackrl.blocks.env import END_COLUMN, INFO_COLUMN
from stackrl.rewards import extract_answer, reference_answers

from stackrl_toolstar.config import ToolstarConfig
from stackrl_toolstar.hierarchy import episode, hierarchical_reward


class Toolstar(stackrl.Plugin):
    """The reward component `toolstar`: a malformed row scores lowest, a well-formed wrong one next, a right one
    higher, and a right one that called several distinct tools without their raising gets a bonus. It reads the
    `env` plugin's columns (`env_info`, `env_end`) where the rollout has them; a rollout without the runner is
    scored on its answer alone (no tools, no bonus)."""

    Config = ToolstarConfig
    activity = "completions it scored on the hierarchy (malformed, wrong, right, right with several tools)"

    def check_run(self, run):
        run.need_column("toolstar.answer_column", self.config.answer_column, "tell right answers for the reward")

    @stackrl.hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        references = reference_answers(rollout.columns, config.answer_column, plugin="toolstar",
                                       purpose="tell right answers for the hierarchical reward")
        infos = rollout.columns.get(INFO_COLUMN, [None] * len(rollout))
        ends = rollout.columns.get(END_COLUMN, [None] * len(rollout))
        rewards, counts = [], {"malformed": 0, "wrong": 0, "right": 0, "multi_tool": 0, "raised": 0}
        for completion, reference, info, end in zip(rollout.completions, references, infos, ends):
            if reference is None:  # a row without an answer (docs/hooks.md "Rows without an answer"): not scored
                rewards.append(None)
                continue
            facts = episode(info, end, extract_answer(completion) is not None)
            correct = facts.well_formed and config.is_correct(completion, str(reference))
            value = hierarchical_reward(facts, correct, malformed=config.malformed, wrong=config.wrong,
                                        right=config.right, bonus=config.bonus, min_tools=config.min_tools)
            rewards.append(value)
            level = "malformed" if not facts.well_formed else "right" if correct else "wrong"
            counts[level] += 1
            counts["multi_tool"] += correct and len(facts.tools) >= config.min_tools
            counts["raised"] += facts.raised
        scored = sum(r is not None for r in rewards)
        for key, count in counts.items():
            if scored:
                ctx.log(key, count / scored)
        ctx.acted(scored, of=len(rollout), hint="toolstar scores rows with a reference answer (toolstar.answer_column)")
        return rewards
