"""LANPO: language feedback from a pool of past trials guides exploration; numerical rewards alone drive the update.

Paper: Li, Wang, Yuan, Jegelka, Wang, "LANPO: Bootstrapping Language and Numerical Feedback for Reinforcement
Learning in LLMs", arXiv:2510.16552. Code followed: none public (README, "Code").

Every step's rollout goes into an experience pool (:mod:`stackrl.blocks.experience`). In the next steps some rows
of each group are sampled from a context made of stored trials: the question's own earlier trial with the retry
instruction (Reward-Agnostic Reflection), or lessons from trials of related questions (Relevant Abstraction). No
reward or correctness label reaches a context; the rows' rewards and GRPO's advantages are the host's, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import stackrl
from stackrl.blocks.experience import Experience, ExperienceLibrary, ExperienceSettings
from stackrl.blocks.roles import text_prompt
from stackrl.tasks import RETRY_TEMPLATE
from stackrl_lanpo.contexts import (
    ABSTRACT, ABSTRACTION_TEMPLATE, PLAIN, REFLECT, SUMMARY_TEMPLATE, abstraction_prompt, check_request,
    checked_reflection_prompt, reflection_prompt, row_modes, trial_lessons,
)
from stackrl_lanpo.retrieval import own_trials, related_trials

REFLECTIONS = ("retry", "check")
ABSTRACTIONS = ("trajectory", "policy")


@dataclass
class LanpoConfig:
    # Shares of each group's rows sampled from a context: the first reflect on the question's own earlier trials,
    # the next read lessons from related questions, the rest see the question alone (ours: the paper mixes
    # feedback-augmented and plain rollouts but gives no shares we could read).
    reflect_share: float = 0.25
    abstract_share: float = 0.25
    # How a reflection row is prompted: "retry", the earlier trial then "Try again." (docs/roles.md's retry format);
    # "check", the policy first writes its own check of the trial (the judge format), then the retry follows it.
    reflection: str = "retry"
    reflection_template: str = RETRY_TEMPLATE  # with {prompt} and {attempt}; used by "retry"
    # Lessons from related questions: "trajectory", the related trials themselves, raw (the CPU analogue); "policy",
    # the policy's own summary of them (SUMMARY_TEMPLATE), as the paper has the model abstract its experience.
    abstraction: str = "trajectory"
    abstraction_template: str = ABSTRACTION_TEMPLATE  # with {lessons} and {prompt}
    summary_template: str = SUMMARY_TEMPLATE  # with {trials}; used by "policy"
    related: int = 1  # related trials retrieved per question
    min_relevance: float = 0.0  # a related trial's retrieval score must pass this (ROUGE-L F or BM25)
    # True: the loss reads the question alone with the completions sampled from the contexts (off-context); False
    # (default): trained on the prompt it was sampled from.
    train_on_original: bool = False
    # The pool: every row of every step, at most `per_prompt` trials of a question (its oldest evicted first).
    experience: ExperienceSettings = field(default_factory=lambda: ExperienceSettings(capacity=1024, per_prompt=4))

    def __post_init__(self):
        for key in ("reflect_share", "abstract_share"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise stackrl.ConfigError(f"lanpo.{key}: must lie in [0, 1], not {getattr(self, key)}")
        if self.reflect_share + self.abstract_share > 1.0:
            raise stackrl.ConfigError(f"lanpo.abstract_share: with reflect_share the shares exceed 1 "
                                      f"({self.reflect_share} + {self.abstract_share})")
        if self.reflect_share + self.abstract_share == 0:
            raise stackrl.ConfigError("lanpo.reflect_share: with abstract_share 0 too, no row is ever shown a trial")
        if self.reflection not in REFLECTIONS:
            raise stackrl.ConfigError(f"lanpo.reflection: must be one of {', '.join(REFLECTIONS)}, "
                                      f"not '{self.reflection}'")
        if self.abstraction not in ABSTRACTIONS:
            raise stackrl.ConfigError(f"lanpo.abstraction: must be one of {', '.join(ABSTRACTIONS)}, "
                                      f"not '{self.abstraction}'")
        if self.related < 1:
            raise stackrl.ConfigError(f"lanpo.related: must be at least 1, not {self.related}")
        if self.min_relevance < 0:
            raise stackrl.ConfigError(f"lanpo.min_relevance: must be non-negative, not {self.min_relevance}")
        for key, fields in (("reflection_template", ("{prompt}", "{attempt}")),
                            ("abstraction_template", ("{lessons}", "{prompt}")), ("summary_template", ("{trials}",))):
            missing = [f for f in fields if f not in getattr(self, key)]
            if missing:
                raise stackrl.ConfigError(f"lanpo.{key}: must contain {' and '.join(missing)}")
        if not isinstance(self.experience, ExperienceSettings):  # a section given as a mapping
            self.experience = ExperienceSettings(**dict(self.experience))
        self.experience.check("lanpo")


class Lanpo(stackrl.Plugin):
    """Some rows of each group are sampled from a context of stored trials (the question's own earlier trial, or
    lessons from related questions), chosen and written without their rewards; GRPO updates on every row's reward
    as usual. The pool is plugin state."""

    Config = LanpoConfig
    activity = "rows were sampled from a context of stored trials (the question's own, or related questions')"

    def __init__(self, config=None):
        super().__init__(config)
        self.library = ExperienceLibrary(self.config.experience, "lanpo")
        self.shown: list[tuple[str, list[str]]] = []  # the last batch's rows: (mode, keys of the trials shown)
        self._stored = None  # the rollout last put in the pool (one rollout may serve several steps)

    def check_run(self, run):
        run.need_plain_text("lanpo", "its contexts extend the question as plain text (docs/roles.md's formats)")

    @staticmethod
    def _ids(prompt: str, ctx) -> list[int]:
        """The question's token ids, the pool's key for it (the dataset prompt, before any transform)."""
        return list(ctx.tokenizer(prompt, add_special_tokens=False)["input_ids"])

    # -- sample: contexts from the pool --------------------------------------------------------------------------
    @stackrl.hookimpl
    def transform_prompts(self, prompts, ctx):
        if not ctx.training:
            return None
        size = ctx.group_size
        modes = row_modes(size, self.config.reflect_share, self.config.abstract_share)
        self.shown = [(PLAIN, [])] * len(prompts)
        reflections, abstractions = [], {}  # (row, question, trial); group -> (question, trials)
        for group in range(len(prompts) // size):
            question = text_prompt(prompts[group * size], role="lanpo")
            ids = self._ids(question, ctx)
            own = own_trials(self.library, ids, modes.count(REFLECT))
            related = related_trials(self.library, question, ids, self.config.related,
                                     self.config.min_relevance) if ABSTRACT in modes else []
            for j, mode in enumerate(modes):
                row = group * size + j
                if mode == REFLECT and own:
                    reflections.append((row, question, own[j]))
                    self.shown[row] = (REFLECT, [own[j].key])
                elif mode == ABSTRACT and related:
                    abstractions[group] = (question, related)
                    self.shown[row] = (ABSTRACT, [t.key for t in related])
        out = list(prompts)
        for row, text in zip([r for r, _, _ in reflections], self._reflections(reflections, ctx)):
            out[row] = text
        lessons = self._lessons([trials for _, trials in abstractions.values()], ctx)
        for (group, (question, _)), lesson in zip(abstractions.items(), lessons):
            for j, mode in enumerate(modes):
                if mode == ABSTRACT:
                    out[group * size + j] = abstraction_prompt(question, lesson, self.config.abstraction_template)
        if self.config.train_on_original:  # never switches it off for a plugin before this one
            ctx.train_on_original = True
        changed = sum(mode != PLAIN for mode, _ in self.shown)
        ctx.log("reflected", sum(mode == REFLECT for mode, _ in self.shown) / len(prompts))
        ctx.log("abstracted", sum(mode == ABSTRACT for mode, _ in self.shown) / len(prompts))
        ctx.log("pool", len(self.library))
        ctx.acted(changed, of=len(prompts),
                  hint="the pool has no trial of these questions yet (the first step has none), or no related one "
                       "passes lanpo.min_relevance")
        return out

    def _reflections(self, reflections: list, ctx) -> list[str]:
        """Each reflection row's prompt: the trial and the retry instruction, after the policy's own check of the
        trial with ``reflection: check`` (one ``ctx.generate`` call for all of them)."""
        if self.config.reflection == "retry":
            return [reflection_prompt(q, t.completion, self.config.reflection_template) for _, q, t in reflections]
        checks = ctx.generate([check_request(q, t.completion) for _, q, t in reflections]) if reflections else []
        return [checked_reflection_prompt(q, t.completion, c.text.strip()) for (_, q, t), c in zip(reflections, checks)]

    def _lessons(self, trial_sets: list, ctx) -> list[str]:
        """Each group's lessons: its related trials raw, or the policy's summary of them (one call for all)."""
        raw = [trial_lessons(trials) for trials in trial_sets]
        if self.config.abstraction == "trajectory" or not raw:
            return raw
        summaries = ctx.generate([self.config.summary_template.format(trials=text) for text in raw])
        return [s.text.strip() + "\n" for s in summaries]

    # -- post-step: the step's trials into the pool ---------------------------------------------------------------
    @stackrl.hookimpl
    def post_step(self, ctx):
        rollout = ctx.rollout
        if rollout is None or rollout is self._stored:
            return
        self._stored = rollout
        for row in range(len(rollout)):
            question = rollout.prompts[row]
            mode = self.shown[row][0] if len(self.shown) == len(rollout) else PLAIN
            self.library.add(Experience(
                prompt_ids=self._ids(question, ctx), completion_ids=list(rollout.completion_ids[row]),
                completion=rollout.completions[row], prompt=question, step=ctx.step, tags=[mode],
                rewards={name: float(values[row]) for name, values in rollout.rewards.items()},
            ))

    @stackrl.hookimpl
    def state_dict(self):
        return {"library": self.library.state_dict()}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.library.load_state_dict(state["library"])
