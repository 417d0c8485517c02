"""README.md, CONTRIBUTING.md and docs/hooks.md tell a new user and a new contributor what they need, and it is true:
the set-up commands and variables exist, every config key has a row, the answer helpers behave as shown, the test
kit's fixtures are the ones said to need no import, and the resume example works on the config it names.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from _pytest.fixtures import FixtureLookupError

from stackrl.cli import main
from stackrl.config import StackConfig
from stackrl.tasks.arithmetic import make_dataset

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text()
HOOKS_DOC = (ROOT / "docs" / "hooks.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()
TEMPLATE_TEST = (ROOT / "core" / "stackrl" / "template" / "test_plugin.py.tmpl").read_text()


def section(text: str, heading: str) -> str:
    """The body under ``heading`` up to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    start = text.index(f"{heading}\n")
    following = re.search(rf"^#{{1,{len(level)}}} ", text[start + len(heading) :], re.MULTILINE)
    return text[start : start + len(heading) + following.start()] if following else text[start:]


def test_readme_set_up_says_how_to_reach_the_commands_and_where_torch_comes_from():
    after_commands = section(README, "## Two commands")
    assert "source .venv/bin/activate" in after_commands
    # Every `make ... VAR=value` the README shows sets a variable the Makefile reads.
    variables = re.findall(r"^make \w+ (\w+)=\S+", README, re.MULTILINE)
    assert variables, "the README shows no make variable"
    for name in variables:
        assert re.search(rf"^{name} \?=", MAKEFILE, re.MULTILINE), f"the Makefile has no variable {name}"
        assert f"$({name})" in MAKEFILE
    # The test command prints the slowest tests and leaves the mechanism tests to `make bench`, as the README says.
    recipe = lambda target: re.search(rf"^{target}:.*\n\t(.*)", MAKEFILE, re.MULTILINE).group(1)  # noqa: E731
    assert "--durations=15" in recipe("test") and '-m "not mechanism"' in recipe("test")
    assert "-m mechanism" in recipe("bench")
    assert "--durations=15" in after_commands and "make bench" in after_commands


def test_readme_config_table_has_a_row_per_top_level_key():
    rows = re.findall(r"^\| `(\w+)` \|", section(README, "## Using it"), re.MULTILINE)
    assert [f.name for f in dataclasses.fields(StackConfig) if f.name not in rows] == []


def test_answer_helpers_behave_as_documented():
    block = re.search(r"```python\n(.*?)```", section(HOOKS_DOC, "### Completions and final answers"), re.DOTALL)
    exec(compile(block.group(1), "docs/hooks.md", "exec"), {})
    # The completions shown are the built-in task's: steps, then "The answer is N." read by the same helper.
    from stackrl.rewards import extract_answer

    rows = make_dataset(split="train", size=50, seed=0)
    for solution, answer in zip(rows["solution"], rows["answer"]):
        assert solution.splitlines()[-1] == f"The answer is {answer}."
        assert extract_answer(solution) == answer
    for name in ("extract_answer", "answer_after_phrase", "exact_match"):
        assert f"stackrl.rewards.{name}" in CONTRIBUTING


def test_label_free_leaves_no_answer_column_for_plugins(make_config):
    """docs/hooks.md: with data.label_free the answer column is absent from what reward hooks see."""
    from stackrl.testing.fixtures import train_steps

    seen = []

    def columns(hook, plugin, kwargs, result):
        seen.append(set(kwargs["ctx"].rollout.columns))

    config = make_config(["digit_reward"], data={"label_free": True}, rewards={"exact_match": None})
    train_steps(config, steps=1, monitor=columns)
    assert seen and all("answer" not in cols and "solution" in cols for cols in seen)
    assert "absent from `ctx.rollout.columns`" in section(HOOKS_DOC, "### Completions and final answers")


def test_fixtures_said_to_need_no_import_are_fixtures_and_train_steps_is_imported(request):
    said = re.search(r"its fixtures ((?:`\w+`(?:, | and )?)+) need no import", " ".join(CONTRIBUTING.split()))
    names = re.findall(r"`(\w+)`", said.group(1))
    assert set(names) == {"tiny_model_dir", "make_config", "hook_recorder"}
    for name in names:
        request.getfixturevalue(name)
        assert name in TEMPLATE_TEST
    with pytest.raises(FixtureLookupError):
        request.getfixturevalue("train_steps")
    for text in (CONTRIBUTING, TEMPLATE_TEST):
        assert "from stackrl.testing.fixtures import train_steps" in re.sub(r"\s*\n\s*#?\s*", " ", text)


def test_the_readme_resume_example_continues_a_run_of_its_config(tmp_path, capsys):
    """The README's `--resume` line, on its own config, shortened: the config saves checkpoints to resume from."""
    line = re.search(r"^stackrl train (\S+) --resume\b", README, re.MULTILINE)
    config = str(ROOT / line.group(1))
    run = tmp_path / "run"
    quick = ["trainer.per_device_train_batch_size=16", "data.size=64", "eval.before_and_after=false",
             "trainer.logging_steps=1", "trainer.disable_tqdm=true", f"output_dir={run}"]
    assert main(["train", config, *quick, "trainer.max_steps=2", "trainer.save_steps=2"]) == 0
    assert (run / "checkpoint-2").is_dir()
    first = (run / "metrics.jsonl").read_text().splitlines()
    assert main(["train", config, *quick, "trainer.max_steps=3", "trainer.save_steps=2", "--resume"]) == 0
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert lines[: len(first)] == first
    assert {json.loads(line)["step"] for line in lines[len(first) :]} == {3}  # it went on from step 2
