"""Venus (Afterburner's reward): the pass table, the clipped tanh speed gain and the median on hand-built numbers;
the reward hook on a scripted sandbox whose run times are given (reference and group baselines, failing programs
never timed again nor rewarded for speed, groups without an answer left alone); its refusals; the conformance
suite."""

from __future__ import annotations

import math

import pytest

import stackrl
from stackrl.blocks.sandbox import ExecResult
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_venus import efficiency
from stackrl_venus import plugin as venus_plugin
from stackrl_venus.timing import measure


class TestConformance(PluginConformance):
    plugin_name = "venus"
    plugin_settings = {"venus": {"repeats": 2}}
    refused_settings = [({"baseline": "best"}, "must be one of reference, group, not 'best'"),
                        ({"timer": "gpu"}, "must be one of cpu, wall, not 'gpu'"),
                        ({"repeats": 0}, "must be at least 1, not 0"),
                        ({"speed_weight": -0.5}, "must be non-negative, not -0.5"),
                        ({"scale": 0.0}, "must be positive, not 0.0"),
                        ({"timeout_s": 0.0}, "must be positive, not 0.0"),
                        ({"answer_column": ""}, "must name a column")]


def test_the_pass_part_is_the_authors_table_against_the_baselines_pass():
    assert efficiency.pass_reward(True, True) == 0.5  # kept passing
    assert efficiency.pass_reward(False, True) == 1.0  # a new pass
    assert efficiency.pass_reward(True, False) == -1.0  # a degradation
    assert efficiency.pass_reward(False, False) == -0.5  # still failing


def test_the_speed_gain_is_tanh_of_the_clipped_relative_gain():
    assert efficiency.speed_gain(0.010, 0.005) == pytest.approx(math.tanh(0.5))  # twice as fast
    assert efficiency.speed_gain(0.010, 0.015) == pytest.approx(math.tanh(-0.5))  # half as fast again
    assert efficiency.speed_gain(0.010, 0.040) == pytest.approx(math.tanh(-1.0))  # -3 clipped to -1
    assert efficiency.speed_gain(0.010, 0.0) == pytest.approx(math.tanh(1.0))
    assert efficiency.speed_gain(0.010, 0.005, scale=2.0) == pytest.approx(math.tanh(1.0))
    assert efficiency.speed_gain(0.010, 0.010) == 0.0


def test_a_program_reward_reads_its_time_only_when_it_passes():
    assert efficiency.program_reward(True, True, 0.005, 0.010, 0.5, 1.0) == pytest.approx(0.5 + 0.5 * math.tanh(0.5))
    # failing: the pass part alone, however fast it ran
    assert efficiency.program_reward(False, True, 0.001, 0.010, 0.5, 1.0) == -1.0
    assert efficiency.program_reward(False, True, None, 0.010, 0.5, 1.0) == -1.0
    # passing with no baseline time (the baseline failed): a new pass, nothing for speed
    assert efficiency.program_reward(True, False, 0.005, None, 0.5, 1.0) == 1.0


def test_a_programs_time_is_the_median_of_its_runs_not_the_mean():
    assert efficiency.run_time([0.010, 0.012, 0.500]) == 0.012  # the mean would be 0.174
    assert efficiency.run_time([0.004, 0.002, 0.008, 0.006]) == pytest.approx(0.005)


class ScriptedSandbox:
    """Stands in for the sandbox: each program prints its script's output and takes its script's times in turn."""

    def __init__(self, scripts: dict[str, tuple[str, list[float]]]):
        self.scripts = {program: (out, list(times)) for program, (out, times) in scripts.items()}
        self.batches: list[list[str]] = []

    def run_many(self, programs, **limits):
        assert set(limits) == {"timeout_s", "cpu_s"}
        self.batches.append(list(programs))
        results = []
        for program in programs:
            out, times = self.scripts[program]
            cpu = times.pop(0)
            results.append(ExecResult(stdout=out, stderr="", exit_code=0, signal=None, stopped="exited",
                                      completed=True, wall_s=10 * cpu, cpu_s=cpu, isolated=True))
        return results


class Rollout:
    def __init__(self, completions, columns, group_size):
        self.completions, self.columns, self.group_size = completions, columns, group_size

    def __len__(self):
        return len(self.completions)


class Context:
    def __init__(self, rollout):
        self.rollout, self.sandbox, self.logged, self.acted_on = rollout, None, {}, None

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, *, of, hint=None):
        self.acted_on = (n, of)


QUESTION = "What is (6 + 6) + 9?\n"
REFERENCE = "a = 6 + 6\nb = a + 9\nprint(b)"  # what the built-in task's program is for QUESTION
FAST, SLOW, WRONG_FAST, WRONG_SLOW = "print(21)", "slow\nprint(21)", "print(12)", "slow\nprint(12)"


def scripted(monkeypatch, scripts):
    sandbox = ScriptedSandbox(scripts)
    monkeypatch.setattr(venus_plugin.Sandbox, "of", staticmethod(lambda ctx: sandbox))
    return sandbox


def test_the_reference_baseline_rewards_by_pass_then_median_time(monkeypatch):
    sandbox = scripted(monkeypatch, {
        REFERENCE: ("21\n", [0.010, 0.011, 0.900]),  # median 0.011 (an outlier run the mean would count)
        FAST: ("21\n", [0.006, 0.050, 0.005]),  # median 0.006
        SLOW: ("21\n", [0.020, 0.022, 0.021]),  # median 0.021
        WRONG_FAST: ("12\n", [0.001]),
        WRONG_SLOW: ("12\n", [0.030]),
    })
    ctx = Context(Rollout([FAST, SLOW, WRONG_FAST, WRONG_SLOW, "x", "y"],
                          {"question": [QUESTION] * 4 + ["What is 2 + 2?\n"] * 2, "answer": ["21"] * 4 + [""] * 2},
                          group_size=4))
    plugin = make_plugin("venus", repeats=3)
    rewards = plugin.reward(ctx=ctx)
    assert rewards[0] == pytest.approx(0.5 + 0.5 * math.tanh((0.011 - 0.006) / 0.011))
    assert rewards[1] == pytest.approx(0.5 + 0.5 * math.tanh(max(-1.0, (0.011 - 0.021) / 0.011)))
    assert rewards[0] > rewards[1] > 0  # the faster passing program above the slower
    assert rewards[2] == rewards[3] == -1.0  # failing: the degradation, fast or slow
    assert rewards[4:] == [None, None]  # a group with no answer is not scored
    # one judging run of each (the reference with them), then two more rounds of the passing ones only
    assert sandbox.batches == [[FAST, SLOW, WRONG_FAST, WRONG_SLOW, REFERENCE]] + [[FAST, SLOW, REFERENCE]] * 2
    assert ctx.acted_on == (2, 6) and ctx.logged["pass_rate"] == 0.5 and ctx.logged["runs"] == 11
    assert ctx.logged["baseline_ms"] == pytest.approx(11.0)


def test_the_group_baseline_is_the_median_of_the_groups_passing_times(monkeypatch):
    scripted(monkeypatch, {FAST: ("21\n", [0.004, 0.004]), SLOW: ("21\n", [0.016, 0.016]),
                           "mid\nprint(21)": ("21\n", [0.010, 0.010]), WRONG_FAST: ("12\n", [0.001])})
    ctx = Context(Rollout([FAST, SLOW, "mid\nprint(21)", WRONG_FAST], {"question": [QUESTION] * 4,
                                                                        "answer": ["21"] * 4}, group_size=4))
    rewards = make_plugin("venus", baseline="group", repeats=2, timer="wall").reward(ctx=ctx)
    # wall times are 10x the cpu ones here; the gain is a ratio, so the same: baseline 0.100 s (the median)
    assert rewards == pytest.approx([0.5 + 0.5 * math.tanh(0.6), 0.5 + 0.5 * math.tanh(-0.6), 0.5, -1.0])


def test_a_failing_baseline_makes_a_pass_new_and_a_failure_still_failing(monkeypatch):
    scripted(monkeypatch, {"print(1)": ("1\n", [0.005]), "print(2)": ("2\n", [0.005]),
                           "bad": ("\n", [0.002])})
    ctx = Context(Rollout(["print(1)", "print(2)"], {"answer": ["1", "1"], "ref": ["bad", "bad"]}, group_size=2))
    rewards = make_plugin("venus", reference_column="ref", repeats=1).reward(ctx=ctx)
    assert rewards == [1.0, -0.5]


def test_measure_times_each_passing_program_repeats_times(monkeypatch):
    sandbox = ScriptedSandbox({"a": ("1\n", [0.1, 0.2, 0.3, 0.4]), "b": ("2\n", [0.5])})
    measured = measure(sandbox, ["a", "b"], ["1", "1"], repeats=4, timer="cpu", timeout_s=1.0, cpu_s=1.0)
    assert [(p.passed, p.times) for p in measured.programs] == [(True, [0.1, 0.2, 0.3, 0.4]), (False, [0.5])]
    assert measured.runs == 5


def facts(source="arithmetic", columns=("question", "answer")):
    from stackrl.plugin import RunFacts

    return RunFacts(max_steps=2, group_size=4, groups_per_step=2, columns=columns,
                    builtin_columns=("question", "answer"), chat=False, reference=False, source=source,
                    components=("exact_match",))


def test_a_run_without_a_reference_it_can_write_or_read_is_refused():
    with pytest.raises(stackrl.ConfigError, match="venus.reference_column: needed with data.source 'sql'"):
        make_plugin("venus").check_run(facts(source="sql", columns=("question", "answer", "solution")))
    with pytest.raises(stackrl.ConfigError, match=r"venus.reference_column: data.source \(arithmetic\) has no column 'program'"):
        make_plugin("venus", reference_column="program").check_run(facts())
    make_plugin("venus", baseline="group").check_run(facts(source="sql", columns=("question", "answer")))
