"""SeRL's self-instruction in real label-free runs of the built-in model, with the problem writing scripted (for
exact counts; the model writing them: test_serl_posing.py): what the rules reject is counted, the problems kept
reach the pool, are drawn in place of the dataset's, and stay only if their first group's agreement lies in the
band; a resumed run continues exactly, and two processes add the same rows. The rules themselves:
tests/test_selfinstruct.py."""

import json
from pathlib import Path

import pytest
import torch

from stackrl.pool import ADDED_FILE
from stackrl.run import build_trainer
from stackrl.testing.fixtures import DrawnGroups, StopAt
from stackrl.testing.repository import load_script
from stackrl.testing.scripted import script_problems
from stackrl.testing.tiny import tiny_config

SEEDS = 4  # dataset rows: the seed problems
WRITTEN = [  # written after step 1, one text per request (text runs continue the request's open number)
    " What is 2 + 3 + 1?\n6. What is (47 * 83) - 19 + 56?\n7. Draw a line of 5 cm.\n8. Hi there\n9.",
    " What is 2 + 3 + 1?\n6. What is 9 + 8 + 7 + 6?\n7. What is (38 * 7) + (91 * 6)?\n",
    "\n6. Write a program that adds 2 and 3.\n7. (b) What is 4 + 4 then?\n",
    "",
]
# What the rules make of them: 9 problems read; "Draw" and "Write a program" banned, "Hi there" too short,
# "(b) ..." badly formed, the second "What is 2 + 3 + 1?" a repeat.
ADDED = ["What is 2 + 3 + 1?", "What is (47 * 83) - 19 + 56?", "What is 9 + 8 + 7 + 6?", "What is (38 * 7) + (91 * 6)?"]
REJECTED = {"length": 1, "banned": 2, "form": 1, "similar": 1}
LATER = {3: [" What is 12 + 13 + 14 + 15?\n"]}  # a later round, to see which examples its requests show
TRAINER = {"per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 32, "max_steps": 4,
           "seed": 3, "temperature": 1.2}


def sections(output_dir, **trainer):
    return {
        "model": {"name_or_path": "stackrl/arith-tiny"},
        "data": {"label_free": True, "size": SEEDS},
        "rewards": {"exact_match": None},
        "trainer": {**TRAINER, **trainer},
        "serl": {"answer_extractor": "answer_is", "math_verify": False, "self_instruct": {"every_steps": 1}},
        "output_dir": str(output_dir),
    }


SCRIPT = {1: WRITTEN, **LATER}


def train(folder, callbacks=(), resume=None, monitor=None, **trainer):
    config = tiny_config("unused", ["serl"], tmp_dir=Path(folder) / "config", **sections(folder, **trainer))
    run = build_trainer(config, monitor=monitor, callbacks=list(callbacks))
    writer = script_problems(run, "serl", SCRIPT)
    run.train(resume_from_checkpoint=resume)
    return run, writer


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serl-straight")
    monitor = DrawnGroups("serl")
    run, writer = train(folder, monitor=monitor, save_strategy="steps", save_steps=2)
    return run, writer, monitor, folder


def test_kept_problems_reach_the_pool_and_are_drawn_in_place_of_the_dataset(straight):
    run, writer, monitor, folder = straight
    serl = run.plugins.plugins["serl"]
    ids = list(range(SEEDS, SEEDS + len(ADDED)))
    assert [serl.instruct.written[i] for i in ids] == ADDED
    step_1 = next(entry for entry in run.state.log_history if entry.get("step") == 1)
    assert step_1["serl/instruct/written"] == 9 and step_1["serl/instruct/added"] == len(ADDED)
    for reason in ("length", "banned", "form", "similar"):
        assert step_1[f"serl/instruct/rejected/{reason}"] == REJECTED.get(reason, 0), reason
    written = [json.loads(line) for line in (folder / ADDED_FILE).read_text().splitlines()]
    assert [(r["id"], r["step"], r["plugin"], r["label_free"]) for r in written[: len(ADDED)]] == [
        (i, 1, "serl", True) for i in ids
    ]
    # stored ending as the seed questions do, in a newline
    assert [r["row"] for r in written[: len(ADDED)]] == [{"question": q + "\n", "prompt": q + "\n"} for q in ADDED]
    # From step 2 on, the dataset's rows weigh 0: every batch is written problems.
    assert all(group.row < SEEDS for group in monitor.groups if group.step == 1)
    assert all(group.row >= SEEDS for group in monitor.groups if group.step > 1)
    assert all(run.pool.stats(row).weight == 0.0 for row in range(SEEDS))


def test_a_written_problem_stays_only_if_its_first_group_agrees_within_the_band(straight):
    run, writer, monitor, folder = straight
    serl = run.plugins.plugins["serl"]
    first = {row: sum(g.rewards) / len(g.rewards) for row, g in monitor.first_groups(serl.instruct.written).items()}
    judged = list(first)
    inside = {row for row in judged if 0.2 <= first[row] <= 0.8}
    assert inside and set(judged) - inside, f"this seed gives problems inside and outside the band: {first}"
    assert {row for row in judged if not run.pool.stats(row).retired} == inside
    assert set(serl.instruct.examples) == inside and not serl.pending & set(judged)
    # The round after step 3 shows the kept problems (up to two per request) among the dataset's.
    for request in writer.requests[3]:
        listed = [line.split(". ", 1)[1] for line in request.splitlines()[2:-1]]
        shown = [p for p in listed if p in serl.instruct.written.values()]
        assert len(shown) == min(2, len(inside)) and set(shown) <= {serl.instruct.written[r] for r in inside}
        assert len(listed) - len(shown) == SEEDS


def test_a_resumed_run_writes_filters_and_draws_what_an_uninterrupted_one_does(straight, tmp_path):
    run, writer, monitor, folder = straight
    first, _ = train(tmp_path, callbacks=[StopAt(2)], save_strategy="steps", save_steps=2)
    assert first.state.global_step == 2
    resumed_monitor = DrawnGroups("serl")
    resumed, resumed_writer = train(tmp_path, resume=True, monitor=resumed_monitor, save_strategy="steps", save_steps=2)
    assert resumed_monitor.groups == [group for group in monitor.groups if group.step > 2]
    assert resumed_writer.requests[3] == writer.requests[3]  # the same examples drawn in the same order
    assert (tmp_path / ADDED_FILE).read_text() == (folder / ADDED_FILE).read_text()
    want, got = run.pool.state_dict(), resumed.pool.state_dict()
    assert {k: v for k, v in got.items() if k != "generator"} == {k: v for k, v in want.items() if k != "generator"}
    assert resumed.plugins.plugins["serl"].pending == run.plugins.plugins["serl"].pending
    for name, p in run.model.named_parameters():
        assert torch.equal(p, dict(resumed.model.named_parameters())[name]), name


def test_two_processes_add_and_retire_the_same_rows(tmp_path):
    worker = load_script(Path(__file__).parents[3] / "tests" / "distributed_worker.py")
    spec = {
        "name": "serl",
        "plugins": ["serl"],
        "sections": sections(tmp_path / "serl" / "run", per_device_train_batch_size=4, max_steps=2),
        "scripted_problems": {"plugin": "serl", "texts": {str(k): v for k, v in SCRIPT.items()}},
    }
    worker.launch("unused", [spec], tmp_path)
    ranks = worker.reports(tmp_path, "serl")
    assert ranks[0]["world_size"] == 2 and ranks[0]["global_step"] == 2
    assert ranks[0]["pool"] == ranks[1]["pool"]
    assert [r["row"]["question"] for r in ranks[0]["pool"]["added"]] == [q + "\n" for q in ADDED]
    written = [json.loads(line) for line in (tmp_path / "serl" / "run" / ADDED_FILE).read_text().splitlines()]
    assert written == ranks[0]["pool"]["added"]
    assert ranks[0]["param_hash"] == ranks[1]["param_hash"]
