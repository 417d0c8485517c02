"""R^3's cross-context replay: where a group's samples all fail, a stored success of the same prompt takes a row."""

from __future__ import annotations

from dataclasses import dataclass

import stackrl
from stackrl.blocks.insertion import failed_groups, into_last_rows, reaches
from stackrl.blocks.tokensignals import STUDENT, TokenSignals
from stackrl.plugin import training_only
from stackrl_r3.ranking import ranking_rewards, structural_scores

# The rollout column marking the rows whose completion is a replayed success.
REPLAYED = "r3_replayed"


@dataclass
class R3Config:
    # The dataset column with the reference answers a sample must reach to count as a success (the replay decides
    # before any reward exists, as ExPO's insert mode does: the final answer, up to math equivalence).
    answer_column: str = "answer"
    # "latest": a prompt's newest success replaces the stored one (the replayed sample stays near the policy);
    # "first": the first success is kept.
    keep: str = "latest"
    # The ranking reward (its component `r3`, weighted by rewards.r3): a success earns `rank_scale`, the k failed
    # or cut-off samples of a group scale * rank / k by their structural-entropy score (stackrl_r3.ranking);
    # 0 switches it off. Below 1, so that with exact_match at weight 1 no failure outranks a success.
    rank_scale: float = 0.1
    top_fraction: float = 0.2
    stability_weight: float = 1.0

    def __post_init__(self):
        if self.keep not in ("latest", "first"):
            raise stackrl.ConfigError(f"r3.keep: must be one of latest, first, not '{self.keep}'")
        if not 0.0 <= self.rank_scale < 1.0:
            raise stackrl.ConfigError(f"r3.rank_scale: must lie in [0, 1), not {self.rank_scale}")
        if not 0.0 < self.top_fraction <= 1.0:
            raise stackrl.ConfigError(f"r3.top_fraction: must lie in (0, 1], not {self.top_fraction}")
        if self.stability_weight < 0:
            raise stackrl.ConfigError(f"r3.stability_weight: must be non-negative, not {self.stability_weight}")


class SuccessBuffer:
    """Per prompt (by its tokens), one successful completion's tokens from an earlier step."""

    def __init__(self, latest: bool = True):
        self.latest = latest
        self.successes: dict[tuple[int, ...], list[int]] = {}

    def store(self, samples: list, correct: list[bool], group_size: int) -> None:
        """Keep each group's first correct sample as its prompt's success."""
        for start in range(0, len(samples), group_size):
            row = next((i for i in range(start, start + group_size) if correct[i]), None)
            key = None if row is None else tuple(samples[row].prompt_ids)
            if row is not None and (self.latest or key not in self.successes):
                self.successes[key] = list(samples[row].completion_ids)

    def replacements(self, samples: list, groups: list[int], group_size: int) -> dict[int, list[int]]:
        """The stored success of each of ``groups``' prompt, for the groups whose prompt has one."""
        found = {g: self.successes.get(tuple(samples[g * group_size].prompt_ids)) for g in groups}
        return {g: ids for g, ids in found.items() if ids is not None}


class R3(stackrl.Plugin):
    """Cross-context replay: a group whose every sample misses the answer gets, in its last row, the latest success
    of the same prompt from an earlier step, so GRPO has an advantage to learn from; the buffer is plugin state."""

    Config = R3Config
    activity = "groups had no success of their own and got a replayed one"

    def __init__(self, config=None):
        super().__init__(config)
        self.buffer = SuccessBuffer(latest=self.config.keep == "latest")

    def check_run(self, run):
        run.need_column("r3.answer_column", self.config.answer_column, "replay decides success by it")

    @stackrl.hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        samples = ctx.generate(prompts)
        answers = ctx.rollout_columns.get(self.config.answer_column)
        if answers is None:
            raise stackrl.PluginError(f"r3.answer_column: the batch has no column '{self.config.answer_column}'")
        size = ctx.group_size
        correct = [a is not None and reaches(s.text, a) for s, a in zip(samples, answers)]
        # A group without an answer cannot fail: it is left as sampled.
        failed = [g for g in failed_groups(correct, size) if answers[g * size] is not None]
        replayed = self.buffer.replacements(samples, failed, size)
        # This step's successes are stored after the choice, so a group is never replayed its own sample.
        self.buffer.store(samples, correct, size)
        ctx.log("failed_groups", len(failed) / max(1, len(samples) // size))
        ctx.log("buffer", len(self.buffer.successes))
        ctx.acted(len(replayed), of=len(samples) // size,
                  hint="no all-fail group's prompt had a success stored from an earlier step")
        return into_last_rows(samples, replayed, size, REPLAYED)

    @stackrl.hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        answers = rollout.columns.get(self.config.answer_column, [None] * len(rollout))
        if self.config.rank_scale == 0.0:
            return [0.0] * len(rollout)
        correct = [a is not None and reaches(text, a) for text, a in zip(rollout.completions, answers)]
        signals = TokenSignals.of(ctx)
        scores = structural_scores(signals.entropy(STUDENT), signals.mask, top_fraction=self.config.top_fraction,
                                   stability_weight=self.config.stability_weight)
        ranked = ranking_rewards(scores, correct, rollout.group_size, self.config.rank_scale)
        # A row without an answer has no success or failure to rank: not scored.
        return [None if a is None else r for r, a in zip(ranked, answers)]

    @stackrl.hookimpl
    def state_dict(self):
        # Lists of plain values, which a weights-only checkpoint load accepts (tuple keys it would not).
        return {"successes": [[list(key), ids] for key, ids in self.buffer.successes.items()]}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.buffer.successes = {tuple(key): list(ids) for key, ids in state["successes"]}
