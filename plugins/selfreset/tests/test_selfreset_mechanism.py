"""Self-ReSET's mechanism on real rollouts of the built-in model, short: three steps of the CPU recipe on 16
problems. The test checks every decision against its own reading of the rollouts, not the plugin's code: the
guard's reward of every completion (a reset row's continuation included) is 1 exactly when no line of it is wrong
arithmetic; the reset rows each step adds are exactly the flagged completions of the fresh groups whose verdicts
spread, each cut after its first wrong line, in order; a reset row is drawn once and never reset again. The recovery
figures against plain GRPO come from benchmarks/mechanism.py."""

import json
import re
from pathlib import Path

import pytest

from stackrl.testing.fixtures import DrawnGroups
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
STEP = re.compile(r"^(-?\d+) ([-+*]) (-?\d+) = (-?\d+)$")


def wrong(line: str) -> bool:
    """A line "a op b = c" whose c is not a op b (read apart from the plugin's guard)."""
    found = STEP.match(line.strip())
    if not found:
        return False
    a, op, b, c = int(found[1]), found[2], int(found[3]), int(found[4])
    return {"+": a + b, "-": a - b, "*": a * b}[op] != c


def hand_cut(prompt: str, completion: str) -> str | None:
    """The prompt and the completion's lines up to its first wrong one; None if no line before the last is wrong."""
    lines = completion.split("\n")
    for k, line in enumerate(lines[:-1]):
        if wrong(line):
            return prompt + "\n".join(lines[: k + 1]) + "\n"
    return None


def test_flagged_prefixes_become_prompts_and_continuations_are_rewarded_by_the_guard(tmp_path):
    mechanism = load_script(BENCHMARK)
    drawn = DrawnGroups("selfreset")
    short = ["trainer.disable_tqdm=true", "data.size=16", "selfreset.max_resets=1000"]
    out = mechanism.run("selfreset", seed=0, steps=3, folder=tmp_path, overrides=short, monitor=drawn)
    added = [json.loads(line) for line in (out["folder"] / "pool_added.jsonl").read_text().splitlines()]
    resets = {row["id"] for row in added}
    assert all(row["plugin"] == "selfreset" for row in added)

    # the guard's reward: 1 for a completion without a wrong line, 0 with one, on fresh and reset rows alike
    for group in drawn.groups:
        assert group.rewards == [0.0 if any(map(wrong, c.split("\n"))) else 1.0 for c in group.completions], group
    reset_groups = [g for g in drawn.groups if g.row in resets]
    assert reset_groups, "no reset row was drawn in three steps"
    assert any(0.0 in g.rewards for g in reset_groups) and any(1.0 in g.rewards for g in reset_groups)
    # a reset row is the prompt it was added with, drawn once
    prompts = {row["id"]: row["row"]["prompt"] for row in added}
    assert all(g.prompt == prompts[g.row] for g in reset_groups)
    assert len({g.row for g in reset_groups}) == len(reset_groups)

    # the rows each step adds: the hand-cut prefixes of exactly the flagged rows of its fresh, spread groups
    for step in sorted({g.step for g in drawn.groups}):
        expected = []
        for group in (g for g in drawn.groups if g.step == step and g.row not in resets):
            flags = [reward == 0.0 for reward in group.rewards]
            if all(flags) or not any(flags):
                continue
            expected += [cut for c in group.completions if (cut := hand_cut(group.prompt, c)) is not None]
        assert [row["row"]["prompt"] for row in added if row["step"] == step] == expected, step
    assert len(added) >= 3, added
