"""Ctrl-C in the middle of a multi-turn rollout (score's second attempt): exit 130, the last checkpoint named,
nothing half-written, and the run resumes from it."""

import json

import yaml

import stackrl_score.plugin
from stackrl.cli import main
from stackrl.testing.tiny import TINY_TRAINER
from stackrl.trainer import PLUGIN_STATE_FILE


def test_ctrl_c_in_a_second_turn_leaves_a_resumable_run(tiny_model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    second_turn = stackrl_score.plugin.generate_turn

    def interrupted_at_step_2(trajectories, kind, ctx, **sampling):
        if ctx.step == 2:
            raise KeyboardInterrupt
        return second_turn(trajectories, kind, ctx, **sampling)

    monkeypatch.setattr(stackrl_score.plugin, "generate_turn", interrupted_at_step_2)
    (tmp_path / "a.yaml").write_text(yaml.safe_dump({
        "model": {"name_or_path": str(tiny_model_dir)},
        "data": {"size": 16},
        "plugins": ["score"],
        "score": {"first_attempt_kl": 0.0, "stage_two_step": 2},  # no KL: no reference model needed
        "rewards": {"exact_match": 1.0},
        "trainer": {**TINY_TRAINER, "max_steps": 4, "save_strategy": "steps", "save_steps": 1},
        "eval": {"before_and_after": False},
        "output_dir": "run",
    }))
    assert main(["train", "a.yaml"]) == 130
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert err.splitlines()[-2:] == [
        "stackrl: interrupted at step 2; last checkpoint: run/checkpoint-2",
        "resume with: stackrl train a.yaml --resume",
    ]
    run = tmp_path / "run"
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert all((checkpoint / PLUGIN_STATE_FILE).is_file() for checkpoint in run.glob("checkpoint-*"))
    assert not list(run.rglob("*.tmp"))
    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    assert [json.loads(line)["step"] for line in lines if "loss" in line] == [1, 2]

    monkeypatch.setattr(stackrl_score.plugin, "generate_turn", second_turn)
    assert main(["train", "a.yaml", "trainer.max_steps=3", "--resume"]) == 0
    assert (run / "model.safetensors").is_file()
