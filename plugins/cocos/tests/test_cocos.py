"""CoCoS: the accumulated reward on hand-computed turn scores; the built-in task's tests (one per line of its own
program, then the printed answer); the reward hook on a scripted sandbox (a program kept right, one fixed, one
broken, a partial fix, plain rows, rows without tests); the rollout's turns; its refusals; the conformance suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrl.blocks.sandbox import ExecResult, IOCase
from stackrl.blocks.turns import SEGMENTS_COLUMN, Segment
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.repository import load_script
from stackrl_cocos import plugin as cocos_plugin
from stackrl_cocos.rewards import accumulated, arithmetic_tests

SCRIPT = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py")


class TestConformance(PluginConformance):
    plugin_name = "cocos"
    refused_settings = [({"turns": 0}, "must be at least 1, not 0"),
                        ({"gamma": 1.5}, r"must be in \[0, 1\], not 1.5"),
                        ({"gamma": -0.1}, r"must be in \[0, 1\], not -0.1"),
                        ({"retry_instruction": "  "}, "must hold the instruction to inject"),
                        ({"timeout_s": 0.0}, "must be positive, not 0.0"),
                        ({"answer_column": ""}, "must name a column")]


def test_two_turns_keep_fix_break_and_stay_wrong_by_hand():
    # R = gamma * r1 + (r2 - r1)
    assert accumulated([1.0, 1.0], 0.5) == 0.5  # kept right
    assert accumulated([0.0, 1.0], 0.5) == 1.0  # fixed: more than kept
    assert accumulated([1.0, 0.0], 0.5) == -0.5  # broken: the penalty, below staying wrong
    assert accumulated([0.0, 0.0], 0.5) == 0.0
    assert accumulated([0.5, 1.0], 0.5) == pytest.approx(0.75)  # a partial first program finished


def test_three_turns_discount_earlier_changes():
    # 0.25 * (0.5 - 0) + 0.5 * (0 - 0.5) + 1 * (1 - 0) = 0.125 - 0.25 + 1
    assert accumulated([0.5, 0.0, 1.0], 0.5) == pytest.approx(0.875)
    assert accumulated([1.0, 1.0, 1.0], 0.5) == pytest.approx(0.25)


def test_gamma_zero_is_the_last_change_and_one_turn_is_its_score():
    assert accumulated([1.0, 0.0], 0.0) == -1.0
    assert accumulated([0.25, 0.75], 0.0) == pytest.approx(0.5)
    assert accumulated([0.75], 0.5) == 0.75
    assert accumulated([0.2, 0.4], 1.0) == pytest.approx(0.4)  # gamma 1 telescopes to the last score


def test_the_built_in_tests_check_each_line_then_the_printed_answer():
    tests = arithmetic_tests("What is ((6 + 6) * 3) - 5?\n", "31")
    assert tests == ["assert a == 12", "assert b == 36", "assert c == 31", IOCase(stdin="", expected="31")]


class ScriptedSandbox:
    """Stands in for the sandbox: a program passes the tests its script lists."""

    def __init__(self, passes: dict[str, set]):
        self.passes, self.runs = passes, 0

    def map(self, function, items):
        return [function(item) for item in items]

    def run(self, code, stdin=None, **limits):
        self.runs += 1
        program = next(p for p in self.passes if code.startswith(p))
        test = code[len(program):].strip() or "print"
        ok = test in self.passes[program]
        return ExecResult(stdout="5\n" if ok else "4\n", stderr="" if ok else "Traceback (most recent call last):\n"
                          "AssertionError", exit_code=0 if ok else 1, signal=None, stopped="exited",
                          completed=ok, wall_s=0.01, cpu_s=0.01, isolated=True)


def _context(completions, columns, group_size):
    """The benchmark's hand-built reward context (a real Rollout, the log and the activity recorded)."""
    return SCRIPT.Recorded(completions, columns, group_size)


def _segments(*texts):
    return [Segment("answer", t, 0, 1, text) for t, text in enumerate(texts)]


QUESTION = "What is (2 + 1) + 2?\n"  # tests: assert a == 3, assert b == 5, prints 5
ALL = {"assert a == 3", "assert b == 5", "print"}


def test_the_reward_hook_scores_each_turn_and_accumulates(monkeypatch):
    sandbox = ScriptedSandbox({"right": ALL, "half": {"assert a == 3"}, "wrong": set()})
    monkeypatch.setattr(cocos_plugin.Sandbox, "of", staticmethod(lambda ctx: sandbox))
    ctx = _context(["x"] * 5, {"question": [QUESTION] * 5, "answer": ["5"] * 4 + [None],
                                   SEGMENTS_COLUMN: [_segments("right", "right"), _segments("wrong", "right"),
                                                     _segments("right", "wrong"), _segments("half", "right"),
                                                     _segments("wrong", "wrong")]}, group_size=5)
    plugin = make_plugin("cocos")
    rewards = plugin.reward(ctx)
    assert plugin.last["turn_scores"][:4] == [[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [pytest.approx(1 / 3), 1.0]]
    assert rewards[:4] == [0.5, 1.0, -0.5, pytest.approx(0.5 / 3 + 2 / 3)]
    assert rewards[4] is None  # no answer: not scored
    other = _context(["x"], {"question": ["Q: How many pets?\n"], "answer": ["2"], SEGMENTS_COLUMN: [_segments("right")]}, 1)
    assert plugin.reward(other) == [None]  # a row of another task: no tests, not scored
    assert ctx.acted_on == (4, 5)
    assert ctx.logged["wrong_to_right"] == 0.5 and ctx.logged["right_to_wrong"] == 0.25
    assert ctx.logged["fix_rate"] == 1.0  # both wrong first programs were fixed
    assert ctx.logged["turn1_pass"] == 0.5 and ctx.logged["turn2_pass"] == 0.75
    assert sandbox.runs == 3 * 3  # three distinct programs, three tests each: repeats run once


def test_all_or_nothing_scores_and_plain_rows(monkeypatch):
    sandbox = ScriptedSandbox({"right": ALL, "half": {"assert a == 3"}})
    monkeypatch.setattr(cocos_plugin.Sandbox, "of", staticmethod(lambda ctx: sandbox))
    plugin = make_plugin("cocos", fine_grained=False)
    segmented = _context(["x"], {"question": [QUESTION], "answer": ["5"], SEGMENTS_COLUMN: [_segments("half", "right")]}, 1)
    assert plugin.reward(segmented) == [1.0]  # 0.5 * 0 + (1 - 0)
    plain = _context(["half", "right"], {"question": [QUESTION] * 2, "answer": ["5"] * 2}, 2)  # evaluation rows
    assert make_plugin("cocos").reward(plain) == [pytest.approx(1 / 3), 1.0]


def test_a_tests_column_replaces_the_built_in_tests(monkeypatch):
    sandbox = ScriptedSandbox({"f": {"assert f(1) == 2"}})
    monkeypatch.setattr(cocos_plugin.Sandbox, "of", staticmethod(lambda ctx: sandbox))
    plugin = make_plugin("cocos", tests_column="test_list")
    ctx = _context(["f", "f"], {"test_list": [["assert f(1) == 2", "assert f(2) == 3"], []]}, 2)
    assert plugin.reward(ctx) == [0.5, None]


class _Tokenizer:
    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


class _Generation:
    def __init__(self, prompt_ids, completion_ids):
        self.prompt_ids, self.completion_ids = prompt_ids, completion_ids
        self.text = "".join(chr(i) for i in completion_ids if i != 0)


class _GenerateContext:
    training, tokenizer, eos_token_ids, group_size = True, _Tokenizer(), [0], 1

    def __init__(self):
        self.calls = []

    def generate(self, prompts, **sampling):
        self.calls.append(prompts)
        return [_Generation(p if isinstance(p, list) else [ord(c) for c in p], [ord("p"), 0]) for p in prompts]


def test_the_rollout_writes_every_turn_after_the_masked_retry_instruction():
    ctx = _GenerateContext()
    samples = make_plugin("cocos", turns=3, retry_instruction="\nR\n", shared_first_turn=False).generate_rollout(
        ["Q"], ctx)
    assert len(ctx.calls) == 3  # one generate call a turn
    ids, mask = samples.completion_ids[0], samples.loss_mask[0]
    assert "".join(chr(i) for i in ids if i) == "p\nR\np\nR\np"
    assert mask == [1, 0, 0, 0, 1, 0, 0, 0, 1, 1]  # the programs (and the final eos) trained, the retries not
    assert [s.text for s in samples.columns[SEGMENTS_COLUMN][0]] == ["p", "p", "p"]


def test_a_shared_first_program_is_sampled_once_a_group_and_kept_out_of_the_loss():
    ctx = _GenerateContext()
    ctx.group_size = 3
    samples = make_plugin("cocos", retry_instruction="\nR\n").generate_rollout(["Q"] * 3 + ["S"] * 3, ctx)
    assert [len(prompts) for prompts in ctx.calls] == [2, 6]  # one first program a group, a retry a row
    assert ctx.calls[0] == ["Q", "S"]
    for ids, mask in zip(samples.completion_ids, samples.loss_mask):
        assert "".join(chr(i) for i in ids if i) == "p\nR\np"
        assert mask == [0, 0, 0, 0, 1, 1]  # the shared first program is context; the retry trains
    assert [s.text for s in samples.columns[SEGMENTS_COLUMN][4]] == ["p", "p"]  # both judged


def test_a_program_ends_at_the_marker_and_a_fenced_block_is_read():
    plugin = make_plugin("cocos", program_end="[DONE]")
    assert plugin.program_in("def f(x):\n    return x + 1\n[DONE]\ntrailing") == "def f(x):\n    return x + 1"
    assert make_plugin("cocos").program_in("Here:\n```python\nprint(1)\n```\n") == "print(1)"


def _run(source="arithmetic", columns=("question", "answer")):
    from stackrl.plugin import RunFacts

    return RunFacts(max_steps=2, group_size=4, groups_per_step=2, columns=columns,
                    builtin_columns=("question", "answer"), chat=False, reference=False, source=source,
                    components=("exact_match",))


def test_a_run_whose_tests_it_cannot_write_or_read_is_refused():
    import stackrl

    with pytest.raises(stackrl.ConfigError, match="cocos.tests_column: needed with data.source 'sql'"):
        make_plugin("cocos").check_run(_run(source="sql"))
    with pytest.raises(stackrl.ConfigError, match=r"cocos.tests_column: data.source \(mbpp\) has no column 'test_list'"):
        make_plugin("cocos", tests_column="test_list").check_run(_run(source="mbpp", columns=("text", "code")))
    make_plugin("cocos", tests_column="test_list").check_run(_run(source="mbpp", columns=("text", "test_list")))
    make_plugin("cocos").check_run(_run())
