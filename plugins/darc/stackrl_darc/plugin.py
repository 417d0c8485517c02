"""DARC's solver stage: asymmetric self-distillation. Each question's pseudo-label is the majority answer of a
document-augmented teacher (the policy with a document retrieved from a corpus in its context), and the solver,
which never sees the document, earns 1 for agreeing with it.

Paper: DARC: Decoupled Asymmetric Reasoning Curriculum for LLM Evolution (arXiv 2601.13761, catalogue 001:169). Code
followed: github.com/RUCBM/DARC @ 913dfd9 (README.md says where this plugin differs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict

import stackrl
from stackrl.answers import AnswerSettings, extractor_of
from stackrl.blocks.experience import ExperienceLibrary, ExperienceSettings
from stackrl.blocks.selfplay import solutions

from stackrl_darc.corpus import DOCUMENT, add_pool_rows, documents_for, teacher_prompts_with
from stackrl_darc.labels import agreement_rewards, pseudo_label

# The teacher's prompt: the document, then the question (the built-in task's REFERENCE_TEMPLATE layout, which the
# built-in models learned to follow).
TEACHER_TEMPLATE = "{document}\n\n{prompt}"


@dataclass
class DarcConfig(AnswerSettings):
    """The section `darc:`. Answers (inherited): answer_extractor (the run's format), answer_regex, math_verify."""

    section: ClassVar[str] = "darc"
    document_column: str = "solution"  # the data column whose text is a row's document in the corpus
    teacher_template: str = TEACHER_TEMPLATE  # the teacher's prompt: {document} and {prompt}
    documents: int = 1  # documents retrieved into the teacher's prompt (the authors: the question's one source)
    min_score: float = 0.0  # a document scoring below this (ROUGE-L F or BM25) is not used: the group is unscored
    teacher: str = "policy"  # the model that reads the document (authors: the current policy); or reference, a snapshot
    label_samples: int = 8  # the teacher's samples per question (authors' label_n)
    vote_threshold: float = 0.3  # the least share of samples giving the majority answer for a label (authors)
    label_sampling: Dict[str, Any] = field(default_factory=lambda: {"temperature": 1.0, "top_p": 0.95})  # authors'
    experience: ExperienceSettings = field(default_factory=lambda: ExperienceSettings(capacity=4096, indexed="prompt"))

    def __post_init__(self):
        super().__post_init__()
        if self.documents < 1:
            raise stackrl.ConfigError(f"darc.documents: must be at least 1, not {self.documents}")
        if self.label_samples < 1:
            raise stackrl.ConfigError(f"darc.label_samples: must be at least 1, not {self.label_samples}")
        if not 0.0 <= self.vote_threshold <= 1.0:
            raise stackrl.ConfigError(f"darc.vote_threshold: must lie in [0, 1], not {self.vote_threshold}")
        if "{" + DOCUMENT + "}" not in self.teacher_template:
            raise stackrl.ConfigError("darc.teacher_template: must contain {document}, or the teacher reads no document")
        if "{prompt}" not in self.teacher_template:
            raise stackrl.ConfigError("darc.teacher_template: must contain {prompt}, the question")
        if not self.document_column:
            raise stackrl.ConfigError("darc.document_column: name the data column of the documents")
        if isinstance(self.experience, dict):  # a section built by hand rather than by the host
            self.experience = ExperienceSettings(**self.experience)
        self.experience.check("darc")


class Darc(stackrl.Plugin):
    """DARC's solver stage (the reward hook): a retrieved document in the teacher's context, its majority answer
    the label, agreement with it the solver's reward; the corpus (the library) filled from the pool."""

    Config = DarcConfig
    activity = "completions were scored against a document-augmented teacher's label"

    def __init__(self, config=None):
        super().__init__(config)
        self.library = ExperienceLibrary(self.config.experience, "darc")
        self.scanned = 0  # pool rows read into the corpus so far

    def check_run(self, run):
        run.need_column("darc.document_column", self.config.document_column, "whose text is the teacher's document")
        run.check_template(self, "teacher_template", own=(DOCUMENT,))
        if self.config.teacher in run.aux_models and self.config.label_samples > 1:
            raise stackrl.ConfigError(
                f"darc.label_samples: an auxiliary model answers a repeated request once per step (docs/hooks.md), so "
                f"with teacher: {self.config.teacher} the majority takes 1 sample")
        return None

    # -- the corpus --------------------------------------------------------------------------------------------------

    def scan(self, ctx) -> None:
        """The pool's rows not read yet, kept as documents."""
        pool = ctx.pool
        if pool is None:
            raise stackrl.PluginError("darc needs the prompt pool, from whose rows its corpus is built (the training "
                                      "data is not a map-style dataset)")
        added = add_pool_rows(self.library, pool, range(self.scanned, len(pool)), self.config.document_column,
                              ctx.tokenizer)
        self.scanned = len(pool)
        ctx.log("corpus", len(self.library))
        ctx.log("corpus_added", added)

    @stackrl.hookimpl
    def train_begin(self, ctx):
        self.scan(ctx)

    @stackrl.hookimpl
    def post_step(self, ctx):
        self.scan(ctx)

    # -- the solver's reward -----------------------------------------------------------------------------------------

    @stackrl.hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        size, rows = rollout.group_size, len(rollout)
        read = extractor_of(config, "darc", config.answer_extractor or rollout.answer_format)
        starts = list(range(0, rows, size))
        found = documents_for(self.library, [rollout.prompts[s] for s in starts], config.documents, config.min_score)
        asked = [g for g, hit in enumerate(found) if hit is not None]
        prompts = teacher_prompts_with([rollout.prompts[starts[g]] for g in asked], [found[g][0] for g in asked],
                                       config.teacher_template, "darc.teacher_template")
        taught = solutions(ctx, prompts, config.label_samples, read, math_verify=config.math_verify,
                           model=config.teacher, **config.label_sampling)
        labels = {g: pseudo_label(group, config.vote_threshold) for g, (_, group) in zip(asked, taught)}

        answers = [read(text) for text in rollout.completions]
        rewards: list = [None] * rows
        declared: list = [None] * rows
        for g, label in labels.items():
            span = slice(starts[g], starts[g] + size)
            rewards[span] = agreement_rewards(answers[span], label, config.math_verify)
            declared[span] = [label.answer] * size
        ctx.declare_pseudo_labels(declared)
        scored = sum(r is not None for r in rewards)
        groups = len(starts)
        ctx.log("documented", len(asked) / groups)
        ctx.log("labelled", sum(label.answer is not None for label in labels.values()) / groups)
        if labels:
            ctx.log("vote_share", sum(label.share for label in labels.values()) / len(labels))
            ctx.log("retrieval_score", sum(found[g][1] for g in asked) / len(asked))
        hint = None
        if not scored:
            hint = ("the corpus is empty: darc.document_column has no text in the pool's rows" if not len(self.library)
                    else "no question had a document above darc.min_score" if not asked
                    else "no teacher majority reached darc.vote_threshold (or darc.answer_extractor read no answer)")
        ctx.acted(scored, of=rows, hint=hint)
        return rewards

    # -- checkpoints -------------------------------------------------------------------------------------------------

    @stackrl.hookimpl
    def state_dict(self):
        return {"library": self.library.state_dict(), "scanned": self.scanned}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.library.load_state_dict(state["library"])
        self.scanned = int(state["scanned"])
