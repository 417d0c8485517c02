"""EvoEnv's acceptance filter: an environment program, run twice in the sandbox with the same seed, is kept only when
it runs, prints the same instances both times, its instances are checkable, and the solver's pass rate on them lies
in the band.

An environment is a Python program with a fixed contract: ``main.py SEED COUNT`` prints ``COUNT`` instances, one JSON
object a line, ``{"question": ..., "answer": ...}``, the answer being the program's own reference (its oracle). The
stages, in the order they are checked (the first that fails rejects the program):

- ``runs``: both runs ended by themselves with status 0 (no exception, no timeout, no limit hit);
- ``deterministic``: both runs printed the same text;
- ``checkable``: the first ``COUNT`` lines are instances, each a non-empty question and a one-line scalar answer,
  and, with ``check_known``, a question that reads as one of the built-in task's problems carries that problem's
  answer (an oracle checked where the task knows the truth);
- ``band``: the solver's share of right answers on the instances lies within ``[min_pass, max_pass]``: neither solved
  reliably (too easy: no solve-verify asymmetry left) nor never solved (too hard, or a wrong oracle).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

from stackrl.answers import equivalent
from stackrl.tasks.arithmetic import read_problem

STAGES = ("runs", "deterministic", "checkable", "band")

# The seed environment the built-in request shows (the paper starts from ten seeds): the built-in task's chains of
# two-digit operands, a question and its value computed by the program.
SEED_ENVIRONMENT = '''import json, random, sys
rng = random.Random(int(sys.argv[1]))
for _ in range(int(sys.argv[2])):
    value = rng.randint(10, 99)
    text = str(value)
    for step in range(rng.randint(2, 3)):
        operand = rng.randint(10, 99)
        op = rng.choice("+-") if value >= operand else "+"
        value = value + operand if op == "+" else value - operand
        text = f"{text} {op} {operand}" if step == 0 else f"({text}) {op} {operand}"
    print(json.dumps({"question": f"What is {text}?", "answer": str(value)}))
'''


def request_text(example: str = SEED_ENVIRONMENT) -> str:
    """The proposer's prompt: the contract, a seed environment, and the marker after which it writes a new one."""
    return ("Write a new environment: a Python program that reads a seed and a count (sys.argv[1], sys.argv[2]) and "
            "prints that many problems, one JSON object a line with the question and its answer, which the program "
            "computes. The same seed gives the same problems. Make problems that are easy to compute and hard to "
            "solve by hand.\nExample:\n```python\n" + example + "```\nEnvironment:\n")


@dataclass(frozen=True)
class Instance:
    question: str
    answer: str


@dataclass
class Screening:
    """One environment's screening: the stage it failed (``None``: accepted), its instances (read once it ran
    deterministically) and the solver's pass rate on them (``None`` before the band stage)."""

    failed: Optional[str] = None
    instances: list[Instance] = field(default_factory=list)
    pass_rate: Optional[float] = None
    why: str = ""

    @property
    def accepted(self) -> bool:
        return self.failed is None and self.pass_rate is not None

    @property
    def passed(self) -> int:
        """How many of the four stages it passed."""
        return len(STAGES) if self.accepted else STAGES.index(self.failed) if self.failed else len(STAGES) - 1


def read_instances(stdout: str, count: int, check_known: bool = True,
                   math_verify: bool = False) -> tuple[list[Instance], str]:
    """The first ``count`` instances ``stdout`` prints, or ``([], why)`` when they are not checkable."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if len(lines) < count:
        return [], f"{len(lines)} lines, {count} instances asked"
    instances = []
    for line in lines[:count]:
        try:
            item = json.loads(line)
        except ValueError:
            return [], f"not JSON: {line[:60]!r}"
        if not isinstance(item, dict):
            return [], f"not an object: {line[:60]!r}"
        question, answer = item.get("question"), item.get("answer")
        if not isinstance(question, str) or not question.strip():
            return [], "an instance without a question"
        if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
            return [], f"an answer that is not a scalar: {answer!r}"
        answer = str(answer).strip()
        if not answer or "\n" in answer:
            return [], f"an empty or multi-line answer: {answer!r}"
        if check_known:
            known = read_problem(question)
            if known is not None and not equivalent(answer, str(known["answer"]), math_verify):
                return [], f"a wrong reference: {question.strip()!r} is {known['answer']}, not {answer}"
        instances.append(Instance(question.strip(), answer))
    return instances, ""


def screen_runs(first, second, count: int, check_known: bool = True, math_verify: bool = False) -> Screening:
    """The first three stages, from the environment's two sandboxed runs with the same seed (``ExecResult``s)."""
    for run in (first, second):
        if not run.ok:
            last = (run.stderr or "").strip().splitlines()[-1:]
            return Screening("runs", why=f"stopped: {run.stopped}, exit {run.exit_code}: {''.join(last)}")
    if first.stdout != second.stdout:
        return Screening("deterministic", why="two runs with the same seed printed different instances")
    instances, why = read_instances(first.stdout, count, check_known, math_verify)
    if not instances:
        return Screening("checkable", why=why)
    return Screening(None, instances)


def pass_rate(right: list[bool]) -> float:
    """The solver's share of right answers over every sample of every instance."""
    return sum(right) / len(right) if right else 0.0


def in_band(rate: float, low: float, high: float) -> bool:
    """Solve-verify asymmetry measured: the solver is right on at least ``low`` and at most ``high`` of its tries."""
    return low <= rate <= high


def proposer_reward(screening: Screening, stage_credit: float = 0.0) -> float:
    """1 for an accepted environment; a rejected one ``stage_credit`` times the share of the stages it passed."""
    return 1.0 if screening.accepted else stage_credit * screening.passed / len(STAGES)
