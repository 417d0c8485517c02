"""Bad input: each mistake gets one exact message naming what is wrong and where, and nothing saved is lost."""

import importlib.util
import os

import pytest
import yaml

from stackrl import ConfigError, PluginError, PluginHookError, Rollout
from stackrl.cli import main
from stackrl.config import load_config
from stackrl.run import build_plugin_manager
from stackrl.testing.fixtures import train_steps


def write(tmp_path, name, tree):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(tree))
    return str(path)


def test_unknown_plugin_suggests_the_closest(tmp_path):
    path = write(tmp_path, "a.yaml", {"plugins": ["digit_rewrd"]})
    with pytest.raises(PluginError) as error:
        load_config([path])
    message = str(error.value)
    assert message.startswith(f"unknown plugin 'digit_rewrd' in plugins ({path}). Did you mean 'digit_reward'? Installed: ")
    assert "group_rank" in message


def test_unknown_config_key_names_file_and_key(tmp_path):
    path = write(tmp_path, "a.yaml", {"model": {"name_or_pth": "x"}})
    with pytest.raises(ConfigError) as error:
        load_config([path])
    assert str(error.value) == f"{path}: unknown key 'model.name_or_pth'. Did you mean 'name_or_path'?"


def test_unknown_plugin_section_key(tmp_path):
    path = write(tmp_path, "a.yaml", {"plugins": ["prompt_suffix"], "prompt_suffix": {"sufix": "!"}})
    with pytest.raises(ConfigError) as error:
        load_config([path])
    assert str(error.value) == f"{path}: unknown key 'prompt_suffix.sufix'. Did you mean 'suffix'?"


def test_unknown_trainer_key(tmp_path):
    path = write(tmp_path, "a.yaml", {"trainer": {"lerning_rate": 1e-5}})
    with pytest.raises(ConfigError) as error:
        load_config([path])
    assert str(error.value) == (
        f"{path}: unknown key 'trainer.lerning_rate' (not a GRPOConfig field). Did you mean 'learning_rate'?"
    )


def test_section_of_a_plugin_not_selected(tmp_path):
    path = write(tmp_path, "a.yaml", {"group_rank": {"record": False}})
    with pytest.raises(ConfigError) as error:
        load_config([path])
    assert str(error.value) == (
        f"{path}: unknown key 'group_rank'. 'group_rank' is an installed plugin: add it to 'plugins' to use this section."
    )


def test_wrong_type_names_the_layer_and_key(tmp_path):
    base = write(tmp_path, "base.yaml", {"plugins": ["group_rank"]})
    with pytest.raises(ConfigError) as error:
        load_config([base], ["group_rank.record=maybe"])
    assert str(error.value) == (
        "command line: wrong type for 'group_rank.record': Value 'maybe' is not a valid bool (type str)"
    )


def test_missing_value(tmp_path):
    path = write(tmp_path, "a.yaml", {"plugins": ["needs_value"]})
    with pytest.raises(ConfigError) as error:
        load_config([path])
    assert str(error.value) == (
        "missing value for 'needs_value.threshold': set it in a config file or pass needs_value.threshold=VALUE "
        "on the command line"
    )


def test_hook_with_a_wrong_argument_name_is_refused_at_registration(tmp_path):
    path = write(tmp_path, "a.yaml", {"plugins": ["wrong_argument"]})
    with pytest.raises(PluginError) as error:
        build_plugin_manager(load_config([path]))
    assert str(error.value) == (
        "plugin 'wrong_argument': hook 'reward' has unknown argument 'cxt'. Did you mean 'ctx'? The spec is reward(ctx)"
    )


def test_plugin_raising_in_a_hook_is_named_with_hook_and_step(make_config):
    config = make_config(["digit_reward", "raises"], raises={"hook": "reward", "at_step": 1})
    with pytest.raises(PluginHookError) as error:
        train_steps(config, steps=3)
    first_line, frame = str(error.value).splitlines()
    assert first_line == "plugin 'raises' failed in hook 'reward' at step 1: RuntimeError: deliberate failure"
    assert frame == f"  at {error.value.frame}" and error.value.frame.endswith(" in _maybe_raise")
    assert isinstance(error.value.__cause__, RuntimeError)


def test_excluding_a_row_outside_the_rollout_is_refused_whole():
    rollout = Rollout(prompts=["a", "a"], completions=["x", "y"], prompt_ids=[[1], [1]], completion_ids=[[2], [3]],
                      columns={}, group_size=2)
    with pytest.raises(PluginError, match="exclude_from_loss: row 2 is outside the rollout of 2 rows"):
        rollout.exclude_from_loss([0, 2])
    assert rollout.excluded == set()


@pytest.mark.parametrize(
    "mode, message",
    [
        ("nan", "plugin 'bad_reward' returned nan from hook 'reward' at step 0 (completion 15)"),
        ("short", "plugin 'bad_reward' returned 15 rewards from hook 'reward' at step 0; expected 16, one per completion"),
    ],
)
def test_reward_plugin_breaking_its_contract(make_config, mode, message):
    config = make_config(["bad_reward"], bad_reward={"mode": mode}, trainer={"per_device_train_batch_size": 16})
    with pytest.raises(PluginError) as error:
        train_steps(config, steps=1)
    assert str(error.value) == message


def test_failures_leave_earlier_checkpoints_whole_and_no_partial_one(make_config, tmp_path):
    saving = {"save_strategy": "steps", "save_steps": 1}
    config = make_config(["digit_reward", "raises"], raises={"hook": "reward", "at_step": 2}, trainer=saving)
    with pytest.raises(PluginHookError):
        train_steps(config, steps=4)
    run = tmp_path / "run"
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert not list(run.rglob("*.tmp"))
    resumed = train_steps(make_config(["digit_reward"], trainer=saving), steps=3, resume=str(run / "checkpoint-2"))
    assert resumed.state.global_step == 3


def test_a_plugin_failing_to_give_its_state_writes_no_checkpoint(make_config, tmp_path):
    config = make_config(
        ["digit_reward", "raises"],
        raises={"hook": "state_dict"},
        trainer={"save_strategy": "steps", "save_steps": 1},
    )
    with pytest.raises(PluginHookError) as error:
        train_steps(config, steps=1)
    first_line = str(error.value).splitlines()[0]
    assert first_line == "plugin 'raises' failed in hook 'state_dict': RuntimeError: deliberate failure"
    assert not os.path.exists(tmp_path / "run" / "checkpoint-1")


def test_wrong_type_in_a_file(tmp_path):
    path = write(tmp_path, "a.yaml", {"model": {"quantization": "four"}})
    with pytest.raises(ConfigError) as error:
        load_config([path])
    assert str(error.value) == (
        f"{path}: wrong type for 'model.quantization': Value 'four' of type 'str' could not be converted to Integer"
    )


# -- refused by `stackrl config validate` and `stackrl train` before anything loads ---------------------------------

# (the mistake, a.yaml's keys over BASE, command-line overrides, the message). Files and paths are relative to the
# test's folder, where ROWS is a data file with the columns question and answer.
ROWS = "rows.jsonl"
HOLES = "holes.jsonl"  # three rows: the second without a question, the third without an answer
GROUPS_OF_4 = {"num_generations": 4, "per_device_train_batch_size": 4}
BASE = {"rewards": {"exact_match": 1.0}}
REFUSED = [
    ("trainer type in a file", {"trainer": {"learning_rate": "fast"}}, [],
     "a.yaml: wrong type for 'trainer.learning_rate': 'fast' is not float"),
    ("trainer type on the command line", {}, ["trainer.learning_rate=abc"],
     "command line: wrong type for 'trainer.learning_rate': 'abc' is not float"),
    ("trainer range torch refuses", {"trainer": {"adam_beta1": 1.0}}, [],
     "a.yaml: trainer.adam_beta1 must be in [0, 1), not 1.0"),
    ("trainer range sampling refuses", {}, ["trainer.temperature=0"],
     "command line: trainer.temperature must be above 0, not 0"),
    ("interpolation in a file", {"trainer": {"learning_rate": "${nope.missing}"}}, [],
     "a.yaml: cannot resolve the interpolation in 'trainer.learning_rate': Interpolation key 'nope.missing' not found"),
    ("interpolation on the command line", {}, ["eval.size=${nope.missing}"],
     "command line: cannot resolve the interpolation in 'eval.size': Interpolation key 'nope.missing' not found"),
    ("model path", {"model": {"name_or_path": "./no-such-dir"}}, [],
     "a.yaml: model.name_or_path: no model folder at './no-such-dir'"),
    ("model folder without a config", {}, ["model.name_or_path=empty-dir"],
     "command line: model.name_or_path: 'empty-dir' holds no model config (config.json or adapter_config.json)"),
    ("data file", {"data": {"source": "no-such.jsonl"}}, [],
     "a.yaml: data.source: file not found: no-such.jsonl"),
    ("data answer column", {"data": {"source": ROWS, "answer_column": "solution"}}, [],
     f"a.yaml: data.answer_column: data.source ({ROWS}) has no column 'solution'; columns: question, answer"),
    ("data template field", {"data": {"prompt_template": "Q: {problem}"}}, [f"data.source={ROWS}"],
     f"a.yaml (data.prompt_template), command line (data.source): data.prompt_template names column 'problem', "
     f"which data.source ({ROWS}) lacks; columns: question, answer"),
    ("unknown skill to evaluate", {}, ["eval.skill=grade"],
     "command line: eval.skill must be one of solve, judge, repair, recheck, debate, pose, corrupt, transition, "
     "decompose, not 'grade'"),
    ("world-modelling without the built-in task", {"eval": {"skill": "transition"}}, [f"data.source={ROWS}"],
     f"a.yaml (eval.skill), command line (data.source): eval.skill transition is measured on the built-in task's "
     f"solutions (docs/roles.md); it needs data.source: arithmetic, not '{ROWS}'"),
    ("judging without the built-in task", {"eval": {"skill": "judge"}}, [f"data.source={ROWS}"],
     f"a.yaml (eval.skill), command line (data.source): eval.skill judge shows the built-in task's solutions and "
     f"slipped copies of them; it needs data.source: arithmetic, not '{ROWS}'"),
    ("repairing in chat", {"data": {"chat": True}}, ["eval.skill=repair"],
     "command line (eval.skill), a.yaml (data.chat): eval.skill repair writes plain-text role prompts "
     "(docs/roles.md); it needs data.chat: false"),
    ("plugin config raising in __post_init__", {"plugins": ["needs_value"], "needs_value": {"threshold": 2.0}}, [],
     "a.yaml: plugin 'needs_value' rejected its settings (section 'needs_value'): ValueError: threshold must lie "
     "in [0, 1], not 2.0"),
    ("plugin constructor raising", {"plugins": ["digit_reward", "raises"]}, ["raises.hook=__init__"],
     "command line: plugin 'raises' rejected its settings (section 'raises'): RuntimeError: deliberate failure"),
    ("a plugin's own ConfigError", {"plugins": ["covo"]}, ["covo.max_steps=0"],
     "command line: covo.max_steps must be at least 1, not 0"),
    ("num_generations not dividing the batch", {"trainer": {"per_device_train_batch_size": 3, "num_generations": 4}},
     [], "a.yaml: trainer.num_generations: generation_batch_size (3) must be divisible by num_generations (4)."),
    ("quantization without lora", {}, ["model.quantization=4"],
     "command line: model.quantization needs model.lora: a quantized model trains only through an adapter"),
    ("weight for a component the run lacks", {"plugins": ["digit_reward"]}, ["rewards.digit_rewards=2"],
     "command line: rewards.digit_rewards: no reward component of that name in this run; available: exact_match, "
     "digit_reward"),
    ("label_free with exact_match", {}, ["data.label_free=true"],
     "a.yaml (rewards.exact_match), command line (data.label_free): rewards.exact_match compares with the reference "
     "answer, but data.label_free hides it; set rewards.exact_match=null or data.label_free=false"),
    ("two claimants of an exclusive hook", {"plugins": ["digit_reward", "flat_advantage", "centered_advantage"]}, [],
     "a.yaml: plugins 'flat_advantage' and 'centered_advantage' both implement the exclusive hook "
     "'estimate_advantages'; choose one in the config with exclusive.estimate_advantages: <plugin>"),
    ("a reward component a plugin needs", {"plugins": ["covo", "trace"]}, ["rewards.exact_match=null"],
     "command line: trace.correct_reward: plugin 'trace' reads the reward component 'exact_match', which this stack "
     "lacks (it has covo); set rewards.exact_match (weight 0 computes it without training on it)"),
    # What the new capabilities read from the run: each refused by validate, not once the model is loaded.
    ("model folder without a tokenizer", {}, ["model.name_or_path=untokenized"],
     "command line: model.name_or_path: 'untokenized' holds a model but no tokenizer (none of tokenizer.json, "
     "tokenizer_config.json, tokenizer.model, spiece.model, vocab.json, vocab.txt); save the tokenizer into it "
     "(tokenizer.save_pretrained) or copy the base model's tokenizer files"),
    ("output_dir under a file", {}, ["output_dir=rows.jsonl/run"],
     "command line: output_dir: cannot create 'rows.jsonl/run': '{workdir}/rows.jsonl' is a file, not a folder"),
    ("a row with an empty prompt", {"data": {"source": HOLES}}, [],
     f"a.yaml: data.prompt_template: 1 of 3 rows of {HOLES} make an empty prompt (first: row 2); remove them or "
     "fill their question"),
    ("a YAML boolean for a word", {"trainer": {"report_to": False}}, [],
     "a.yaml: wrong type for 'trainer.report_to': False is not null or str or list[str] (YAML reads unquoted yes, "
     "no, on and off as booleans: quote the word)"),
    ("cscr's threshold below 0", {"plugins": ["cscr"]}, ["cscr.shift_threshold=-1"],
     "command line: cscr.shift_threshold: must be non-negative (nats), not -1.0"),
    ("expo's explanations above the group size", {"plugins": ["expo"], "trainer": GROUPS_OF_4},
     ["expo.explanations_per_group=5"],
     "command line (expo.explanations_per_group), a.yaml (trainer.num_generations): expo.explanations_per_group: at "
     "most the group size (trainer.num_generations=4): a group's explanations stand beside its samples, never "
     "outnumber them; not 5"),
    ("eepo on odd groups", {"plugins": ["eepo"]},
     ["trainer.num_generations=3", "trainer.per_device_train_batch_size=3"],
     "command line: eepo: trainer.num_generations must be even to split each group in two halves, not 3"),
    ("groups of one", {"plugins": ["eepo"]}, ["trainer.num_generations=1", "trainer.per_device_train_batch_size=1"],
     "command line: trainer.num_generations: GRPO requires at least 2 generations per prompt to calculate the "
     "advantages. You provided 1, which is less than the minimum required."),
    ("rise on chat prompts", {"plugins": ["rise"], "data": {"chat": True}}, [],
     "a.yaml: rise: data.chat is true, but verify prompts extend the question as plain text in the built-in task's "
     "judge format (docs/roles.md); set data.chat=false"),
    ("sec without a category column", {"plugins": ["sec"], "data": {"source": ROWS}}, [],
     f"a.yaml: sec: data.source ({ROWS}) has no column 'category', by whose values SEC draws problems; columns: "
     "question, answer"),
    ("mrrlvr without its solution column", {"plugins": ["mrrlvr"], "data": {"source": ROWS}}, [],
     f"a.yaml: mrrlvr.solution_column: data.source ({ROWS}) has no column 'solution', which the process tasks are "
     "built from; columns: question, answer"),
    ("rloop's reward missing from the stack", {"plugins": ["rloop"]}, ["rloop.reward=digit_reward"],
     "command line: rloop.reward: plugin 'rloop' reads the reward component 'digit_reward', which this stack lacks "
     "(it has exact_match); add 'digit_reward' to plugins"),
    ("a frozen teacher without a reference model", {"plugins": ["rlsd"]}, ["rlsd.teacher=reference"],
     "command line: rlsd.teacher: the frozen teacher is the reference model, which this run lacks; set trainer.beta "
     "above 0 (TRL then loads one) or use model.lora (its base is the reference)"),
    ("a plugin template naming no column", {"plugins": ["rlsd"], "rlsd": {"teacher_template": "{solutoin} {prompt}"}},
     [],
     "a.yaml: rlsd.teacher_template: the template names {solutoin}, which is neither a column of data.source "
     "(arithmetic) nor a field rlsd fills. Did you mean 'solution'? It may use: {prompt}, {question}, {answer}, "
     "{solution}, {category}"),
]
COMMANDS = {"validate": ["config", "validate"], "train": ["train"]}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """The test's folder as the working directory, with a run folder from an earlier run in it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ROWS).write_text('{"question": "1 + 1", "answer": "2"}\n')
    (tmp_path / HOLES).write_text('{"question": "1 + 1", "answer": "2"}\n{"answer": "3"}\n{"question": "2 + 2"}\n')
    (tmp_path / "empty-dir").mkdir()
    (tmp_path / "untokenized").mkdir()
    (tmp_path / "untokenized" / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "earlier-run").mkdir()
    (tmp_path / "earlier-run" / "metrics.jsonl").write_text('{"step": 1}\n')
    return tmp_path


def refused(workdir, command, tree, overrides, capsys) -> str:
    """Run the CLI on a.yaml (``tree`` over BASE, output_dir the earlier run); it must refuse cleanly, writing
    nothing. Returns the message."""
    run = workdir / "earlier-run"
    before = {path: path.read_bytes() for path in run.rglob("*")}
    (workdir / "a.yaml").write_text(yaml.safe_dump({**BASE, "output_dir": str(run), **tree}))
    code = main([*COMMANDS[command], "a.yaml", *overrides])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "Traceback" not in out + err
    assert {path: path.read_bytes() for path in run.rglob("*")} == before
    return err


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("tree, overrides, message", [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_bad_input_is_refused_before_anything_loads(workdir, command, tree, overrides, message, capsys):
    message = message.replace("{workdir}", str(workdir))
    assert refused(workdir, command, tree, overrides, capsys) == f"stackrl: error: {message}\n"


def test_training_refuses_to_measure_another_skill_than_solving(workdir, capsys):
    assert refused(workdir, "train", {}, ["eval.skill=judge"], capsys).endswith(
        "stackrl: error: command line: eval.skill judge: stackrl train measures solving while it trains; measure "
        "judge with `stackrl eval CONFIG... eval.skill=judge checkpoint=RUN`, or set eval.before_and_after=false and "
        "eval.every_steps=0\n"
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_a_logger_without_its_package_is_refused_with_the_pip_command(workdir, command, capsys):
    assert importlib.util.find_spec("trackio") is None, "this test needs a logger whose package is not installed"
    err = refused(workdir, command, {"trainer": {"report_to": ["trackio"]}}, [], capsys)
    assert (
        "stackrl: error: a.yaml: trainer.report_to: the logger 'trackio' is not installed; install it with "
        "`pip install trackio` or remove it from trainer.report_to\n"
    ) in err


def test_a_hub_model_missing_from_the_offline_cache_is_a_note(workdir, capsys):
    (workdir / "a.yaml").write_text(yaml.safe_dump(BASE))
    assert main(["config", "validate", "a.yaml", "model.name_or_path=nobody/no-such-model"]) == 0
    assert (
        "stackrl: note: command line: model.name_or_path: 'nobody/no-such-model' is not in this machine's Hugging "
        "Face cache and the hub is offline (HF_HUB_OFFLINE); the machine that starts the run needs it cached or the "
        "hub reachable\n"
    ) in capsys.readouterr().err


def test_interpolations_resolve_across_sections_and_are_type_checked(workdir, capsys):
    (workdir / "a.yaml").write_text(yaml.safe_dump({**BASE, "plugins": ["needs_value"]}))
    config = load_config(["a.yaml"], ["needs_value.threshold=0.5", "trainer.learning_rate=${needs_value.threshold}"])
    assert config.host.trainer["learning_rate"] == 0.5
    with pytest.raises(ConfigError) as error:
        load_config(["a.yaml"], ["needs_value.threshold=0.5", "eval.size=${needs_value.threshold}"])
    assert str(error.value).startswith("command line: wrong type for 'eval.size': Value '0.5' of type 'float'")
