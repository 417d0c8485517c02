"""Plugin activity: each plugin's share of what it could act on, logged per step, warned of when nothing, summed
at the end; README's headline stack acts on the built-in task."""

import json
import logging
import re
from pathlib import Path

import pytest
import yaml

from stackrl import PluginError
from stackrl.cli import main
from stackrl.context import RewardContext
from stackrl.manager import installed_plugins
from stackrl.plots import METRICS_FILE
from stackrl.testing import judging  # noqa: F401  (defines the kit's conformance suite for judge plugins)
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps

ROOT = Path(__file__).parent.parent
DEMO = str(ROOT / "configs" / "demo.yaml")


def metric(run: Path, name: str) -> list[float]:
    records = [json.loads(line) for line in (run / METRICS_FILE).read_text().splitlines()]
    return [r[name] for r in records if name in r]


def test_activity_is_the_step_share_and_the_run_ends_with_a_line_per_plugin(make_config, tmp_path, capsys):
    make_config(["digit_reward", "acts"], trainer={"max_steps": 3}, eval={"before_and_after": False})
    assert main(["train", str(tmp_path / "tiny.yaml")]) == 0
    # 1 of 4 in the reward stage and 1 of 12 after the step: 2 of 16 each step, not the mean of the two shares.
    assert metric(tmp_path / "run", "activity/acts") == [0.125, 0.125, 0.125]
    out = capsys.readouterr().out
    assert "activity: acts: 6 of 48 things it reported (12%) over the run" in out
    assert "activity: digit_reward: reported no activity" in out


def test_a_plugin_that_acts_on_nothing_is_warned_of_once(make_config, tmp_path, caplog):
    config = make_config(["digit_reward", "acts"], acts={"acted": 0}, trainer={"max_steps": 3})
    with caplog.at_level(logging.WARNING, logger="stackrl.trainer"):
        train_steps(config)
    idle = [r.message for r in caplog.records if "acted on nothing" in r.message]
    assert idle == ["acts acted on nothing up to step 1: 0 of 16 things it reported; acts.acted is 0 "
                    "(metric activity/acts)"]


def test_acting_on_more_than_there_is_is_an_error():
    ctx = RewardContext(step=3, tokenizer=None, policy=None, _log=lambda *_: None, _plugin="acts")
    with pytest.raises(PluginError, match="plugin 'acts' reported acting on 5 of 4 at step 3"):
        ctx.acted(5, of=4)


def kit_suites(suite: type) -> set[str]:
    """The names of ``suite`` and of the test kit's suites derived from it (a block's own, e.g. judging's)."""
    derived = [cls for cls in suite.__subclasses__() if cls.__module__.startswith("stackrl.testing")]
    return {suite.__name__}.union(*(kit_suites(cls) for cls in derived))


def test_every_plugin_of_the_repository_says_what_it_acts_on_and_runs_the_conformance_suite():
    names = sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file())
    installed = installed_plugins()
    silent = [name for name in names if not installed[name].load().activity.strip()]
    assert not silent, f"plugins without an `activity` line: {silent}"
    # The conformance suite's two-step training fails a plugin that does not log activity/<name> each step.
    suites = re.compile(rf"class \w+\(({'|'.join(kit_suites(PluginConformance))})\)")
    unchecked = [name for name in names if not suites.search("".join(
        path.read_text() for path in (ROOT / "plugins" / name / "tests").glob("*.py")))]
    assert not unchecked, f"plugins whose tests do not run the conformance suite: {unchecked}"


def test_an_inert_answer_extractor_is_warned_of_naming_covo_and_the_setting(make_config, caplog):
    quick = {"max_steps": 2, "per_device_train_batch_size": 16, "max_completion_length": 48}
    model = {"name_or_path": "stackrl/arith-tiny"}
    boxed = make_config(["covo"], model=model, rewards={"covo": 1.0}, covo={"answer_extractor": "boxed"}, trainer=quick)
    with caplog.at_level(logging.WARNING, logger="stackrl.trainer"):
        trainer = train_steps(boxed)
    idle = [r.message for r in caplog.records if "acted on nothing" in r.message]
    assert len(idle) == 1, idle
    assert idle[0].startswith("covo acted on nothing up to step 1: 0 of 16 completions had an answer")
    assert "covo.answer_extractor is 'boxed'" in idle[0] and re.search(r"look like 'The answer is -?\d+\.'", idle[0])
    assert trainer.activity_summary() == ["covo: 0 of 32 completions had an answer it could score (0%) over the run"]

    # Unset, the extractor follows the run's answer format: the built-in task's "The answer is N.".
    caplog.clear()
    cheap = {"curiosity": "off", "math_verify": False}  # what the reward computes from the answers is not at issue
    follows = make_config(["covo"], model=model, rewards={"covo": 1.0}, covo=cheap, trainer={**quick, "max_steps": 1})
    with caplog.at_level(logging.WARNING, logger="stackrl.trainer"):
        trainer = train_steps(follows)
    assert not [r for r in caplog.records if "acted on nothing" in r.message]
    assert trainer.activity["covo"].share > 0.5


def readme_example() -> dict:
    """The first YAML block of README.md."""
    block = re.search(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return yaml.safe_load(block)


def test_readme_headline_stack_acts_on_the_demo_task(tmp_path, capsys):
    example = readme_example()
    (tmp_path / "example.yaml").write_text(yaml.safe_dump(example))
    quick = ["trainer.max_steps=3", "trainer.logging_steps=1", "trainer.per_device_train_batch_size=32",
             "trainer.max_completion_length=48", "data.size=64", "trainer.disable_tqdm=true",
             "eval.before_and_after=false", f"output_dir={tmp_path / 'run'}"]
    assert main(["train", DEMO, str(tmp_path / "example.yaml"), *quick]) == 0
    out = capsys.readouterr().out
    for plugin in example["plugins"]:
        shares = metric(tmp_path / "run", f"activity/{plugin}")
        assert len(shares) == 3 and sum(shares) > 0, f"{plugin} acted on nothing in 3 steps of the demo: {shares}"
        assert re.search(rf"^activity: {plugin}: [1-9]\d* of \d+ ", out, re.M), out
