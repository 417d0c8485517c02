"""What validation reports beyond a single refusal: every mistake of a pass at once, notes on settings that are valid
but will not act as written, and `--resume` on a checkpoint of another run. Through the command line, no model
loaded (tests/test_errors.py has one refusal per mistake)."""

import pytest
import torch
import yaml

from stackrl.cli import main
from stackrl.config import load_config
from stackrl.run import CONFIG_FILE
from stackrl.trainer import PLUGIN_STATE_FILE

TRAINER = {"num_generations": 4, "per_device_train_batch_size": 4, "max_steps": 5}
BASE = {"rewards": {"exact_match": 1.0}, "trainer": TRAINER}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """The test's folder as the working directory, with a data file whose third row has no answer."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rows.jsonl").write_text(
        '{"question": "1 + 1", "answer": "2"}\n{"question": "2 + 2", "answer": "4"}\n{"question": "3 + 3"}\n'
    )
    return tmp_path


def validate(workdir, tree, overrides, capsys) -> tuple[int, str, str]:
    (workdir / "a.yaml").write_text(yaml.safe_dump({**BASE, **tree}))
    code = main(["config", "validate", "a.yaml", *overrides])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_every_mistake_of_a_pass_is_reported_at_once(workdir, capsys):
    (workdir / "b.yaml").write_text(yaml.safe_dump({"eval": {"size": "many"}}))
    tree = {"model": {"name_or_pth": "x", "dtype": 16}, "trainer": {**TRAINER, "lerning_rate": 1.0}, "bogus": 1}
    (workdir / "a.yaml").write_text(yaml.safe_dump({**BASE, **tree}))
    assert main(["config", "validate", "a.yaml", "b.yaml", "log_samples=some"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "stackrl: error: a.yaml: unknown key 'bogus'.",
        "stackrl: error: a.yaml: unknown key 'trainer.lerning_rate' (not a GRPOConfig field). Did you mean "
        "'learning_rate'?",
        "stackrl: error: a.yaml: unknown key 'model.name_or_pth'. Did you mean 'name_or_path'?",
        "stackrl: error: b.yaml: wrong type for 'eval.size': Value 'many' of type 'str' could not be converted to "
        "Integer",
        "stackrl: error: command line: wrong type for 'log_samples': Value 'some' of type 'str' could not be "
        "converted to Integer",
    ]


def test_every_mistake_in_values_and_inputs_is_reported_at_once(workdir, capsys):
    tree = {"plugins": ["cscr", "rlsd"], "cscr": {"shift_threshold": -1}, "rlsd": {"clip": 0},
            "model": {"name_or_path": "./no-such-dir"}, "threads": 0}
    code, _, err = validate(workdir, tree, ["trainer.temperature=0"], capsys)
    assert code == 2
    assert err.splitlines() == [
        "stackrl: error: command line: trainer.temperature must be above 0, not 0",
        "stackrl: error: a.yaml: cscr.shift_threshold: must be non-negative (nats), not -1.0",
        "stackrl: error: a.yaml: rlsd.clip: must be positive, not 0.0",
        "stackrl: error: a.yaml: threads must be at least 1 (or unset for the default), not 0",
    ]
    code, _, err = validate(workdir, tree, ["cscr.shift_threshold=0", "rlsd.clip=1", "threads=1",
                                            "data.source=rows.jsonl"], capsys)
    assert code == 2
    assert err.splitlines() == [
        "stackrl: error: a.yaml: model.name_or_path: no model folder at './no-such-dir'",
        "stackrl: error: command line: rlsd.teacher_template: the template names {solution}, which is neither a column "
        "of data.source (rows.jsonl) nor a field rlsd fills. Did you mean 'question'? It may use: {prompt}, "
        "{question}, {answer}",
    ]


# (the setting, a.yaml's keys over BASE, command-line overrides, the note)
NOTED = [
    ("a reward weighed only after the run", {"plugins": ["digit_reward"], "rewards": {"exact_match": 1.0,
                                                                                        "digit_reward": {0: 0, 5: 1}}},
     [], "a.yaml: rewards.digit_reward: its first non-zero weight counts from step 6, after the run's last step "
         "(trainer.max_steps=5)"),
    ("score's stage II after the run", {"plugins": ["score"], "score": {"first_attempt_kl": 0}}, ["score.stage_two_step=5"],
     "command line (score.stage_two_step), a.yaml (trainer.max_steps): score.stage_two_step: stage II trains from "
     "step 6, after the run's last step (trainer.max_steps=5)"),
    ("mrrlvr's stage 2 after the run", {"plugins": ["mrrlvr"]}, [],
     "a.yaml: mrrlvr.switch_step: stage 2 (the problems) trains from step 41, after the run's last step "
     "(trainer.max_steps=5)"),
    ("an rloop iteration longer than the run", {"plugins": ["rloop"]}, ["rloop.iteration_steps=6"],
     "command line (rloop.iteration_steps), a.yaml (trainer.max_steps): rloop.iteration_steps: the first fine-tuning "
     "on the successes comes at the end from step 6, after the run's last step (trainer.max_steps=5)"),
    ("another skill than solving", {}, ["eval.skill=judge"],
     "command line: eval.skill judge: measured by `stackrl eval` only; `stackrl train` measures solving and refuses "
     "this config unless eval.before_and_after=false and eval.every_steps=0"),
    ("more groups logged than a step has", {"log_samples": 3}, [],
     "a.yaml: log_samples: 3 groups asked for, but a step's rollout holds 1 (trainer.generation_batch_size / "
     "trainer.num_generations); samples.jsonl gets 1 a logged step"),
    ("two plugins reshaping advantages", {"plugins": ["rlsd", "rlrt"]}, [],
     "a.yaml: plugins: reshape_advantages is chained in the order of plugins: rlsd reshapes GRPO's advantages, then "
     "rlrt reshapes rlsd's result"),
    ("rows without an answer", {"data": {"source": "rows.jsonl"}}, [],
     "a.yaml: data.answer_column: 1 of 3 rows of rows.jsonl have no 'answer'; the outcome rewards leave them "
     "unscored, so they train with no reward from those components"),
    ("more rows asked for than the file has", {"data": {"source": "rows.jsonl"}}, ["data.size=4"],
     "command line: data.size: 4 rows asked for, but rows.jsonl has 3; the run "
     "uses 3"),
]


@pytest.mark.parametrize("tree, overrides, note", [case[1:] for case in NOTED], ids=[case[0] for case in NOTED])
def test_settings_that_will_not_act_as_written_are_noted(workdir, tree, overrides, note, capsys):
    code, out, err = validate(workdir, tree, overrides, capsys)
    assert code == 0, err
    assert f"stackrl: note: {note}\n" in err
    assert out.startswith("config ok")


def test_a_config_that_acts_as_written_gets_no_note(workdir, capsys):
    tree = {"plugins": ["score", "rloop"], "log_samples": 1, "data": {"size": 3}, "trainer": {**TRAINER, "beta": 0.01}}
    code, _, err = validate(workdir, tree, ["score.stage_two_step=4", "rloop.iteration_steps=5"], capsys)
    assert (code, err) == (0, "")


def test_validate_says_who_claims_each_exclusive_hook(workdir, capsys):
    code, out, _ = validate(workdir, {"plugins": ["score"]}, ["score.first_attempt_kl=0"], capsys)
    assert out == ("config ok: plugins in call order: score; generate_rollout by score; estimate_advantages by "
                   "score\n")
    code, out, _ = validate(workdir, {}, [], capsys)
    assert out == ("config ok: plugins in call order: none; generate_rollout by the host (GRPO); estimate_advantages "
                   "by the host (GRPO)\n")


@pytest.mark.parametrize("word", ["no", "'no'"])
def test_save_strategy_no_means_no_quoted_or_not(workdir, word):
    (workdir / "a.yaml").write_text(f"trainer:\n  save_strategy: {word}\n")
    config = load_config(["a.yaml"])
    assert config.host.trainer["save_strategy"] == "no"
    assert "save_strategy: 'no'" in config.to_yaml()


# -- --resume on a checkpoint: the same run only, wherever --resume stands -----------------------------------------


@pytest.fixture
def checkpointed(workdir):
    """A run folder whose checkpoint was saved by a run of plugin digit_reward on groups of 4 (the checkpoint's own
    files; nothing is loaded before the check)."""
    checkpoint = workdir / "run" / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    saved = {**BASE, "plugins": ["digit_reward"], "output_dir": "run"}
    (checkpoint / CONFIG_FILE).write_text(yaml.safe_dump(saved))
    torch.save({}, checkpoint / PLUGIN_STATE_FILE)
    (workdir / "a.yaml").write_text(yaml.safe_dump(saved))
    return checkpoint


@pytest.mark.parametrize("order", ["after", "before"])
@pytest.mark.parametrize("overrides, differences", [
    (["plugins=[]"], "plugins [digit_reward] there, [] here"),
    (["trainer.num_generations=2", "trainer.per_device_train_batch_size=2"],
     "trainer.num_generations 4 there, 2 here"),
])
def test_resume_refuses_a_checkpoint_of_another_run(checkpointed, order, overrides, differences, capsys):
    files = {path: path.read_bytes() for path in checkpointed.parent.rglob("*") if path.is_file()}
    resume = ["--resume"]
    argv = ["train", *resume, "a.yaml", *overrides] if order == "before" else ["train", "a.yaml", *overrides, *resume]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.endswith(
        f"--resume: run/checkpoint-2 was saved by another run ({differences}); resume with the config it was saved "
        "with (run/checkpoint-2/stackrl_config.yaml), or train without --resume into another output_dir\n"
    ), err
    assert err.startswith("stackrl: error: command line")
    assert "Traceback" not in err
    assert {path: path.read_bytes() for path in checkpointed.parent.rglob("*") if path.is_file()} == files


def test_resume_takes_a_checkpoint_folder_given_after_it(checkpointed, capsys):
    assert main(["train", "a.yaml", "plugins=[]", "--resume", "run/checkpoint-2"]) == 2
    assert "--resume: run/checkpoint-2 was saved by another run" in capsys.readouterr().err
