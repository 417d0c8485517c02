"""A run folder holds one run: a fresh run into a folder that holds one is refused before anything loads, or
replaces it whole with ``--overwrite``; ``--resume`` on a finished run trains nothing and changes nothing."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from stackrl.cli import main
from stackrl.plots import METRICS_FILE
from stackrl.samples import SAMPLES_FILE

ROOT = Path(__file__).resolve().parent.parent
DEMO = str(ROOT / "configs" / "demo.yaml")
# The demo, short and small: two steps of two groups of 4, a checkpoint at the last (save_strategy steps saves the
# final step too).
SHORT = ["trainer.max_steps=2", "trainer.logging_steps=1", "trainer.per_device_train_batch_size=8",
         "trainer.num_generations=4", "trainer.max_completion_length=24", "eval.size=8", "eval.samples=2",
         "eval.max_new_tokens=24", "data.size=16", "trainer.disable_tqdm=true"]


def checksums(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def stackrl(capfd, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capfd.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """``stackrl train configs/demo.yaml`` run to its end (2 steps), evaluated before and after."""
    run = tmp_path_factory.mktemp("demo") / "demo"
    assert main(["train", DEMO, *SHORT, f"output_dir={run}"]) == 0
    return run


def test_a_fresh_run_into_a_run_folder_is_refused_before_anything_loads(finished, capfd, monkeypatch):
    before = checksums(finished)
    loaded = []
    monkeypatch.setattr("stackrl.run.load_model", lambda *a, **k: loaded.append(1))
    code, out, err = stackrl(capfd, "train", DEMO, *SHORT, f"output_dir={finished}")
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.splitlines() == [
        f"stackrl: error: output_dir {finished} holds a run (checkpoint-2, eval.json, metrics.jsonl, samples.jsonl, "
        "...); a fresh run there would mix with it. Continue it with --resume, train into another folder with "
        "output_dir=OTHER, or replace it with --overwrite"
    ]
    assert loaded == [] and checksums(finished) == before


def test_resuming_a_finished_run_trains_nothing_and_prints_its_summary(finished, capfd):
    before = checksums(finished)
    code, out, err = stackrl(capfd, "train", DEMO, *SHORT, f"output_dir={finished}", "--resume")
    assert code == 0 and "Traceback" not in err
    evaluations = json.loads((finished / "eval.json").read_text())
    assert out.splitlines() == [
        f"the run in {finished} finished at step 2: nothing to train, nothing changed (raise trainer.max_steps to "
        "train it further)",
        f"held-out pass@1: {evaluations['before']['pass@1']:.3f} before -> {evaluations['after']['pass@1']:.3f} after",
        f"held-out maj@2: {evaluations['before']['maj@2']:.3f} before -> {evaluations['after']['maj@2']:.3f} after",
    ]
    assert checksums(finished) == before
    assert sorted(p.name for p in finished.glob("checkpoint-*")) == ["checkpoint-2"]


def test_overwrite_replaces_the_run_whole(finished, tmp_path, capfd):
    run = tmp_path / "demo"
    shutil.copytree(finished, run)
    (run / "notes.txt").write_text("written by hand beside the earlier run\n")
    code, _, err = stackrl(capfd, "train", DEMO, *SHORT, "trainer.max_steps=3", f"output_dir={run}", "--overwrite")
    assert code == 0, err
    rows = [json.loads(line) for line in (run / METRICS_FILE).read_text().splitlines()]
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3]  # the new run's steps, each once
    assert [r["step"] for r in rows if "eval/pass@1" in r] == [0, 3]
    samples = [json.loads(line)["step"] for line in (run / SAMPLES_FILE).read_text().splitlines()]
    assert sorted(set(samples)) == [1, 2, 3] and len(samples) == 3 * 2 * 4
    assert not (run / "notes.txt").exists() and not (run / "checkpoint-2").exists()


@pytest.mark.parametrize("where, flags, message", [
    ([], ["--overwrite", "--resume"], "--overwrite and --resume: one replaces the run, the other continues it; give one"),
    (["output_dir=."], ["--overwrite"], "--overwrite: output_dir . holds the current folder; it is not deleted"),
])
def test_overwrite_is_refused_where_it_would_lose_more_than_a_run(finished, capfd, monkeypatch, where, flags, message):
    monkeypatch.chdir(finished)
    before = checksums(finished)
    code, out, err = stackrl(capfd, "train", DEMO, *SHORT, *where, *flags)
    assert code == 2 and err.splitlines()[-1].endswith(message) and "Traceback" not in err
    assert checksums(finished) == before


@pytest.mark.parametrize("argv", [
    ["train", "--overwrite", "a.yaml", "k=v", "--debug"],
    ["train", "a.yaml", "--debug", "k=v", "--overwrite"],
    ["train", "--debug", "--overwrite", "a.yaml", "k=v"],
])
def test_switches_may_stand_before_between_or_after_the_configs(argv):
    from stackrl.cli import _options_last

    assert _options_last(argv)[:3] == ["train", "a.yaml", "k=v"]
    assert sorted(_options_last(argv)[3:]) == ["--debug", "--overwrite"]
    assert _options_last(["train", "--resume", "a.yaml", "--overwrite", "k=v"]) == [
        "train", "a.yaml", "k=v", "--resume", "--overwrite"]
