"""The prompt pool on a hand-built pool: each way a plugin steers it changes what is drawn next, and bad changes
are errors that name the plugin and the step."""

import json

import pytest
import torch
from datasets import Dataset

from stackrl.errors import PluginError
from stackrl.pool import POOL_ROW, Pool, PoolAccess

CATEGORIES = ["easy", "easy", "mid", "mid", "hard", "hard"]


def hand_built(tmp_path=None, n=6) -> Pool:
    rows = {
        "prompt": [f"What is {i} + 1?\n" for i in range(n)],
        "answer": [str(i + 1) for i in range(n)],
        "category": CATEGORIES[:n],
        POOL_ROW: list(range(n)),
    }
    written = None if tmp_path is None else str(tmp_path / "pool_added.jsonl")
    return Pool(Dataset.from_dict(rows), seed=0, answer_column="answer", added_file=written)


def steer(pool: Pool, step: int = 3) -> PoolAccess:
    return PoolAccess(pool, "steerer", step)


def test_a_cycle_draws_every_row_once_before_any_twice():
    pool = hand_built()
    first = pool.draw(6, step=0)
    assert sorted(first) == list(range(6))
    assert sorted(pool.draw(6, step=1)) == list(range(6))


def test_category_weights_choose_the_category_drawn_next():
    pool, twin = hand_built(), hand_built()
    steer(pool).set_category_weights({"hard": 1.0})
    drawn = pool.draw(4, step=3)
    assert sorted(drawn[:2]) == [4, 5] and sorted(drawn[2:]) == [4, 5]
    # The twin, unsteered, draws from every category.
    assert {CATEGORIES[i] for i in twin.draw(6, step=3)} == {"easy", "mid", "hard"}


def test_category_probabilities_follow_the_weights():
    pool = hand_built()
    steer(pool).set_category_weights({"easy": 3.0, "hard": 1.0})
    drawn = [CATEGORIES[i] for i in pool.draw(4000, step=3)]
    assert drawn.count("mid") == 0
    assert drawn.count("easy") / len(drawn) == pytest.approx(0.75, abs=0.03)


def test_only_drawn_rows_are_unused_within_a_category():
    pool = hand_built()
    steer(pool).set_category_weights({"mid": 1.0})
    pair = pool.draw(2, step=3)
    assert sorted(pair) == [2, 3]  # both mid rows before either again
    assert sorted(pool.draw(2, step=3)) == [2, 3]


def test_a_new_cycle_in_one_category_leaves_the_others_cycles_alone():
    pool = hand_built()
    steer(pool).set_category_weights({"easy": 1.0})
    (first,) = pool.draw(1, step=3)
    steer(pool).set_row_weights({first: 1e6})  # drawn again at once if its cycle were restarted
    steer(pool).set_category_weights({"mid": 1.0})
    pool.draw(3, step=3)  # both mid rows, then a new mid cycle
    steer(pool).set_category_weights({"easy": 1.0})
    assert pool.draw(1, step=3) == [1 - first]


def test_row_weights_change_the_rows_drawn_next():
    pool = hand_built()
    steer(pool).set_row_weights({i: 0.0 for i in range(6) if i != 1})
    assert pool.draw(3, step=3) == [1, 1, 1]
    steer(pool).set_row_weights({0: 1.0})
    assert set(pool.draw(4, step=4)) == {0, 1}


def test_retired_rows_are_never_drawn_again():
    pool = hand_built()
    steer(pool).retire([0, 2, 4])
    assert set(pool.draw(12, step=3)) == {1, 3, 5}
    assert pool.stats(0).retired and pool.active_rows() == [1, 3, 5]


def test_added_rows_join_the_current_cycle(tmp_path):
    pool = hand_built(tmp_path, n=4)
    first = pool.draw(3, step=0)
    ids = steer(pool).add_rows([{"prompt": "What is 9 + 9?\n", "answer": "18", "category": "new"}])
    assert ids == [4]
    left = set(range(4)) - set(first)
    assert set(pool.draw(2, step=3)) == left | {4}  # the one row left of the cycle and the new one, nothing else
    written = [json.loads(line) for line in (tmp_path / "pool_added.jsonl").read_text().splitlines()]
    assert written == [{"id": 4, "step": 3, "plugin": "steerer", "stage": 0, "label_free": False,
                        "row": {"prompt": "What is 9 + 9?\n", "answer": "18", "category": "new"}}]


def test_a_row_without_an_answer_is_label_free_and_gets_every_column():
    pool = hand_built()
    (row,) = steer(pool).add_rows([{"prompt": "Write a problem.\n", "source": "self"}])
    assert pool.stats(row).label_free and not pool.stats(0).label_free
    assert pool.row(row) == {"prompt": "Write a problem.\n", "answer": None, "category": None, "source": "self",
                             POOL_ROW: row}
    assert pool.row(0)["source"] is None


def test_a_stage_switch_draws_only_the_new_dataset():
    pool = hand_built()
    steer(pool).set_category_weights({"easy": 1.0})
    new = steer(pool, step=5).switch_dataset([{"prompt": f"Stage {i}\n", "answer": str(i)} for i in range(2)])
    assert new == [6, 7] and pool.stage == 1 and pool.category_weights is None
    assert set(pool.draw(6, step=5)) == {6, 7}
    assert pool.stats(0).retired and pool.stats(6).stage == 1


def test_a_stage_switch_back_draws_the_earlier_rows_again():
    pool = hand_built()
    first = pool.active_rows()
    stage = steer(pool).switch_dataset([{"prompt": "Stage 1\n", "answer": "1"}])
    assert steer(pool, step=9).switch_dataset(first) == first
    assert pool.stage == 2 and pool.active_rows() == first and pool.stats(stage[0]).retired
    assert sorted(pool.draw(6, step=9)) == first
    with pytest.raises(PluginError, match="called switch_dataset at step 3 with row 99"):
        steer(pool).switch_dataset([99])


def test_statistics_are_recorded_per_row():
    pool = hand_built()
    pool.record([2, 5], [0.25, None], [0.5, 0.0])
    pool.record([2], [1.0], [0.0])
    assert pool.stats(2).times_drawn == 2 and pool.stats(2).last_pass_rate == 1.0
    assert pool.stats(5).last_pass_rate is None and pool.stats(5).last_abs_advantage == 0.0
    assert pool.stats(0).times_drawn == 0 and pool.batches == 2 and pool.last_batch == [2]


def test_state_round_trip_continues_the_same_draws(tmp_path):
    pool = hand_built(tmp_path)
    steer(pool).set_category_weights({"easy": 1.0, "hard": 2.0})
    steer(pool).add_rows([{"prompt": "What is 9 + 9?\n", "answer": "18", "category": "hard"}])
    pool.draw(5, step=3)
    path = tmp_path / "pool.pt"
    torch.save(pool.state_dict(), path)
    want = pool.draw(20, step=4)

    restored = hand_built(tmp_path)
    restored.load_state_dict(torch.load(path, weights_only=True))
    assert restored.draw(20, step=4) == want
    assert len((tmp_path / "pool_added.jsonl").read_text().splitlines()) == 1


def test_a_dry_pool_names_the_plugin_and_step():
    pool = hand_built()
    steer(pool, step=7).retire(range(6))
    with pytest.raises(PluginError, match=r"nothing to draw at step 8: .*retired.*plugin 'steerer' at step 7"):
        pool.draw(1, step=8)
    pool = hand_built()
    steer(pool).set_category_weights({"easy": 1.0})
    steer(pool).retire([0, 1])
    with pytest.raises(PluginError, match="no category with a positive weight"):
        pool.draw(1, step=4)


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"question": "no prompt"}], r"row 0 of the call\): its 'prompt' is None; expected a non-empty string"),
        ([{"prompt": "ok"}, "text"], r"row 1 of the call\): str, expected a dict"),
        ([{"prompt": [{"role": "user", "content": "chat"}]}], "expected a non-empty string"),
        ([{"prompt": "ok", "answer": {1, 2}}], "plain JSON values"),
        ([{"prompt": "ok", POOL_ROW: 3}], "the pool's own"),
        ({"prompt": "ok"}, "as dict; expected a list of dicts"),
    ],
)
def test_malformed_rows_name_the_plugin_and_step(rows, message):
    pool = hand_built()
    with pytest.raises(PluginError, match=rf"plugin 'steerer' .*at step 3.*{message}"):
        steer(pool).add_rows(rows)
    assert len(pool) == 6  # nothing of the call was added


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda p: p.set_category_weights({"medium": 1.0}), r"category 'medium'.*categories: 'easy', 'mid', 'hard'"),
        (lambda p: p.set_category_weights({"easy": -1.0}), "weight -1.0 at step 3; expected a finite number >= 0"),
        (lambda p: p.set_row_weights({2: float("nan")}), "row 2 the weight nan"),
        (lambda p: p.set_row_weights({6: 1.0}), "row 6, which is not a pool row id"),
        (lambda p: p.retire([-1]), "called retire at step 3 with row -1"),
        (lambda p: p.switch_dataset([]), "empty dataset at step 3"),
        (lambda p: p.stats(6), "called stats at step 3 with row 6"),
        (lambda p: p.row(True), "called row at step 3 with row True"),
    ],
)
def test_bad_changes_name_the_plugin_and_step(change, message):
    with pytest.raises(PluginError, match=rf"plugin 'steerer' .*{message}"):
        change(steer(hand_built()))
