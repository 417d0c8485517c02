"""MR-RLVR on the real trainer: stage 1 draws the process tasks and only their reward counts; at the switch step
the pool draws the problems again and the process reward's weight drops to 0; bad settings are refused."""

import json
import math
from types import SimpleNamespace

import pytest
from datasets import Dataset
from transformers import TrainerCallback

from stackrl import PluginError
from stackrl.pool import ADDED_FILE, POOL_ROW, Pool, PoolAccess
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import StopAt
from stackrl.weights import schedule

from stackrl_mrrlvr import Mrrlvr, MrrlvrConfig, fill_agreement, order_agreement
from stackrl_mrrlvr.plugin import STEP_COLUMN, TASK_COLUMN


class TestConformance(PluginConformance):
    plugin_name = "mrrlvr"
    refused_settings = [
        ({"switch_step": 0}, "mrrlvr.switch_step: stage 1 needs at least one step"),
        ({"tasks": []}, "mrrlvr.tasks: a non-empty list of fill, reorder"),
        ({"tasks": ["fill", "cloze"]}, "mrrlvr.tasks: a non-empty list of fill, reorder"),
        ({"fill_template": "{prompt}"}, r"mrrlvr.fill_template: must contain \{solution\} and \{prompt\}"),
        ({"reorder_template": "{solution} {prompt} {answer}"},
         r"mrrlvr.reorder_template: only \{solution\} and \{prompt\}"),
        ({"mask": " "}, "mrrlvr.mask: must be visible text"),
    ]


class Drawn(TrainerCallback):
    """Per step: the task of each group of its rollout (None: a problem), its mrrlvr and exact_match rewards."""

    def __init__(self, trainer):
        self.trainer, self.steps = trainer, []

    def on_step_end(self, args, state, control, **kwargs):
        rollout = self.trainer._rollouts["train"]
        size = rollout.group_size
        self.steps.append({
            "tasks": rollout.columns.get(TASK_COLUMN, [None] * len(rollout))[::size],
            "rows": self.trainer.pool.last_batch,
            "mrrlvr": rollout.rewards["mrrlvr"].tolist(),
            "exact_match": rollout.rewards["exact_match"].tolist(),
            "rollout": rollout,
        })


def _run(config, **kwargs):
    trainer = build_trainer(config)
    drawn = Drawn(trainer)
    trainer.add_callback(drawn)
    for callback in kwargs.pop("callbacks", []):
        trainer.add_callback(callback)
    trainer.train(**kwargs)
    return trainer, drawn.steps


TRAINER = {"per_device_train_batch_size": 8, "max_steps": 4}


def test_stage_1_draws_process_tasks_and_the_switch_draws_the_problems_with_the_outcome_reward(make_config, tmp_path):
    config = make_config(["mrrlvr"], trainer=TRAINER, data={"size": 6}, mrrlvr={"switch_step": 2})
    trainer, steps = _run(config)
    originals = set(range(6))
    # Stage 1 (the rollouts of steps 0 and 1): process rows only, scored by agreement, not by the outcome reward.
    for step in steps[:2]:
        assert all(task in ("fill", "reorder") for task in step["tasks"]) and not set(step["rows"]) & originals
        assert all(math.isnan(r) for r in step["exact_match"]) and not any(math.isnan(r) for r in step["mrrlvr"])
    # Stage 2: the original problems, scored by the outcome reward alone.
    for step in steps[2:]:
        assert step["tasks"] == [None, None] and set(step["rows"]) <= originals
        assert all(math.isnan(r) for r in step["mrrlvr"]) and not any(math.isnan(r) for r in step["exact_match"])
    weights = [row["reward_weight/mrrlvr"] for row in trainer.state.log_history if "reward_weight/mrrlvr" in row]
    assert weights == [1.0, 1.0, 0.0, 0.0]
    assert trainer.pool.stage == 2 and trainer.pool.active_rows() == sorted(originals)
    added = [json.loads(line) for line in (tmp_path / "run" / ADDED_FILE).read_text().splitlines()]
    assert len(added) == 12 and {r["stage"] for r in added} == {1} and all(r["label_free"] for r in added)
    assert sorted(r["row"][TASK_COLUMN] for r in added) == ["fill"] * 6 + ["reorder"] * 6


def test_the_switch_step_hands_the_pool_back_to_the_problems_and_mutes_the_process_reward():
    """The hooks alone, on a hand-built pool of two problems: stage 1 holds their process tasks through the step
    before ``switch_step``; at it the pool draws the problems again, and the reward's default weight is 0 from it."""
    solutions = ["3 + 4 = 7\n7 * 2 = 14\nThe answer is 14.", "2 + 5 = 7\n7 * 3 = 21\nThe answer is 21."]
    pool = Pool(Dataset.from_dict({"prompt": ["What is (3 + 4) * 2?\n", "What is (2 + 5) * 3?\n"],
                                   "answer": ["14", "21"], "solution": solutions, POOL_ROW: [0, 1]}),
                seed=0, answer_column="answer")
    plugin = Mrrlvr(MrrlvrConfig(switch_step=3))
    at = lambda step: SimpleNamespace(step=step, pool=PoolAccess(pool, "mrrlvr", step))  # noqa: E731
    plugin.train_begin(at(0))
    assert pool.stage == 1 and pool.active_rows() == [2, 3, 4, 5], "one fill and one reorder per problem"
    plugin.post_step(at(2))
    assert pool.stage == 1 and pool.active_rows() == [2, 3, 4, 5]
    plugin.post_step(at(3))
    assert pool.stage == 2 and pool.active_rows() == [0, 1]
    weight = schedule(plugin.reward_weight(), "rewards.mrrlvr")
    assert [weight.at(step) for step in (0, 2, 3, 9)] == [1.0, 1.0, 0.0, 0.0]


def test_each_process_row_is_rewarded_by_its_own_agreement(make_config):
    config = make_config(["mrrlvr"], trainer={**TRAINER, "max_steps": 2}, data={"size": 6}, mrrlvr={"switch_step": 5})
    _, steps = _run(config)
    for step in steps:
        rollout = step["rollout"]
        columns = rollout.columns
        for i, completion in enumerate(rollout.completions):
            solution = columns["solution"][i]
            want = (fill_agreement(completion, solution, columns[STEP_COLUMN][i]) if columns[TASK_COLUMN][i] == "fill"
                    else order_agreement(completion, solution))
            assert step["mrrlvr"][i] == pytest.approx(want)
            assert columns["answer"][i] is None  # stage 1 is self-supervised: no answer reaches the rewards


def test_the_process_prompts_show_the_altered_solution_before_the_question(make_config):
    plugin = Mrrlvr(MrrlvrConfig(tasks=["fill", "reorder"], seed=3))
    row = {"prompt": "What is (3 + 4) * 2?\n", "question": "What is (3 + 4) * 2?\n", "answer": "14",
           "solution": "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14.", "category": "2 steps, 1-digit"}
    fill, reorder = plugin.process_rows({0: row}, step=0)
    assert fill["prompt"] == REFERENCE_TEMPLATE.format(solution=fill["prompt"].split("\n\n")[0], prompt=row["prompt"])
    assert "[MASK]" in fill["prompt"] and fill[STEP_COLUMN] in (0, 1)
    assert reorder["prompt"] == "7 * 2 = 14\n3 + 4 = 7\nThe answer is 14.\n\nWhat is (3 + 4) * 2?\n"
    assert "answer" not in fill and fill["category"] == row["category"] and fill["solution"] == row["solution"]
    chat = plugin.process_rows({0: {**row, "prompt": [{"role": "system", "content": "s"},
                                                      {"role": "user", "content": "What is (3 + 4) * 2?\n"}]}}, 0)
    assert chat[1]["prompt"] == [{"role": "system", "content": "s"},
                                 {"role": "user", "content": reorder["prompt"]}]


def test_a_resumed_run_switches_and_draws_exactly_as_an_uninterrupted_one(make_config, tmp_path):
    trainer = {**TRAINER, "save_strategy": "steps", "save_steps": 1}
    sections = {"trainer": trainer, "data": {"size": 6}, "mrrlvr": {"switch_step": 2}}
    _, straight = _run(make_config(["mrrlvr"], output_dir=str(tmp_path / "straight"), **sections))
    interrupted = make_config(["mrrlvr"], output_dir=str(tmp_path / "resumed"), **sections)
    _run(interrupted, callbacks=[StopAt(1)])
    _, resumed = _run(interrupted, resume_from_checkpoint=True)
    assert [s["rows"] for s in resumed] == [s["rows"] for s in straight[1:]]
    assert [s["rollout"].completions for s in resumed] == [s["rollout"].completions for s in straight[1:]]


def test_rows_without_a_solution_are_refused_naming_the_column(make_config):
    plugin = Mrrlvr(MrrlvrConfig(solution_column="worked"))
    with pytest.raises(PluginError, match="column 'worked' \\(mrrlvr.solution_column\\)"):
        plugin.process_rows({0: {"prompt": "What is 1 + 1?\n", "solution": "1 + 1 = 2\nThe answer is 2."}}, step=0)
