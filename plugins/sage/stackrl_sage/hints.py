"""Hints: reading the policy's JSON answer, cutting hints from a reference solution, and the per-prompt cache."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from stackrl import ConfigError

from stackrl_sage.config import SageConfig

LEVELS = 3
LEVEL_KEYS = tuple(f"level_{k}" for k in range(1, LEVELS + 1))

# The inside of the first ``` fence (any language tag); an answer cut off inside the fence runs to its end.
_FENCE = re.compile(r"```[\w-]*[^\S\n]*\n?(.*?)(?:```|\Z)", re.DOTALL)
# One "level_k": "..." field with a complete double-quoted value, for answers that are not valid JSON as a whole.
_FIELD = re.compile(r"""["']?(level_[1-9])["']?\s*:\s*"((?:[^"\\]|\\.)*)\"""", re.DOTALL)
# A backslash that starts a JSON escape; \b \f \r \t count as one only when no letter follows (\frac, \times
# and \beta are LaTeX, which models write into JSON strings with a single backslash).
_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|["\\/n]|[bfrt](?![A-Za-z]))?')


def parse_hints(text: str) -> list[str | None] | None:
    """The hints of levels 1..3 in a policy's answer (``None`` for a level it lacks), or ``None`` when it holds none.

    Reads the first JSON object, inside a code fence if there is one; stray text around it is ignored. When the
    object is not valid JSON (a trailing comma, a missing closing brace), every field whose string value is
    complete is still recovered; a value cut off mid-string counts as missing. LaTeX commands keep their backslash.
    An answer with some levels only is kept, as the authors keep a partial answer: the missing levels are skipped.
    """
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    start = body.find("{")
    if start < 0:
        return None
    body = _ESCAPE.sub(lambda m: m.group(0) if m.group(1) else "\\\\", body[start:])
    fields = _json_object(body)
    if fields is None:
        fields = {key: json.loads(f'"{raw}"', strict=False) for key, raw in _FIELD.findall(body)}
    values = [fields.get(key) for key in LEVEL_KEYS]
    hints = [v.strip() if isinstance(v, str) and v.strip() else None for v in values]
    return hints if any(hints) else None


def _json_object(text: str) -> dict | None:
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def solution_hints(solution: str) -> list[str] | None:
    """Hints cut from a reference solution written one step a line, its last line stating the answer.

    Level ``k`` reveals the first ``ceil(k * S / 4)`` of its ``S`` steps, never the answer line nor the last
    step (whose result is the answer). ``None`` when the solution has fewer than two steps to reveal from.
    """
    steps = [line for line in solution.splitlines() if line.strip()][:-1]
    if len(steps) < 2:
        return None
    shown = [min(math.ceil(k * len(steps) / (LEVELS + 1)), len(steps) - 1) for k in range(1, LEVELS + 1)]
    return ["\n".join(steps[:n]) for n in shown]


# -- prompts ---------------------------------------------------------------------------------------------------------


def prompt_key(prompt) -> str:
    """A string that identifies a prompt (text, or chat messages) in the cache and the tracker."""
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True)


def prompt_text(prompt) -> str:
    """The text a hint goes with: the prompt itself, or the content of its last user message."""
    if isinstance(prompt, str):
        return prompt
    return prompt[_last_user(prompt)]["content"]


def with_text(prompt, text: str):
    """``prompt`` with :func:`prompt_text` replaced by ``text`` (other messages unchanged)."""
    if isinstance(prompt, str):
        return text
    i = _last_user(prompt)
    return [*prompt[:i], {**prompt[i], "content": text}, *prompt[i + 1 :]]


def _last_user(messages: list) -> int:
    users = [i for i, m in enumerate(messages) if m.get("role") == "user" and isinstance(m.get("content"), str)]
    if not users:
        raise ValueError("a chat prompt needs a user message with text content to attach a hint to")
    return users[-1]


def fill(template: str, key: str, fields: dict) -> str:
    """``template`` formatted with ``fields``; an unknown field is a config error naming ``sage.<key>``."""
    try:
        return template.format_map(fields)
    except KeyError as exc:
        raise ConfigError(
            f"sage.{key} names the field {exc}, which this batch lacks; fields: {', '.join(sorted(fields))}"
        ) from None


# -- the cache -------------------------------------------------------------------------------------------------------


@dataclass
class Problem:
    """A prompt that needs hints: its cache key, its text, its reference solution and its other dataset columns."""

    key: str
    text: str
    solution: str
    columns: dict


class HintBank:
    """Hints of all levels per prompt: written when first needed, rewritten once older than
    ``hint_refresh_steps``; when rewriting fails, the last good hints stay in use."""

    def __init__(self, config: SageConfig):
        self.config = config
        # prompt key -> {"hints": [level 1, 2, 3] (None where the answer lacked that level), "step": step written}
        self.entries: dict[str, dict] = {}

    def lookup(self, problems: list[Problem], ctx) -> list[list[str | None]]:
        """The hints of levels 1..3 of each problem (``None`` for a level it has no hint for), writing stale
        ones in one batch."""
        stale = {p.key: p for p in problems if not self._fresh(p.key, ctx.step)}
        if stale:
            written = self._write(list(stale.values()), ctx)
            for key, hints in written.items():
                self.entries[key] = {"hints": hints, "step": ctx.step}
            ctx.log("hint_failures", len(stale) - len(written))
        return [self.entries[p.key]["hints"] if p.key in self.entries else [None] * LEVELS for p in problems]

    def _fresh(self, key: str, step: int) -> bool:
        entry = self.entries.get(key)
        refresh = self.config.hint_refresh_steps
        return entry is not None and (refresh == 0 or step - entry["step"] < refresh)

    def _write(self, problems: list[Problem], ctx) -> dict[str, list[str | None]]:
        if self.config.hint_source == "solution":
            cut = {p.key: solution_hints(p.solution) for p in problems}
            return {key: hints for key, hints in cut.items() if hints is not None}
        return self._ask_policy(problems, ctx)

    def _ask_policy(self, problems: list[Problem], ctx) -> dict[str, list[str | None]]:
        config = self.config
        requests = {p.key: self._request(p) for p in problems}
        budget = {} if config.hint_max_new_tokens is None else {"max_new_tokens": config.hint_max_new_tokens}
        written = {}
        for attempt in range(config.hint_attempts):
            pending = [key for key in requests if key not in written]
            if not pending:
                break
            temperature = config.hint_temperature if attempt == 0 else config.retry_temperature
            sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
            answers = ctx.generate([requests[k] for k in pending], **sampling, **budget)
            for key, answer in zip(pending, answers):
                hints = parse_hints(answer.text)
                if hints is not None:
                    written[key] = hints
        return written

    def _request(self, problem: Problem) -> list[dict]:
        fields = {**problem.columns, "prompt": problem.text, "solution": problem.solution}
        return [
            {"role": "system", "content": self.config.hint_system_prompt},
            {"role": "user", "content": fill(self.config.hint_request_template, "hint_request_template", fields)},
        ]
