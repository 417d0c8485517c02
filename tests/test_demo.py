"""The main job and the eval/plot commands, on the built-in task and model."""

import json
from pathlib import Path

from stackrl.cli import main
from stackrl.plots import METRICS_FILE, PLOTS_DIR
from stackrl.samples import SAMPLES_FILE

DEMO = str(Path(__file__).parent.parent / "configs" / "demo.yaml")
QUICK = ["trainer.max_steps=2", "trainer.logging_steps=1", "eval.size=16", "eval.samples=2", "data.size=64", "trainer.disable_tqdm=true"]


def test_demo_config_runs_and_writes_metrics_and_plots(tmp_path, capsys):
    run = tmp_path / "demo"
    assert main(["train", DEMO, *QUICK, f"output_dir={run}"]) == 0
    out = capsys.readouterr().out
    assert "held-out pass@1:" in out and f"plots in {run}/{PLOTS_DIR}" in out
    # the console shows a short table; the whole log line is in metrics.jsonl
    assert out.splitlines()[0].split() == ["step", "exact_match", "pass@1", "s/step"]
    assert "'loss'" not in out and "grad_norm" not in out
    records = [json.loads(line) for line in (run / METRICS_FILE).read_text().splitlines()]
    assert [r["step"] for r in records if "eval/pass@1" in r] == [0, 2]
    assert [r["step"] for r in records if "rewards/exact_match/mean" in r] == [1, 2]
    pngs = sorted((run / PLOTS_DIR).glob("*.png"))
    assert [p.stem for p in pngs] == ["accuracy", "completion_length", "loss", "rewards"]
    assert all(p.stat().st_size > 1000 for p in pngs)
    evaluation = json.loads((run / "eval.json").read_text())
    assert set(evaluation) == {"before", "after"}
    samples = [json.loads(line) for line in (run / SAMPLES_FILE).read_text().splitlines()]
    assert [(r["step"], r["group"]) for r in samples] == [(s, g) for s in (1, 2) for g in (0, 1) for _ in range(8)]
    assert not any("trained_prompt" in r for r in samples)  # no plugin changed a prompt

    (run / PLOTS_DIR / "rewards.png").unlink()
    assert main(["plot", str(run)]) == 0
    assert (run / PLOTS_DIR / "rewards.png").stat().st_size > 1000


def test_eval_is_reproducible_for_a_seed(capsys):
    args = ["eval", DEMO, "eval.size=24", "eval.samples=3"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert first == second
    assert first["problems"] == 24 and 0 < first["pass@1"] < 1
