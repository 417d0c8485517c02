"""Stacked configs, the config commands, and what is written next to every run and checkpoint."""

import json

import yaml

from stackrl.cli import main
from stackrl.config import load_config
from stackrl.run import CONFIG_FILE, VERSIONS_FILE
from stackrl.testing.fixtures import train_steps


def write(tmp_path, name, tree):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(tree))
    return str(path)


def test_files_stack_in_order_then_overrides(tmp_path):
    base = write(tmp_path, "base.yaml", {
        "plugins": ["digit_reward", "prompt_suffix"],
        "trainer": {"learning_rate": 1e-5, "max_steps": 10},
        "prompt_suffix": {"suffix": " A:"},
    })
    exp = write(tmp_path, "exp.yaml", {"plugins": ["prompt_suffix"], "trainer": {"max_steps": 20}})
    config = load_config([base, exp], ["trainer.learning_rate=0.001", "prompt_suffix.suffix=' B:'"])
    assert list(config.plugin_classes) == ["prompt_suffix"]  # a later file's list replaces the earlier one
    assert config.host.trainer == {"learning_rate": 0.001, "max_steps": 20}  # dicts merge key by key
    assert config.plugin_configs["prompt_suffix"].suffix == " B:"


def test_plugin_defaults_come_from_its_dataclass(tmp_path):
    config = load_config([write(tmp_path, "a.yaml", {"plugins": ["prompt_suffix"]})])
    assert config.plugin_configs["prompt_suffix"].suffix == " Answer:"
    assert config.tree.prompt_suffix.suffix == " Answer:"


def test_config_show_and_validate(tmp_path, capsys):
    path = write(tmp_path, "a.yaml", {"plugins": ["digit_reward"], "rewards": {"digit_reward": 0.5}})
    assert main(["config", "show", path, "trainer.max_steps=7"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["trainer"]["max_steps"] == 7 and shown["rewards"] == {"digit_reward": 0.5}
    assert main(["config", "validate", path]) == 0
    assert "config ok: plugins in call order: digit_reward" in capsys.readouterr().out


def test_config_validate_reports_conflicts_without_loading_a_model(tmp_path, capsys):
    path = write(tmp_path, "a.yaml", {"plugins": ["flat_advantage", "centered_advantage"],
                                      "model": {"name_or_path": "/nonexistent/model"}})
    assert main(["config", "validate", path]) == 2
    assert "both implement the exclusive hook 'estimate_advantages'" in capsys.readouterr().err


def test_plugins_command_lists_broken_plugins_without_crashing(capsys):
    assert main(["plugins", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["digit_reward"]["status"] == "ok" and rows["digit_reward"]["hooks"] == ["reward"]
    assert rows["not_importable"]["status"].startswith("broken: plugin 'not_importable'")


def test_resolved_config_and_versions_sit_next_to_run_and_checkpoints(make_config, tmp_path):
    config = make_config(["digit_reward"], trainer={"save_strategy": "steps", "save_steps": 1})
    train_steps(config, steps=1)
    for folder in (tmp_path / "run", tmp_path / "run" / "checkpoint-1"):
        saved = yaml.safe_load((folder / CONFIG_FILE).read_text())
        assert saved["plugins"] == ["digit_reward"]
        versions = json.loads((folder / VERSIONS_FILE).read_text())
        assert versions["trl"] == "1.16.0" and versions["plugins"] == {"digit_reward": "0.1.0"}


def test_label_free_hides_the_answer_from_plugins(make_config):
    config = make_config(["digit_reward"], rewards={"exact_match": None}, data={"label_free": True})
    trainer = train_steps(config, steps=1)
    assert "answer" not in trainer._rollouts["train"].columns
    assert "solution" in trainer._rollouts["train"].columns


def test_train_command_runs_and_saves(tiny_model_dir, tmp_path, capsys):
    from stackrl.testing.tiny import TINY_TRAINER

    path = write(tmp_path, "a.yaml", {
        "model": {"name_or_path": str(tiny_model_dir)},
        "data": {"size": 8},
        "plugins": ["digit_reward"],
        "trainer": {**TINY_TRAINER, "max_steps": 1},
        "output_dir": str(tmp_path / "cli-run"),
    })
    assert main(["train", path]) == 0
    assert (tmp_path / "cli-run" / "model.safetensors").exists()
