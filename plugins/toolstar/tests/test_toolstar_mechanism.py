"""Tool-Star's hierarchical reward on one real step of the built-in tool model (benchmarks/mechanism.py, short): on
the task lookup with both tools, every row's `toolstar` reward, the only weighted component, is the hierarchy written
out by hand from the row's completion, reference answer and runner columns; the step holds malformed, wrong and right
rows. The policy searches on lookup but does not yet calculate there, so the multi-tool bonus is checked on real rows
of the step with a calc turn added to their `env_info`: a successful one earns a right row the bonus, a raised one
does not, and a wrong row never gets it."""

from pathlib import Path

import pytest

from stackrl import RewardContext, Rollout
from stackrl.blocks.env import END_COLUMN, INFO_COLUMN
from stackrl.rewards import exact_match, extract_answer
from stackrl.testing.repository import load_script
from stackrl.testing.scripted import ScriptedPolicy

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def by_hand(completion, answer, infos, end, c):
    """Tool-Star's levels (re_search.py's compute_score) from the definitions."""
    if end != "done" or extract_answer(completion) is None or any(
            key in info for info in infos for key in ("unknown_tool", "unparsed", "error")):
        return c.malformed
    if not exact_match(completion, str(answer)):
        return c.wrong
    ran = {info["tool"] for info in infos if "tool" in info and "tool_error" not in info}
    return c.right + (c.bonus if len(ran) >= c.min_tools else 0.0)


def test_every_row_of_a_real_step_gets_the_hierarchy_and_only_a_right_multi_tool_row_the_bonus():
    _, trainer = load_script(BENCHMARK).run("toolstar", seed=0, steps=1)
    rollout, plugin = trainer._rollouts["train"], trainer.plugins.plugins["toolstar"]
    c, columns = plugin.config, rollout.columns
    rows = list(zip(rollout.completions, columns["answer"], columns[INFO_COLUMN], columns[END_COLUMN]))
    want = [by_hand(*row, c) for row in rows]
    got = [float(r) for r in rollout.rewards["toolstar"]]
    assert got == pytest.approx(want)
    # the step holds each level: malformed episodes, wrong and right answers
    assert {c.malformed, c.wrong, c.right} <= set(want), want

    # real rows of the step, a calc turn added before the answer turn
    right = next(i for i, (v, row) in enumerate(zip(want, rows)) if v == c.right and {"tool": "search"} in row[2])
    wrong = next(i for i, (v, row) in enumerate(zip(want, rows)) if v == c.wrong and {"tool": "search"} in row[2])
    calc, raised = {"tool": "calc"}, {"tool": "calc", "tool_error": "raised ValueError: only integers"}
    edited = [(right, calc), (wrong, calc), (right, raised)]
    batch = Rollout(prompts=[rollout.prompts[i] for i, _ in edited],
                    completions=[rollout.completions[i] for i, _ in edited],
                    prompt_ids=[[1]] * 3, completion_ids=[[2]] * 3, group_size=3, rewards={},
                    columns={"answer": [columns["answer"][i] for i, _ in edited],
                             INFO_COLUMN: [columns[INFO_COLUMN][i][:-1] + [turn, columns[INFO_COLUMN][i][-1]]
                                           for i, turn in edited],
                             END_COLUMN: [columns[END_COLUMN][i] for i, _ in edited]})
    ctx = RewardContext(step=1, tokenizer=None, policy=ScriptedPolicy({}), _log=lambda *a: None, _plugin="toolstar",
                        _acted=lambda *a, **k: None, rollout=batch)
    assert plugin.reward(ctx) == pytest.approx([c.right + c.bonus, c.wrong, c.right])
