"""EvoEnv's filter on the real sandbox with stackrl/arith-tiny as the solver: of a good environment, a
non-deterministic one, one that crashes after printing its instances and one too easy for the solver, exactly the
good one is kept (reward 1), each other is rejected at its own stage (reward 0), and the pool holds the good one's
instances with its answers, which are the task's true answers. The three bad ones are built so that each would pass
every other stage: dropping the determinism check, the clean-exit check or the band's upper bound keeps one of them
and fails this test (README, "What the tests show"). Then a step of the CPU recipe screens the model's own
proposals. The full figures come from benchmarks/mechanism.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrl.tasks.arithmetic import read_problem
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py")


def test_exactly_the_good_environment_is_kept_and_its_instances_join_the_pool():
    figures = BENCHMARK.screened(seed=0)
    assert figures["failed"] == {"good": None, "nondeterministic": "deterministic", "crashes": "runs",
                                 "too_easy": "band"}, figures["why"]
    assert figures["reward"] == {"good": 1.0, "nondeterministic": 0.0, "crashes": 0.0, "too_easy": 0.0}
    # the band: the solver is right on some of the good one's instances, on nearly all of the easy one's
    assert 0.1 <= figures["pass_rate"]["good"] <= 0.8, figures["pass_rate"]
    assert figures["pass_rate"]["too_easy"] > 0.8, figures["pass_rate"]
    # the pool: the good one's eight instances, as the run's prompts (the question and its newline), with its answers
    instances = figures["good_instances"]
    assert len(instances) == 8
    assert sorted(figures["pool"]) == sorted((q + "\n", a) for q, a in instances)
    for question, answer in instances:
        assert read_problem(question)["answer"] == answer  # the oracle is right


def test_a_short_run_screens_the_models_own_proposals():
    figures = BENCHMARK.run(seed=0, steps=1, screen=False, overrides=["trainer.per_device_train_batch_size=8"])
    assert figures["proposals"] == 8  # the first step draws the request row alone: no instance waits yet
    stages = ("failed_runs", "failed_deterministic", "failed_checkable", "failed_band")
    assert figures["kept"] + sum(figures[s] for s in stages) == pytest.approx(1.0)
