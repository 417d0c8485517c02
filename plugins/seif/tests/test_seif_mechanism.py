"""SEIF's mechanism on the built-in posing model (stackrl/arith-skills), six real steps in three turns (Instructor,
then Follower): the Instructor stages draw only the topic row and the Follower stages only instructions that passed
the Filter, so the rows that carry loss are the training role's; each Instructor row's reward is the share of the
evaluator's answers to its instruction that fail the instruction's own answer (worked out here with the task's
parser, not the plugin's), and a filtered instruction earns 0 and is never answered; everything that reached the
Follower is a problem of the task. A flipped reward, a schedule that never hands over to the Follower, a Filter that
lets malformed instructions through, fail it (plugins/seif/README.md)."""

from pathlib import Path

import pytest

from stackrl.tasks.arithmetic import read_problem
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = load_script(Path(__file__).parents[1] / "benchmarks" / "mechanism.py")


def test_the_roles_train_in_turn_and_the_instructor_earns_the_followers_failure_on_filtered_instructions():
    figures, stages = BENCHMARK.run(seed=0, steps=6, overrides=[
        "seif.instructor_steps=1", "seif.follower_steps=1", "seif.first_follower_steps=1", "trainer.disable_tqdm=true"])
    calls = stages.calls
    assert [c["step"] for c in calls] == list(range(6))
    # The alternation: Instructor stages (even steps) draw the topic alone; Follower stages the posed instructions.
    for c in calls:
        training, resting = ((c["instructor_rows"], c["follower_rows"]) if c["step"] % 2 == 0
                             else (c["follower_rows"], c["instructor_rows"]))
        assert training, c["step"]
        assert not set(training) & c["excluded"] and set(resting) <= c["excluded"], c["step"]
    assert figures["rows_in_role"] == 1.0
    # The Instructor's reward: 1 - the share of the evaluator's answers equal to the instruction's answer.
    rated = stages.instructions()
    passed = [r for r in rated if r["rejected"] is None]
    filtered = [r for r in rated if r["rejected"] is not None]
    assert len(passed) >= 10 and len(filtered) >= 3, (len(passed), len(filtered))
    assert figures["passed_parse"] == 1.0  # the Filter passed only problems of the task
    for r in passed:
        right = [a == str(read_problem(r["question"])["answer"]) for a in r["answers"]]
        assert len(right) == 4 and r["reward"] == pytest.approx(1 - sum(right) / 4), r
    # Not a constant half: the flipped reward (the adherence) differs from it somewhere.
    assert any(abs(r["reward"] - 0.5) > 0.2 for r in passed)
    assert len({r["reward"] for r in passed}) >= 3
    # The Filter: a refused instruction earns 0 and is never answered; whatever reached the Follower parses.
    assert all(r["reward"] == 0.0 and r["answers"] == [] for r in filtered)
    assert any(read_problem(r["question"] or "") is None for r in filtered)  # the model writes malformed ones
    assert figures["passed_parse"] == 1.0
    follower_questions = [c["questions"][i] for c in calls for i in c["follower_rows"]]
    assert follower_questions and all(read_problem(q) is not None for q in follower_questions)
