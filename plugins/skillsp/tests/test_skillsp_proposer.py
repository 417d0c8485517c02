"""Skill-SP's proposer with the built-in posing model (stackrl/arith-skills; nothing scripted): the skills it poses
for follow the controller's weights, a request shows problems of its skill only, and the tasks that join the pool
are those the task's reader verifies as problems of that skill, with their computed answers, under that skill."""

import pytest

from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import read_problem
from stackrl.testing.benchmark import one_thread
from stackrl.testing.tiny import tiny_config
from stackrl.tasks.posing import request_text
from stackrl_skillsp.proposer import drawn_skills, propose, verified


def test_a_reply_is_kept_only_as_a_problem_of_the_requested_skill():
    task = verified(" What is (3 + 4) * 2?\n", read_problem("What is (3 + 4) * 2?")["category"])
    assert task == {"question": "What is (3 + 4) * 2?", "answer": "14"}
    assert verified(" What is (3 + 4) * 2?\n", "4 steps, 2-digit") is None  # another skill's problem
    assert verified(" Draw a circle.\n", "2 steps, 1-digit") is None  # not a problem of the task


def test_skills_are_drawn_by_the_weights_the_same_at_every_call():
    weights = {"a": 0.9, "b": 0.1, "c": 0.0}
    drawn = drawn_skills(weights, 200, step=3)
    assert drawn == drawn_skills(weights, 200, step=3) and "c" not in drawn
    assert 150 < drawn.count("a") < 200


class FakePool:
    def __init__(self, rows):
        self.rows, self.added = rows, []

    def active_rows(self):
        return list(range(len(self.rows)))

    def row(self, i):
        return dict(self.rows[i])

    def format_row(self, columns):
        return {**columns, "prompt": columns["question"]}

    def add_rows(self, rows):
        self.added.extend(rows)
        return list(range(len(self.rows), len(self.rows) + len(rows)))


class Reply:
    def __init__(self, text):
        self.text = text


class FakeContext:
    """A post_step context: the pool above, and a policy whose replies are scripted in request order."""

    def __init__(self, pool, replies):
        self.pool, self.step, self.replies, self.asked = pool, 5, replies, []

    def generate(self, prompts, **sampling):
        self.asked.extend(prompts)
        return [Reply(text) for text in self.replies[:len(prompts)]]


def test_each_request_shows_its_skill_and_only_verified_tasks_of_that_skill_join_under_it():
    easy, hard = "2 steps, 1-digit", "3 steps, 2-digit"
    easy_qs = ["What is (3 + 4) * 2?\n", "What is (5 - 1) * 3?\n", "What is (2 + 2) * 9?\n"]
    hard_qs = ["What is ((68 - 10) * 8) + 36?\n"]
    assert {read_problem(q)["category"] for q in easy_qs} == {easy} and read_problem(hard_qs[0])["category"] == hard
    pool = FakePool([{"question": q, "category": easy, "answer": "0"} for q in easy_qs]
                    + [{"question": q, "category": hard, "answer": "0"} for q in hard_qs])
    weights = {easy: 0.0, hard: 1.0}  # every request for the hard skill
    replies = [" What is ((35 * 3) + 20) * 8?\n", " What is (6 + 1) * 2?\n", " Draw a map.\n",
               " What is ((68 - 10) * 8) + 36?\n"]
    ctx = FakeContext(pool, replies)
    tasks, asked = propose(ctx, weights, count=4, examples=2, column="question", max_new_tokens=64)
    assert asked == 4 and ctx.asked == [request_text(hard_qs)] * 4  # the hard skill's problems only
    # kept: the new hard task, with its computed answer; refused: another skill's task, no task, a pool question
    assert tasks == [(hard, "What is ((35 * 3) + 20) * 8?", "1000")]
    assert pool.added == [{"question": "What is ((35 * 3) + 20) * 8?\n", "prompt": "What is ((35 * 3) + 20) * 8?\n",
                           "answer": "1000", "category": hard}]


def test_posed_tasks_join_the_pool_under_their_skill(tmp_path):
    config = tiny_config(
        "stackrl/arith-skills", ["skillsp"], tmp_dir=tmp_path / "config",
        data={"source": "arithmetic", "size": 24}, rewards={"exact_match": 1.0},
        skillsp={"propose": 16},
        trainer={"per_device_train_batch_size": 8, "num_generations": 2, "max_completion_length": 48,
                 "max_steps": 1, "temperature": 1.0, "seed": 0},
        output_dir=str(tmp_path / "out"),
    )
    with one_thread():
        run = build_trainer(config)
        run.train()
    added = [run.pool.row(i) for i in run.pool.active_rows() if i >= 24]
    logged = [e for e in run.state.log_history if "skillsp/proposer/verified" in e]
    assert added, "the model posed no verified task: the test is void"
    assert logged and logged[0]["skillsp/proposer/verified"] == pytest.approx(len(added) / 16)
    for row in added:
        problem = read_problem(row["question"])
        assert problem is not None and problem["category"] == row["category"], row
        assert str(problem["answer"]) == row["answer"] and row["question"].endswith("\n")
        assert row["prompt"] == row["question"]  # the built-in task's prompt is the question itself
