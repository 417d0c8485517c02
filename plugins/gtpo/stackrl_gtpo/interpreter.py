"""The built-in arithmetic task as multi-turn tool-integrated reasoning: every turn the policy writes is a Python
cell, run in a sandboxed interpreter kept across the episode's turns (:class:`stackrl.blocks.sandbox.Session`); the
value the cell shows (its last printed line, or its final expression's value) is the turn's answer. A right answer
ends the episode with reward 1; otherwise the policy sees the output (or the error) and writes the next cell.

The questions are valid Python (``23 + 7 * 4``), and a bare number is a cell that shows itself, so the built-in
model's plain answers run unchanged. A text game in the runner's convention (``step`` returns the observation,
reward, done, info); ``env.actions: text`` (the whole turn is the cell) or a regex such as
``"<python>(.*?)</python>"`` for a model that writes tags.
"""

from __future__ import annotations

from stackrl.blocks.sandbox import Sandbox, Session


def shown_value(stdout: str) -> str:
    """The value a cell showed: its last non-empty line of output, stripped."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    return lines[-1] if lines else ""


class PythonAnswer:
    """One episode: a question, an interpreter, turns until a cell shows the answer (reward 1, done)."""

    def __init__(self, timeout_s: float = 5.0, output_chars: int = 80):
        self.timeout_s, self.output_chars = timeout_s, output_chars
        self.session: Session | None = None

    def reset(self, answer="", **row) -> str:
        self.close()
        self.answer = str(answer).strip()
        self.session = Session(Sandbox.of(None), timeout_s=self.timeout_s)
        self.cells = 0
        return ""

    def step(self, action: str):
        self.cells += 1
        result = self.session.execute(action)
        value = shown_value(result.stdout)
        info = {"cell": self.cells, "error": result.error, "stopped": result.stopped, "shown": value}
        if result.error is None and result.stopped == "exited" and value == self.answer:
            self.close()
            return None, 1.0, True, info
        if result.stopped != "exited":
            shown = f"Error: the interpreter stopped ({result.stopped})"
        elif result.error is not None:
            shown = f"Error: {result.error}"
        else:
            shown = f"Out: {value[: self.output_chars]}"
        return shown, 0.0, False, info

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
