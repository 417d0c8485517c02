"""Mistakes that show once a run starts, fed through the command: exit code 2, one message naming the plugin, hook
and step (or the key), no traceback unless asked for, and an existing run folder left as it was."""

import inspect
import json
import logging
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from stackrl.cli import main
from stackrl.testing.tiny import TINY_TRAINER
from stackrl.trainer import StackTrainer
from stackrl_test_plugins import Raises

REPOSITORY = Path(__file__).resolve().parents[1]


@pytest.fixture
def config_file(tiny_model_dir, tmp_path):
    """``config_file(**sections)``: a quick CPU run config on the tiny model, written to a YAML file."""

    def write(**sections):
        tree = {
            "model": {"name_or_path": str(tiny_model_dir)},
            "data": {"size": 8},
            "rewards": {"exact_match": 1.0},
            "trainer": dict(TINY_TRAINER),
            "eval": {"size": 4, "samples": 2, "before_and_after": False},
            "output_dir": str(tmp_path / "run"),
        }
        for key, value in sections.items():
            tree[key] = {**tree[key], **value} if isinstance(value, dict) and key in tree else value
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(tree))
        return str(path)

    return write


def stackrl(capfd, *args) -> tuple[int, str, str]:
    """Run the command in this process: exit code, stdout, stderr (whatever wrote them: Python, C, a logger)."""
    code = main(list(args))
    out, err = capfd.readouterr()
    return code, out, err


@pytest.fixture
def previous_run(tmp_path):
    """A run folder from an earlier run at the config's output_dir; returns a snapshot of it to compare with."""
    run = tmp_path / "run"
    (run / "checkpoint-2").mkdir(parents=True)
    (run / "stackrl_config.yaml").write_text("the earlier run's config\n")
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n')
    (run / "checkpoint-2" / "trainer_state.json").write_text("{}")  # a save cut short: no plugin state

    def snapshot() -> dict:
        return {str(p.relative_to(run)): p.read_bytes() if p.is_file() else None for p in sorted(run.rglob("*"))}

    return snapshot


def raise_line() -> int:
    """The line of the fixture plugin ``raises`` that raises."""
    lines, first = inspect.getsourcelines(Raises._maybe_raise)
    return first + next(i for i, line in enumerate(lines) if "raise RuntimeError" in line)


@pytest.mark.parametrize("mode, shown", [("string", "'1.0' (str)"), ("bool", "True (bool)")])
def test_a_reward_that_is_not_a_number_stops_the_run(config_file, capfd, mode, shown):
    path = config_file(plugins=["bad_reward"], bad_reward={"mode": mode})
    code, _, err = stackrl(capfd, "train", path)
    assert code == 2
    assert err.splitlines()[-1] == (
        f"stackrl: error: plugin 'bad_reward' returned {shown} from hook 'reward' at step 0 (completion 3); "
        "expected a number (int or float) or None"
    )
    assert "Traceback" not in err


def test_ints_floats_and_numpy_numbers_are_rewards():
    values = StackTrainer._check_rewards("any", 0, [1, 0.5, np.float32(0.25), None], 4)
    assert values[:3].tolist() == [1.0, 0.5, 0.25] and values[3].isnan()


def test_a_plugin_failing_in_a_hook_is_named_with_its_own_line(config_file, capfd, monkeypatch):
    monkeypatch.chdir(REPOSITORY)  # the plugin's file is shown relative to the working folder
    path = config_file(plugins=["raises"], raises={"at_step": 1})
    code, _, err = stackrl(capfd, "train", path)
    assert code == 2
    assert err.splitlines()[-2:] == [
        "stackrl: error: plugin 'raises' failed in hook 'reward' at step 1: RuntimeError: deliberate failure",
        f"  at tests/fixture_plugins/stackrl_test_plugins.py:{raise_line()} in _maybe_raise",
    ]
    assert "Traceback" not in err


@pytest.mark.parametrize("flag, environment", [("--debug", "0"), (None, "1")])
def test_debug_prints_the_full_traceback(config_file, capfd, monkeypatch, flag, environment):
    monkeypatch.setenv("STACKRL_DEBUG", environment)
    path = config_file(plugins=["raises"])
    code, _, err = stackrl(capfd, "train", path, *([flag] if flag else []))
    assert code == 2
    # Both tracebacks: the plugin's own exception, then the one naming plugin and hook; the message stays last.
    assert err.count("Traceback (most recent call last)") == 2
    assert 'stackrl_test_plugins.py", line' in err and "in _maybe_raise" in err
    assert "The above exception was the direct cause" in err
    assert err.splitlines()[-2].startswith("stackrl: error: plugin 'raises' failed in hook 'reward' at step 0")


def test_eval_without_a_checkpoint_says_it_evaluated_the_base_model(
    config_file, previous_run, tiny_model_dir, tmp_path, capfd
):
    path = config_file()
    before = previous_run()
    code, out, err = stackrl(capfd, "eval", path)
    assert code == 0
    result = json.loads(out)
    assert result["model"] == str(tiny_model_dir) and result["checkpoint"] is None
    assert err.splitlines()[-1] == (
        f"evaluated the base model {tiny_model_dir}, not a trained one: no checkpoint= given "
        f"(e.g. checkpoint={tmp_path / 'run'} for the run's final weights)"
    )

    # The tiny model's folder holds full weights, as a checkpoint does.
    code, out, err = stackrl(capfd, "eval", path, f"checkpoint={tiny_model_dir}")
    assert code == 0
    assert json.loads(out)["checkpoint"] == str(tiny_model_dir)
    assert "base model" not in err
    assert previous_run() == before


@pytest.mark.parametrize(
    "trainer, message",
    [
        (
            {"save_strategy": "no"},
            "--resume: this config saves no checkpoints (trainer.save_strategy is 'no'), so there is none to resume "
            "from; turn them on with trainer.save_strategy=steps trainer.save_steps=N and train again",
        ),
        # The run folder holds only a checkpoint cut short, which is no checkpoint to resume from.
        ({"save_strategy": "steps"}, "--resume: no checkpoint in {run} (output_dir); train without --resume"),
    ],
)
def test_resume_without_a_checkpoint_is_refused_before_anything_runs(
    config_file, previous_run, tmp_path, capfd, trainer, message
):
    path = config_file(trainer=trainer)
    before = previous_run()
    code, out, err = stackrl(capfd, "train", path, "--resume")
    assert code == 2
    assert err.splitlines() == [f"stackrl: error: {path}: {message.format(run=tmp_path / 'run')}"]
    assert out == ""
    assert previous_run() == before


def test_a_run_that_cannot_start_leaves_the_run_folder_as_it_was(config_file, previous_run, capfd):
    path = config_file(data={"prompt_template": "Q: {questoin}"})  # found only when the data loads
    before = previous_run()
    # --overwrite: the earlier run would be replaced, but only by a run that starts.
    code, _, err = stackrl(capfd, "train", path, "--overwrite")
    assert code == 2
    assert err.splitlines()[-1].startswith("stackrl: error: ") and "data.prompt_template" in err.splitlines()[-1]
    assert "Traceback" not in err
    assert previous_run() == before


def test_an_error_during_training_is_the_last_thing_on_screen(config_file, capfd):
    path = config_file(plugins=["raises"], raises={"at_step": 1}, trainer={"disable_tqdm": False, "max_steps": 3})
    code, _, err = stackrl(capfd, "train", path)
    assert code == 2
    shown, message = err.split("stackrl: error: ")
    # The bar was closed first: the message starts a line of its own, and no bar is redrawn after it.
    assert shown.endswith("\n") and "1/3" in shown.rsplit("\n", 2)[-2]
    assert "\r" not in message and message.endswith("in _maybe_raise\n")


def test_the_console_says_in_the_hosts_words_what_went_past_the_models_context(
    config_file, capfd, caplog, recwarn, monkeypatch
):
    """Prompts too long for the model are named with the plugin and the setting, without transformers' reminder;
    neither TRL's warning about the host's own use of rollout_func nor the libraries' bars show."""
    monkeypatch.delenv("TRL_EXPERIMENTAL_SILENCE")  # the test kit's silencing of it, which a user's shell lacks
    # The suffix makes prompts longer than the tiny model's 512 positions; greedy_rollout then generates from them.
    path = config_file(plugins=["prompt_suffix", "greedy_rollout"], prompt_suffix={"suffix": " 1 + 2 =" * 120},
                       trainer={"disable_tqdm": False, "max_steps": 1})
    with caplog.at_level(logging.WARNING):
        code, out, err = stackrl(capfd, "train", path)
    assert code == 0, err
    said = [r.getMessage() for r in caplog.records if "passes the model's context" in r.getMessage()]
    assert len(said) == 2, said
    assert re.fullmatch(
        r"plugin 'prompt_suffix' made \(transform_prompts\) a prompt of \d+ tokens at step 0; with "
        r"trainer.max_completion_length=12 new tokens that passes the model's context of 512 tokens "
        r"\(max_position_embeddings\): shorten what prompt_suffix writes into prompts \(the templates of its section "
        r"'prompt_suffix'\) or lower trainer.max_completion_length", said[0]
    ), said[0]
    assert said[1].startswith("plugin 'greedy_rollout' asked ctx.generate for a prompt of ")
    assert "with max_new_tokens=5 new tokens" in said[1] and said[1].endswith("or lower max_new_tokens")
    assert "friendly reminder" not in caplog.text + err
    assert not [w for w in recwarn if "rollout_func" in str(w.message)]
    for bar in ("Loading weights", "Map", "Writing model shards"):
        assert bar not in out + err
    assert "1/1" in err  # the run's own bar stays


def test_the_run_folder_card_names_the_base_model_and_the_plugins(config_file, tiny_model_dir, tmp_path, capfd):
    path = config_file(plugins=["digit_reward", "prompt_suffix"], rewards={"digit_reward": 0.5},
                       trainer={"max_steps": 1, "save_strategy": "steps", "save_steps": 1})
    assert stackrl(capfd, "train", path)[0] == 0
    for folder in (tmp_path / "run", tmp_path / "run" / "checkpoint-1"):
        card = (folder / "README.md").read_text()
        assert f"- base model: `{tiny_model_dir}`" in card
        assert "- plugins, in call order: digit_reward, prompt_suffix" in card
        assert "- rewards (component and weight): digit_reward 0.5, exact_match 1.0" in card
        assert "None" not in card
