"""ExIt's mechanism on the built-in retrying model, short: 5 steps of the CPU recipe on stackrl/arith-skills. The
held-out self-correction against plain GRPO comes from benchmarks/mechanism.py."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_the_most_learnable_groups_give_tasks_that_show_their_own_attempts_and_get_drawn(tmp_path):
    mechanism = load_script(BENCHMARK)
    figures = mechanism.run("exit", seed=0, steps=5, folder=tmp_path, overrides=["trainer.disable_tqdm=true"],
                            evaluate_after=False)
    print(figures)
    # Seed 0: 10 tasks added, all from the top, all showing their group's own attempt.
    # Two tasks a batch at most, each from a group of the highest reward variance among its batch's eligible groups.
    assert figures["added"] >= 6, figures
    assert figures["top"] == 1.0, figures
    # Each task is its group's prompt, one of that group's own attempts and the retry instruction.
    assert figures["shown"] == 1.0, figures
    # The pool draws them, and their groups are scored again; being chosen for their variance, their groups vary
    # more often than the dataset problems' (seed 0: 5 of 7 against 14 of 33).
    assert figures["tasks_drawn"] >= 4, figures
    assert figures["spread_tasks"] > figures["spread_problems"], figures
