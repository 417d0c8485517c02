"""EvolveR's experience lifecycle as a plugin: principles distilled from the policy's successes into a repository,
retrieved into the prompts of later questions, scored by how often the rows shown them succeeded, merged when they
repeat one another and pruned when their score falls low; the policy is trained by GRPO on the prompts it was shown."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from stackrl import ConfigError, Plugin, PluginError, hookimpl
from stackrl.blocks.experience import Experience, ExperienceSettings
from stackrl.plugin import template_fields
from stackrl.rewards import OutcomeSettings, reference_answers

from stackrl_evolver.principles import Principles
from stackrl_evolver.retrieval import retrieved, with_principles


# Ours, in the spirit of the authors' summarisation prompt for a successful trajectory (evolver/experience/prompts.py).
SUMMARY_TEMPLATE = (
    "Below is a question and a solution that reached the right answer.\n\nQuestion: {question}\n\n"
    "Solution: {completion}\n\nIn one or two sentences, state the general principle that made this solution "
    "work, one that would help with similar questions; do not restate this question's specifics.\nPrinciple:"
)
PRINCIPLE_SOURCES = ("completion", "policy")


@dataclass
class EvolverConfig(OutcomeSettings):
    # Inherited (stackrl.rewards.OutcomeSettings): metric, the built-in reward that tells a success (exact_match),
    # and answer_column, the column of the reference answers.
    section: ClassVar[str] = "evolver"
    top_k: int = 3  # principles retrieved per question (the authors' TOP_K_PRINCIPLES)
    # Only principles at least this similar to the question are retrieved (ROUGE-L F, or BM25's score); 0, the
    # authors' choice, retrieves the top_k closest whatever their similarity.
    min_similarity: float = 0.0
    # How the retrieved principles precede the question; {principles} are their texts joined by `separator`.
    # The default with one principle is the built-in task's reference layout (stackrl.tasks.REFERENCE_TEMPLATE).
    template: str = "{principles}\n\n{prompt}"
    separator: str = "\n\n"
    # A new principle whose text has ROUGE-L F at least this with a kept one is merged into it (the authors:
    # 0.85 cosine similarity of embeddings, then a yes from the model).
    merge_threshold: float = 0.85
    # Every `prune_every` steps (0: never), principles whose score (s + 1) / (u + 2) is below `prune_threshold`
    # are removed (the authors' script: 0.3 every 10 steps).
    prune_threshold: float = 0.3
    prune_every: int = 10
    # What a principle's text is: "completion", the success's completion, whole (the raw-trajectory analogue the
    # built-in models can use); "policy", what `model` (the policy, or an auxiliary model) writes, greedily, in at
    # most `summary_tokens` tokens when asked `summary_template` with the success's question and completion (the
    # authors': the policy summarises the trajectory; their prompt is theirs, this one ours).
    principle_from: str = "completion"
    model: str = "policy"
    summary_template: str = SUMMARY_TEMPLATE
    summary_tokens: int = 128
    # The repository: principles are retrieved by their text (indexed: artefact); past capacity the principle of
    # lowest score leaves.
    experience: ExperienceSettings = field(
        default_factory=lambda: ExperienceSettings(capacity=1024, eviction="lowest_utility", indexed="artefact"))

    def check(self):
        if self.top_k < 1:
            raise ConfigError(f"evolver.top_k: must be at least 1, not {self.top_k}")
        missing = [name for name in ("principles", "prompt") if name not in template_fields(self.template)]
        if missing:
            raise ConfigError(f"evolver.template: must contain {' and '.join('{' + m + '}' for m in missing)}")
        if not (math.isfinite(self.merge_threshold) and 0 < self.merge_threshold <= 1):
            raise ConfigError(f"evolver.merge_threshold: must lie in (0, 1], not {self.merge_threshold}")
        if not (math.isfinite(self.prune_threshold) and 0 <= self.prune_threshold < 1):
            raise ConfigError(f"evolver.prune_threshold: must lie in [0, 1), not {self.prune_threshold}")
        if not (math.isfinite(self.min_similarity) and self.min_similarity >= 0):
            raise ConfigError(f"evolver.min_similarity: must be a number of 0 or more, not {self.min_similarity}")
        if self.prune_every < 0:
            raise ConfigError(f"evolver.prune_every: must be 0 (never) or more, not {self.prune_every}")
        if self.principle_from not in PRINCIPLE_SOURCES:
            raise ConfigError(f"evolver.principle_from: must be one of {', '.join(PRINCIPLE_SOURCES)}, not "
                              f"'{self.principle_from}'")
        missing = [name for name in ("question", "completion") if name not in template_fields(self.summary_template)]
        if self.principle_from == "policy" and missing:
            raise ConfigError(f"evolver.summary_template: must contain {' and '.join('{' + m + '}' for m in missing)}")
        if self.summary_tokens < 1:
            raise ConfigError(f"evolver.summary_tokens: must be at least 1, not {self.summary_tokens}")
        if self.experience.indexed != "artefact":
            raise ConfigError(f"evolver.experience.indexed: principles are retrieved by their text, so it must be "
                              f"artefact, not '{self.experience.indexed}'")


class Evolver(Plugin):
    """Retrieves principles into each training prompt, scores them by the outcomes of the rows shown them, distils
    every success into a new principle or merges it into the ones it repeats, and prunes low scores."""

    Config = EvolverConfig
    activity = "completions were sampled with retrieved principles in their prompt"

    def __init__(self, config=None):
        super().__init__(config)
        self.principles = Principles(self.config.experience, "evolver", self.config.merge_threshold)
        self.pending: list[list[str]] | None = None  # per row of the last training batch, the principles shown
        self.shown_rows = (0, 0)  # rows of the last training batch shown principles, of its rows

    def check_run(self, run):
        run.need_column("evolver.answer_column", self.config.answer_column, "which tells the successes distilled")
        known = {"policy", *run.aux_models} | ({"reference"} if run.reference else set())
        if self.config.principle_from == "policy" and self.config.model not in known:
            raise ConfigError(f"evolver.model: '{self.config.model}' is neither the policy, the reference nor a "
                              f"model of aux_models ({', '.join(run.aux_models) or 'none'})")

    @hookimpl
    def transform_prompts(self, prompts, ctx):
        shown = retrieved(self.principles, prompts, self.config.top_k, ctx.group_size, self.config.min_similarity)
        if ctx.training:  # what the post-step credits; evaluation retrieves too, as the authors' does
            self.pending = [[p.key for p in found] for found in shown]
        return [with_principles(p, found, self.config.template, self.config.separator)
                for p, found in zip(prompts, shown)]

    @hookimpl
    def post_step(self, ctx):
        if self.pending is not None and ctx.rollout is not None:  # once per generation batch
            keys, self.pending = self.pending, None
            rollout = ctx.rollout
            if len(keys) != len(rollout):
                raise PluginError(f"evolver: {len(keys)} rows were shown principles, but the rollout has "
                                  f"{len(rollout)}")
            answers = reference_answers(rollout.columns, self.config.answer_column, plugin="evolver",
                                        purpose="tell the successes that score and make principles")
            correct = [None if a is None else self.config.is_correct(text, str(a))
                       for text, a in zip(rollout.completions, answers)]
            self.shown_rows = (sum(bool(k) for k in keys), len(keys))
            self.lifecycle(keys, correct, rollout, ctx)
        if self.config.prune_every and ctx.step % self.config.prune_every == 0:
            ctx.log("pruned", len(self.principles.prune(self.config.prune_threshold)))
        ctx.log("principles", len(self.principles))
        n, of = self.shown_rows
        ctx.acted(n, of=of, hint="the repository is empty until a success is distilled, and a question retrieves "
                                 "only principles at least evolver.min_similarity close to it")

    def lifecycle(self, keys: list[list[str]], correct: list, rollout, ctx) -> None:
        """The step's update: each principle shown is credited with its rows' outcomes, then every success is
        distilled (its completion, or what the policy writes of it, the principle's text: merged into the principles
        it repeats, or a new one)."""
        for shown, ok in zip(keys, correct):
            if ok is not None:
                for key in shown:
                    self.principles.credit(key, ok)
        candidates = [Experience.of_row(rollout, row, ctx.step, artefact=rollout.completions[row].strip())
                      for row, ok in enumerate(correct) if ok]
        if self.config.principle_from == "policy":
            candidates = self.summarised(candidates, chat=isinstance(rollout.prompts[0], list), ctx=ctx)
        merged, created = self.principles.distill(candidates)
        ctx.log("merged", merged)
        ctx.log("created", created)

    def summarised(self, candidates: list[Experience], chat: bool, ctx) -> list[Experience]:
        """The candidates with their text the principle ``model`` writes of each (one greedy ``ctx.generate`` call);
        a candidate whose reply is empty is dropped."""
        if not candidates:
            return []
        requests = [self.config.summary_template.format(question=c.prompt, completion=c.completion)
                    for c in candidates]
        replies = ctx.generate([[{"role": "user", "content": r}] if chat else r for r in requests],
                               model=self.config.model, do_sample=False, max_new_tokens=self.config.summary_tokens)
        for candidate, reply in zip(candidates, replies):
            candidate.artefact = reply.text.strip()
        ctx.log("summarised", sum(bool(c.artefact) for c in candidates) / len(candidates))
        return [c for c in candidates if c.artefact]

    @hookimpl
    def state_dict(self):
        return {"principles": self.principles.state_dict(), "shown_rows": list(self.shown_rows)}

    @hookimpl
    def load_state_dict(self, state):
        self.principles = Principles(self.config.experience, "evolver", self.config.merge_threshold)
        self.principles.load_state_dict(state["principles"])
        self.shown_rows = tuple(state["shown_rows"])
