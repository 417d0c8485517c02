"""Every setting of the TRACE plugin, with the paper's values as defaults."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from stackrl import ConfigError
from stackrl.blocks.teacher import check_teacher_settings

SOURCES = ("annotator", "column", "rule")
ROUTES = ("key_fkl", "error_rkl", "both")
TEACHERS = ("snapshot", "policy", "reference")

# The teacher's privileged text. "label" (the paper): the annotator's coarse diagnostic type of the spans, never
# their text or position, which only choose where the divergence applies. "solution": the reference solution too.
TEACHER_TEMPLATES = {
    "label": "{prompt}\n\nWhat to watch in the attempt below: {label}\n",
    "solution": (
        "{prompt}\n\nFor reference, a worked solution to this problem:\n{solution}\n\n"
        "What to watch in the attempt below: {label}\n"
    ),
}

ANNOTATOR_TEMPLATE = (
    "{prompt}\n\nA reference solution:\n{solution}\n\n"
    "An attempt at the problem, split into numbered segments:\n{segments}\n\n{request}\n"
    "Reply with exactly two lines:\nSPANS: <segment numbers, most important first, e.g. 4, 7-8>\n"
    "TYPE: <a short name for the kind of step, a few words>\n"
)
KEY_REQUEST = (
    "This attempt reaches the correct answer. Name the few segments that decide it: the steps where a wrong "
    "choice was possible and the attempt made the right one."
)
ERROR_REQUEST = (
    "This attempt reaches a wrong answer. Name the few segments where it goes wrong, the first error first."
)


@dataclass
class TraceConfig:
    # Where the critical spans come from. "annotator": the policy itself reads the numbered segments of each
    # response (ctx.generate, greedy) and names them (the paper's online self-annotation); "column": a dataset
    # column holds each row's annotation, as an annotator answer ("SPANS: 3, 5-6\nTYPE: ...") or a list of
    # segment numbers; "rule": every segment the regex `span_pattern` matches.
    spans: str = "annotator"
    # What the spans are used for. "key_fkl": forward KL(teacher || student) on key spans of correct rollouts
    # (the paper's Qwen3-8B route); "error_rkl": reverse KL(student || teacher) on error spans of incorrect
    # rollouts (its Qwen3-1.7B route); "both".
    route: str = "key_fkl"
    # At most this share of a response's tokens is span, spans taken in the order given (the annotator's
    # priority order, the order of appearance for a rule); the span reaching the cap keeps its first tokens.
    max_coverage: float = 0.25
    # What the teacher sees besides the prompt: "label", the annotator's coarse diagnostic type of the spans (the
    # paper's teacher); "solution", the dataset's reference solution (column `solution`) and the label.
    teacher_context: str = "label"
    # A teacher prompt of your own instead ({prompt}, the dataset columns, {label}); null: that of teacher_context.
    teacher_template: Optional[str] = None
    # The teacher's weights. "snapshot": a copy of the policy synced every `sync_every` steps (the paper);
    # "policy": the live policy; "reference": the frozen reference, or the base with the LoRA adapter disabled.
    teacher: str = "snapshot"
    sync_every: int = 10
    # Schedule: the KL weight lambda is w0 for `warmup_steps` steps, then falls linearly to 0 over
    # `decay_steps`; span tokens' GRPO loss is scaled by (1 - lambda / w0). At lambda = 0 it is plain GRPO:
    # no annotation, no teacher forward, no teacher sync.
    w0: float = 0.5
    warmup_steps: int = 10
    decay_steps: int = 30
    # Pointwise clip of each vocabulary entry's KL term (null: no clip).
    kl_clip: Optional[float] = 0.05
    temperature: float = 1.0  # both distributions are softmax(logits / temperature)
    # Which rollouts are correct: reward component `correct_reward` at least `correct_threshold`.
    correct_reward: str = "exact_match"
    correct_threshold: float = 1.0
    # spans: annotator. The prompt ({prompt}, the dataset columns, {segments}: the numbered response,
    # {request}: key_request for a correct rollout, error_request for an incorrect one), and its answer's length.
    annotator_template: str = ANNOTATOR_TEMPLATE
    key_request: str = KEY_REQUEST
    error_request: str = ERROR_REQUEST
    annotator_max_new_tokens: int = 256
    # spans: column. The dataset column holding each row's annotation.
    spans_column: str = "spans"
    # spans: rule. A regular expression searched in each segment's text.
    span_pattern: str = ""


def teacher_template(config: TraceConfig) -> str:
    """The teacher's prompt template: the one given, or the built-in one of ``teacher_context``."""
    return config.teacher_template or TEACHER_TEMPLATES[config.teacher_context]


def check(config: TraceConfig) -> None:
    """Refuse settings no run could use, naming the key (the host has already checked the types)."""

    def refuse(key: str, message: str):
        raise ConfigError(f"trace.{key}: {message}")

    check_teacher_settings("trace", config, TEACHERS)
    for key, choices in (
        ("spans", SOURCES), ("route", ROUTES), ("teacher_context", tuple(TEACHER_TEMPLATES))
    ):
        if getattr(config, key) not in choices:
            refuse(key, f"must be one of {', '.join(choices)}, not '{getattr(config, key)}'")
    if not 0.0 < config.max_coverage <= 1.0:
        refuse("max_coverage", f"must lie in (0, 1], not {config.max_coverage}")
    if config.w0 <= 0:
        refuse("w0", f"must be positive, not {config.w0}")
    for key in ("warmup_steps", "decay_steps"):
        if getattr(config, key) < 0:
            refuse(key, f"must be at least 0, not {getattr(config, key)}")
    for key in ("sync_every", "annotator_max_new_tokens"):
        if getattr(config, key) < 1:
            refuse(key, f"must be at least 1, not {getattr(config, key)}")
    if config.kl_clip is not None and config.kl_clip <= 0:
        refuse("kl_clip", f"must be positive (or null for no clip), not {config.kl_clip}")
    if config.spans == "rule":
        if not config.span_pattern:
            refuse("span_pattern", "spans: rule needs a regular expression")
        try:
            re.compile(config.span_pattern)
        except re.error as error:
            refuse("span_pattern", f"not a regular expression ({error}): {config.span_pattern!r}")
