"""The prompt pool in training: a plugin that steers it changes the next batch, rows it adds are written to the
run folder, a resumed run draws what an uninterrupted one draws, and evaluation never uses it."""

import json

import pytest
import torch

from stackrl.errors import PluginError, PluginHookError
from stackrl.pool import ADDED_FILE, POOL_STATE_FILE
from stackrl.testing.fixtures import StopAt, train_steps

# Four problems a step, two completions each, from a pool of 24 rows of all six categories.
QUICK = {"per_device_train_batch_size": 8, "num_generations": 2, "max_completion_length": 8}
DATA = {"size": 24}


def steered(make_config, steps, output_dir=None, saving=None, **pool_steer):
    trainer = {**QUICK, "max_steps": steps, **(saving or {})}
    extra = {} if output_dir is None else {"output_dir": str(output_dir)}
    return make_config(["pool_steer"], trainer=trainer, data=DATA, pool_steer=pool_steer, **extra)


def test_category_weights_from_train_begin_draw_only_that_category(make_config):
    run = train_steps(steered(make_config, 2, category="3 steps, 2-digit"))
    categories = run.plugins.plugins["pool_steer"].categories
    assert categories == [["3 steps, 2-digit"] * 4] * 2


def test_added_rows_are_drawn_next_and_written_to_the_run_folder(make_config, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ADDED_FILE).write_text('{"id": 24, "step": 9}\n')  # an earlier run's, in the same folder
    run = train_steps(steered(make_config, 3, tmp_path / "run", add_at=1))
    steer = run.plugins.plugins["pool_steer"]
    assert "added" not in steer.categories[0]
    assert steer.categories[1] == steer.categories[2] == ["added"] * 4
    assert sorted(steer.drawn[1]) == [24, 24, 25, 25]  # both rows in each cycle
    written = [json.loads(line) for line in (tmp_path / "run" / ADDED_FILE).read_text().splitlines()]
    assert [(r["id"], r["step"], r["plugin"], r["label_free"]) for r in written] == [
        (24, 1, "pool_steer", False),
        (25, 1, "pool_steer", True),
    ]
    # The label-free row is not scored by the outcome reward; the other one is.
    rollout = run._rollouts["train"]
    scored = {p: bool(torch.isfinite(r)) for p, r in zip(rollout.prompts, rollout.rewards["exact_match"])}
    assert scored == {"What is 2 + 2?\n": True, "What is 3 + 3?\n": False}
    assert run.pool.stats(25).times_drawn == 4 and run.pool.stats(25).last_pass_rate is None
    # Statistics of the last batch: its groups are rows 24 and 25 in the pool's order.
    rows = run.pool.last_batch
    groups = rollout.advantages.abs().view(-1, 2).mean(1).tolist()
    for row, mean_abs in zip(rows, groups):
        assert run.pool.stats(row).last_abs_advantage == pytest.approx(mean_abs)
    correct = rollout.rewards["exact_match"].view(-1, 2)[rows.index(24)]
    assert run.pool.stats(24).last_pass_rate == pytest.approx(float((correct >= 1).float().mean()))


def test_retired_rows_and_a_stage_switch_change_the_next_batch(make_config):
    run = train_steps(steered(make_config, 4, retire_at=1, switch_at=2))
    drawn = run.plugins.plugins["pool_steer"].drawn
    assert not set(drawn[0]) & set(drawn[1])  # step 2 draws none of the rows retired after step 1
    assert set(drawn[2]) <= {24, 25, 26} and set(drawn[3]) <= {24, 25, 26}
    assert run.pool.stage == 1


def test_a_pool_left_with_nothing_to_draw_stops_the_run_naming_the_plugin_and_step(make_config):
    # The category has four rows, all drawn in step 1 and then retired.
    with pytest.raises(PluginError, match=r"nothing to draw at step 1: .*plugin 'pool_steer' at step 1"):
        train_steps(steered(make_config, 2, category="3 steps, 2-digit", retire_at=1))


def test_malformed_rows_stop_the_run_naming_the_plugin_and_step(make_config):
    with pytest.raises(PluginHookError, match=r"plugin 'pool_steer' added a malformed row at step 1"):
        train_steps(steered(make_config, 2, bad_rows_at=1))


def test_a_resumed_run_draws_what_an_uninterrupted_one_draws_across_pool_changes(make_config, tmp_path):
    # Category weights from the start and rows added before the checkpoint, a stage switch after it.
    changes = {"category": "4 steps, 1-digit", "add_at": 2, "switch_at": 4}
    saving = {"save_strategy": "steps", "save_steps": 3}
    straight = train_steps(steered(make_config, 6, tmp_path / "straight", saving, **changes))
    config = steered(make_config, 6, tmp_path / "resumed", saving, **changes)
    first = train_steps(config, callbacks=[StopAt(3)])
    assert (tmp_path / "resumed" / "checkpoint-3" / POOL_STATE_FILE).is_file()
    assert first.state.global_step == 3
    resumed = train_steps(config, resume=True)

    want = straight.plugins.plugins["pool_steer"].drawn
    assert resumed.plugins.plugins["pool_steer"].drawn == want
    assert len(want) == 6 and set(want[2]) == {24, 25} and set(want[5]) <= {26, 27, 28}
    assert resumed.pool.state_dict()["used"] == straight.pool.state_dict()["used"]
    assert (tmp_path / "resumed" / ADDED_FILE).read_text() == (tmp_path / "straight" / ADDED_FILE).read_text()
    for name, p in straight.model.named_parameters():
        assert torch.equal(p, dict(resumed.model.named_parameters())[name]), name
