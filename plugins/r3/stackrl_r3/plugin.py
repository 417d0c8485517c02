"""R^3's cross-context replay: where a group's samples all fail, a stored success of the same prompt takes a row;
with ``reflect``, where none is stored, the policy's answer after being shown the prompt's past failure does."""

from __future__ import annotations

from dataclasses import dataclass

import stackrl
from stackrl.blocks.insertion import failed_groups, into_last_rows, reaches
from stackrl.blocks.memory import PromptMemory
from stackrl.blocks.roles import text_prompt
from stackrl.blocks.tokensignals import STUDENT, TokenSignals
from stackrl.plugin import training_only
from stackrl.tasks import RETRY_TEMPLATE
from stackrl_r3.ranking import ranking_rewards, structural_scores

# The rollout column marking the rows whose completion is a replayed success.
REPLAYED = "r3_replayed"
# The rollout column holding, on each reflected row, the past failure its prompt showed (None on the other rows).
REFLECTED = "r3_reflected_on"


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
    # In-context self-reflection: a group whose samples all fail, whose prompt has no stored success but a stored
    # failure from an earlier step, gets in its last row the policy's answer to `reflect_template` (the question
    # and that failure). Off by default: the policy must have learnt to use an attempt shown to it.
    reflect: bool = False
    reflect_template: str = RETRY_TEMPLATE
    # "any": every reflection takes the row; "success": only one reaching the answer, else the sample stays.
    reflect_insert: str = "any"

    def __post_init__(self):
        if self.keep not in ("latest", "first"):
            raise stackrl.ConfigError(f"r3.keep: must be one of latest, first, not '{self.keep}'")
        if not 0.0 <= self.rank_scale < 1.0:
            raise stackrl.ConfigError(f"r3.rank_scale: must lie in [0, 1), not {self.rank_scale}")
        if not 0.0 < self.top_fraction <= 1.0:
            raise stackrl.ConfigError(f"r3.top_fraction: must lie in (0, 1], not {self.top_fraction}")
        if self.stability_weight < 0:
            raise stackrl.ConfigError(f"r3.stability_weight: must be non-negative, not {self.stability_weight}")
        if self.reflect_insert not in ("any", "success"):
            raise stackrl.ConfigError(f"r3.reflect_insert: must be one of any, success, not '{self.reflect_insert}'")
        missing = [field for field in ("{prompt}", "{attempt}") if field not in self.reflect_template]
        if missing:
            raise stackrl.ConfigError(f"r3.reflect_template: must contain {' and '.join(missing)}")


class R3(stackrl.Plugin):
    """Cross-context replay: a group whose every sample misses the answer gets, in its last row, the latest success
    of the same prompt from an earlier step, so GRPO has an advantage to learn from; with ``reflect``, a group whose
    prompt has none stored gets the policy's answer after its prompt's past failure instead. Both stores are plugin
    state."""

    Config = R3Config
    activity = "groups had no success of their own and got a replayed success or a reflection on a past failure"

    def __init__(self, config=None):
        super().__init__(config)
        self.buffer = PromptMemory(latest=self.config.keep == "latest")  # each prompt's success, its token ids
        self.failures = PromptMemory()  # each prompt's latest failure, its text

    def check_run(self, run):
        run.need_column("r3.answer_column", self.config.answer_column, "replay decides success by it")
        if self.config.reflect:
            run.need_plain_text("r3.reflect", "a reflection extends the question as plain text in the retry format "
                                "(docs/roles.md)")

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
        replayed = stored(self.buffer, samples, failed, size)
        shown = self.reflections(prompts, samples, answers, [g for g in failed if g not in replayed], ctx)
        # This step's samples are stored after the choices, so a group is never replayed its own success nor shown
        # its own failure.
        prompt_ids = [s.prompt_ids for s in samples]
        self.buffer.remember(prompt_ids, [list(s.completion_ids) for s in samples], correct, size)
        self.failures.remember(prompt_ids, [s.text for s in samples],
                               [a is not None and not c for a, c in zip(answers, correct)], size)
        groups = len(samples) // size
        ctx.log("failed_groups", len(failed) / max(1, groups))
        ctx.log("buffer", len(self.buffer))
        ctx.acted(len(replayed) + len(shown), of=groups,
                  hint="no all-fail group's prompt had a success (or, with r3.reflect, a failure) stored from an "
                       "earlier step")
        out = into_last_rows(samples, {**replayed, **{g: ids for g, (_, ids) in shown.items()}}, size, REPLAYED)
        if self.config.reflect:
            # into_last_rows marked every replaced row as replayed; a reflected row is marked by the failure shown.
            out.columns[REFLECTED] = [None] * len(samples)
            for group, (attempt, _) in shown.items():
                row = (group + 1) * size - 1
                out.columns[REPLAYED][row], out.columns[REFLECTED][row] = False, attempt
        return out

    def reflections(self, prompts: list, samples: list, answers: list, groups: list[int], ctx) -> dict:
        """For each of ``groups`` (all failed, no success stored) whose prompt has a stored failure, and with
        ``reflect``: ``{group: (the failure shown, the reflection's completion ids)}``, one reflection sampled per
        group in one ``ctx.generate`` call; with ``reflect_insert: success``, only the reflections reaching the
        answer."""
        if not self.config.reflect:
            return {}
        size = ctx.group_size
        shown = stored(self.failures, samples, groups, size)
        asked = list(shown)
        replies = ctx.generate([
            self.config.reflect_template.format(prompt=text_prompt(prompts[g * size], role="r3 reflection"),
                                                attempt=shown[g])
            for g in asked
        ])
        fixed = [reaches(reply.text, answers[g * size]) for g, reply in zip(asked, replies)]
        ctx.log("reflected", len(asked) / max(1, len(samples) // size))
        if asked:
            ctx.log("reflection_fixed", sum(fixed) / len(asked))
        keep_all = self.config.reflect_insert == "any"
        return {g: (shown[g], list(reply.completion_ids))
                for g, reply, ok in zip(asked, replies, fixed) if keep_all or ok}

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
        return {"successes": self.buffer.state_dict(), "failures": self.failures.state_dict()}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.buffer.load_state_dict(state["successes"])
        self.failures.load_state_dict(state["failures"])


def stored(memory: PromptMemory, samples: list, groups: list[int], group_size: int) -> dict:
    """The value ``memory`` holds for each of ``groups``' prompt, for the groups whose prompt has one."""
    found = dict(zip(groups, memory.recall([samples[g * group_size].prompt_ids for g in groups])))
    return {g: value for g, value in found.items() if value is not None}
