"""MR-Search's episodes: several attempts at one question in one context, a reflection between them.

:class:`Attempts` is a text game (``env.environment: stackrl_mrsearch:Attempts``, ``env.actions: text``) that wraps
a TRL-style tool environment (``inner``, default the built-in ``search``). Each turn of the policy is read with the
tool grammar (``grammar``, default ``tag``: ``<search>kavo</search>``): a tool call runs the inner environment's tool
and shows its result, as the runner would; a turn without one is the attempt's answer, scored by exact match with
the row's ``answer_column`` (default ``answer``; a list: any of them), the attempt's reward, given on that turn.
After every answer but the last the next attempt starts in the same context, after a reflection and the question
asked again:

- ``reflection: rule`` (the CPU recipe's: a tiny model cannot write one): the environment writes it, a line per
  search of the attempt, what it searched and whether it found anything (:func:`rule_reflection`);
- ``reflection: policy`` (the paper's): the environment shows a request to reflect on the answer and answer again
  (:data:`REFLECT`, our wording of the authors' retry prompt), and the policy writes its reflection in the next
  attempt's first turn.

The answer's correctness is never shown, as in the authors' code. An attempt that made ``attempt_turns`` tool
calls without answering is closed unanswered (reward 0) at its next call. Each action's ``info`` holds its
``attempt`` (0, 1, ...), which :mod:`stackrl_mrsearch.credit` reads.
"""

from __future__ import annotations

from stackrl.blocks.env.actions import check_grammar, parse_action
from stackrl.blocks.env.protocol import Episode, EnvironmentFailure, ToolCall, construct, is_game, load_object
from stackrl.errors import ConfigError
from stackrl.rewards import exact_match

RULE, POLICY = "rule", "policy"
REFLECT = ("Reflect on your answer above: check each step, search again for what is missing or was not found, "
           "then give an improved final answer.")
NOT_FOUND = ("no results", "error:", "unknown tool")


def rule_reflection(calls: list[tuple[str, str]]) -> str:
    """The rule-written reflection on an attempt: its tool calls as ``(query, result)``, a line each saying what was
    searched and whether it found anything; an attempt with no call says so."""
    if not calls:
        return "reflection: no search. try again."
    lines = [f"reflection: {query} {'not found' if result.startswith(NOT_FOUND) else 'found'}."
             for query, result in calls]
    return "\n".join(lines + ["try again."])


class Attempts:
    """``attempts`` attempts at the row's question with the ``inner`` environment's tools, a reflection between."""

    def __init__(self, inner: str = "search", inner_kwargs: dict | None = None, attempts: int = 3,
                 attempt_turns: int = 3, reflection: str = RULE, grammar: str = "tag", answer_column: str = "answer"):
        if not isinstance(attempts, int) or attempts < 1:
            raise ConfigError(f"env.kwargs.attempts: must be a positive integer, not {attempts!r}")
        if not isinstance(attempt_turns, int) or attempt_turns < 0:
            raise ConfigError(f"env.kwargs.attempt_turns: must be a non-negative integer, not {attempt_turns!r}")
        if reflection not in (RULE, POLICY):
            raise ConfigError(f"env.kwargs.reflection: must be one of {RULE}, {POLICY}, not '{reflection}'")
        check_grammar(grammar, key="env.kwargs.grammar")
        inner_class = load_object(inner, key="env.kwargs.inner")
        if is_game(inner_class):
            raise ConfigError(f"env.kwargs.inner: '{inner}' is a text game; attempts wrap a tool environment "
                              "(TRL's convention)")
        self.inner_class, self.inner_kwargs = inner_class, dict(inner_kwargs or {})
        self.attempts, self.attempt_turns = attempts, attempt_turns
        self.reflection, self.grammar, self.answer_column = reflection, grammar, answer_column
        self.inner: Episode = construct(inner_class, self.inner_kwargs, 1, 0)

    def reset(self, seed: int = 0, **row) -> str | None:
        answer = row.get(self.answer_column, "")
        self.references = [str(a) for a in answer] if isinstance(answer, (list, tuple)) else [str(answer)]
        self.attempt, self.calls = 0, []
        question = row.get("question", row.get("prompt", ""))
        self.question = question if isinstance(question, str) else str(question[-1].get("content", ""))
        self.inner = construct(self.inner_class, self.inner_kwargs, 1, seed)
        return self.inner.reset(row)

    def _tool(self, call: ToolCall) -> str:
        try:
            return self.inner.call(call).observation
        except EnvironmentFailure as failure:  # shown as the runner shows a tool's failure
            return f"error: {failure.problem}"

    def _close(self, reward: float, info: dict):
        """End the attempt: the next one's reflection, or the episode's end after the last."""
        self.attempt += 1
        if self.attempt == self.attempts:
            return None, reward, True, info
        shown = (rule_reflection(self.calls) if self.reflection == RULE else REFLECT) + "\n" + self.question.strip()
        self.calls = []
        return shown, reward, False, info | {"reflection": shown}

    def step(self, action: str):
        info = {"attempt": self.attempt}
        call = parse_action(self.grammar, action)
        if isinstance(call, ToolCall):
            if len(self.calls) >= self.attempt_turns:
                return self._close(0.0, info | {"unanswered": True})
            result = self._tool(call)
            self.calls.append((" ".join(map(str, [*call.args, *call.kwargs.values()])), result))
            return result, 0.0, False, info | {"tool": call.name}
        correct = max(exact_match(action, reference) for reference in self.references)
        return self._close(correct, info | {"answer": True, "correct": bool(correct)})
