"""The built-in task answered by a program: after a marker, the question, the reply a short Python program that
works the chain out one operation per line and prints the answer (``stackrl/arith-code`` was taught it)::

    code prompt:   "What is (3 + 4) * 2?\\nProgram:\\n"
    program:       "a = 3 + 4\\nb = a * 2\\nprint(b)"

An execution reward runs the program and compares what it prints with the question's answer
(:func:`prints_answer`). Here a program runs in a plain subprocess of this Python, isolated mode, in a fresh
temporary folder, with a timeout: enough to measure the built-in model on the task's own questions, not a sandbox.
Rewards of a training run execute the policy's programs through the sandbox block (issue 43), which isolates them.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

__all__ = ["CODE_MARKER", "CODE_TEMPLATE", "VARIABLES", "ProgramRun", "code_prompt", "prints_answer", "program_of", "run_program",
           "write_program"]

CODE_MARKER = "Program:"
CODE_TEMPLATE = "{prompt}" + CODE_MARKER + "\n"
VARIABLES = "abcdefgh"  # the names of the program's results, in order


def code_prompt(prompt: str) -> str:
    """The prompt asking for a program that answers the dataset prompt ``prompt`` (:data:`CODE_TEMPLATE`)."""
    return CODE_TEMPLATE.format(prompt=prompt)


FENCE = re.compile(r"```[\w+-]*\r?\n?(.*?)```", re.DOTALL)  # a fenced code block, its language tag left out


def program_of(completion: str) -> str:
    """The program a completion holds: its last fenced code block (how a chat model's reply is read), else the
    whole completion (the built-in code model writes a bare program)."""
    blocks = FENCE.findall(completion)
    return blocks[-1].strip() if blocks else completion


def write_program(question: str) -> str:
    """The program answering ``question``: one line ``name = LEFT op OPERAND`` per operation, LEFT the question's
    first number on the first line and the previous line's name after it, then ``print`` of the last name."""
    from stackrl.tasks.decomposition import _operations

    value, operations = _operations(question)
    lines, left = [], str(value)
    for name, (op, operand) in zip(VARIABLES, operations):
        lines.append(f"{name} = {left} {op} {operand}")
        left = name
    return "\n".join(lines + [f"print({left})"])


@dataclass(frozen=True)
class ProgramRun:
    """What running a program gave: its output (stdout, stderr), its exit status (``None`` when it was stopped at
    its timeout) and whether it was."""

    stdout: str
    stderr: str
    returncode: int | None
    timed_out: bool


def run_program(program: str, timeout_s: float = 5.0) -> ProgramRun:
    """Run ``program`` with this Python (``-I -S``: no user site, environment or current folder on the path) in a
    fresh temporary folder, stopped after ``timeout_s`` seconds. Not isolated: for the built-in model's own
    programs only (the module docstring says why)."""
    with tempfile.TemporaryDirectory(prefix="stackrl-program-") as folder:
        try:
            done = subprocess.run([sys.executable, "-I", "-S", "-c", program], cwd=folder, capture_output=True,
                                  text=True, timeout=timeout_s, env={"PATH": "/usr/bin:/bin"})
        except subprocess.TimeoutExpired as stopped:
            output = lambda text: (text or b"").decode(errors="replace") if isinstance(text, bytes) else text or ""  # noqa: E731
            return ProgramRun(output(stopped.stdout), output(stopped.stderr), None, True)
    return ProgramRun(done.stdout, done.stderr, done.returncode, False)


def prints_answer(run: ProgramRun, answer: str) -> bool:
    """Whether a program ran to a clean exit and printed exactly ``answer`` (a trailing newline aside): what an
    execution reward on the task counts as right. An exit status of 0 alone is not a pass."""
    return run.returncode == 0 and run.stdout.strip() == answer.strip()
