"""SAAS on the built-in tool model through the real trainer: one outcome-only step, then one step whose penalties
equal the hand rule (boundary from the tool-free answers the plugin drew), and a repeated call on that real rollout."""

import copy
from pathlib import Path
from types import SimpleNamespace

import pytest

from stackrl.testing.benchmark import one_thread
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_the_penalties_are_the_boundary_rule_on_a_real_step_and_stage_one_is_outcome_only():
    figures, monitor = load_script(BENCHMARK).run(seed=0, steps=2, overrides=["saas.stage_two_step=1"])
    assert monitor.mismatches == 0, monitor.notes
    assert figures["stage_one_steps"] == 1 and figures["stage_two_steps"] == 1, figures
    # Both sides of the boundary occurred: calls of a right episode inside it were penalised, and necessary calls
    # outside it (no more than the fewest of a right episode) were not.
    assert figures["no_search_penalised"] >= 1 and figures["necessary_calls_spared"] >= 1, figures

    # The real rollout again, one episode's first call made twice: it pays the repetition, by the same hand rule.
    ctx, result, calls = monitor.last
    row = next(i for i, m in enumerate(ctx.rollout.columns["env_moves"]) if any(not isinstance(a, str) for _, a in m))
    rollout = copy.copy(ctx.rollout)
    moves = [list(m) for m in rollout.columns["env_moves"]]
    moves[row] = moves[row] + [next(m for m in moves[row] if not isinstance(m[1], str))]
    rollout.columns = {**rollout.columns, "env_moves": moves}
    texts = calls[0][1]
    replay = SimpleNamespace(rollout=rollout, step=ctx.step, training=True, log=lambda *a: None,
                             acted=lambda *a, **k: None,
                             generate=lambda prompts, **k: [SimpleNamespace(text=t) for t in texts])
    with one_thread():
        again = monitor.plugin.reward(replay)
    monitor.check(replay, again, calls)
    assert monitor.mismatches == 0, monitor.notes
    assert again[row] <= result[row] - monitor.config.repeat_penalty + 1e-9
    assert [a for i, a in enumerate(again) if i != row] == [r for i, r in enumerate(result) if i != row]
