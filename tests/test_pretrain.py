"""stackrl.tasks.pretrain, the script that makes the built-in models: what its snapshots and records hold."""

from __future__ import annotations

import json

from stackrl.tasks import arith_tiny_path
from stackrl.tasks.pretrain import RECORD_FILE, file_hash, recipe_hash


def test_a_snapshot_of_the_roles_phase_is_the_run_that_stops_there(tmp_path):
    """What lets the shipped checkpoint be a snapshot: a run of k steps makes the same weights."""
    from safetensors.torch import load_file

    from stackrl.tasks.pretrain import pretrain

    quick = dict(init=arith_tiny_path(), reading_steps=0, batch_size=4, train_size=50, eval_per_category=1, threads=1)
    pretrain(tmp_path / "long", skills_steps=3, save_every=2, **quick)
    pretrain(tmp_path / "short", skills_steps=2, **quick)
    snapshot, short = tmp_path / "long-skills2", tmp_path / "short"
    record = json.loads((snapshot / RECORD_FILE).read_text())
    assert record["snapshot"] == {"phase": "skills", "step": 2} and record["settings"]["skills_steps"] == 3
    assert json.loads((short / RECORD_FILE).read_text())["summary"]["skills"]["judge"]["problems"] == 6
    weights = load_file(snapshot / "model.safetensors")
    assert weights.keys() == load_file(short / "model.safetensors").keys()
    assert all((weights[k] == v).all() for k, v in load_file(short / "model.safetensors").items())
    initial = load_file(arith_tiny_path() / "model.safetensors")
    assert any((weights[k] != v).any() for k, v in initial.items())
    assert record["recipe_sha256"] == recipe_hash()
    assert record["init_sha256"] == file_hash(arith_tiny_path() / "model.safetensors")
