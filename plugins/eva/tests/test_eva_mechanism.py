"""eva's creator on the built-in posing model (stackrl/arith-skills), the policy writing the variants: at every round
the prompts it evolves are exactly those of highest regret computed here by hand from their groups (the best reward
minus the mean, graded on this task), and every prompt it adds was written in reply to a request that showed its
own parent. Choosing the lowest regrets, rating a prompt by one response, or evolving another row than the parent
fails it (plugins/eva/README.md)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = load_script(Path(__file__).parents[1] / "benchmarks" / "mechanism.py")


def test_the_creator_evolves_the_prompts_of_highest_regret_into_variants_of_them():
    figures, rounds = BENCHMARK.run(seed=0, steps=8, overrides=["eva.select=top", "eva.regret=maxmean"])
    assert figures["rounds"] == 4, figures
    # Enough choice to tell: rounds with more informative prompts than parents, and variants kept.
    assert sum(len(r["expected"]) for r in rounds.rounds) >= 6, rounds.rounds
    assert figures["variants"] >= 6, figures
    assert figures["parents_match"] == 1.0, [(r["step"], r["expected"], r["chosen"]) for r in rounds.rounds]
    # Each parent is shown in `variants` requests, nothing else is, and each variant answers one showing its parent.
    for r in rounds.rounds:
        parents = sorted(r["texts"].get(p) or rounds.trainer.pool.row(p)["question"].strip() for p in r["chosen"])
        assert r["requests"] == sorted(p for p in parents for _ in range(4)), r["step"]
    assert figures["from_parent"] == 1.0, figures
