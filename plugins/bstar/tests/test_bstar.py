"""B-STaR: the balance score, the threshold and temperature it chooses, and the hooks that apply them."""

import math
from types import SimpleNamespace

import pytest
import torch

from stackrl.context import Rollout
from stackrl.policy import Generation
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import StopAt, make_plugin, train_steps
from stackrl_bstar.balance import (Candidate, balance_score, best_temperature, best_threshold, query_balance,
                                   thresholds)


class TestConformance(PluginConformance):
    plugin_name = "bstar"
    plugin_settings = {"bstar": {"temperatures": [0.7, 1.3], "probe_problems": 1, "probe_samples": 2}}
    refused_settings = [
        ({"temperatures": []}, "bstar.temperatures: must list at least one temperature"),
        ({"temperatures": [0.7, 0.0]}, "bstar.temperatures: every temperature must be positive"),
        ({"n_star": 0}, "bstar.n_star: must be at least 1"),
        ({"initial_temperature": -1.0}, "bstar.initial_temperature: must be positive"),
        ({"every": 0}, "bstar.every: must be at least 1"),
        ({"probe_problems": 0}, "bstar.probe_problems: must be at least 1"),
        ({"probe_samples": 0}, "bstar.probe_samples: must be at least 1"),
        ({"reward_scale": -0.5}, "bstar.reward_scale: must be non-negative"),
    ]


def right(text, score=1.0):
    return Candidate(text, True, score)


def wrong(text, score=0.0):
    return Candidate(text, False, score)


# A query with one right text sampled twice, another right one and a wrong one.
QUERY = [right("a"), right("a"), right("b"), wrong("c")]


def test_a_query_balance_counts_distinct_kept_texts():
    """All kept: 2 distinct right of 3 distinct -> min(2/2, 1) * 2/3 (counting "a" twice would give 3/4)."""
    assert query_balance(QUERY, -math.inf, n_star=2) == pytest.approx(2 / 3)
    assert query_balance(QUERY, 0.5, n_star=2) == pytest.approx(1.0)  # the wrong one left out
    assert query_balance(QUERY, 0.5, n_star=4) == pytest.approx(0.5)  # 2 of the 4 right answers n* asks for
    assert query_balance(QUERY, 1.0, n_star=2) == 0.0  # nothing scores above 1: nothing kept


def test_the_balance_score_is_the_mean_over_queries_an_empty_one_counting_zero():
    empty = [wrong("x"), wrong("y")]
    assert balance_score([QUERY, empty], 0.5, n_star=2) == pytest.approx(0.5)
    assert balance_score([], 0.5, n_star=2) == 0.0


def test_thresholds_are_keep_all_then_each_score_but_the_highest():
    assert thresholds([[right("a", 1.2), wrong("b", 0.1)], [wrong("c", 0.1)]]) == [-math.inf, 0.1]


def test_the_threshold_with_the_highest_balance_is_chosen_and_a_tie_keeps_more():
    """Scores 1.2, 1.0, 0.3 (right, right, wrong) with n* = 1: keep all 2/3, above 0.3 (two right) 1, above 1.0 (one
    right) 1: the tie between 0.3 and 1.0 goes to the lower, which keeps more."""
    query = [right("a", 1.2), right("b", 1.0), wrong("c", 0.3)]
    assert best_threshold([query], n_star=1) == (0.3, pytest.approx(1.0))
    # A reward that ranks the wrong answer above the right ones: keeping all beats keeping the top one.
    misled = [right("a", 0.1), right("b", 0.1), wrong("c", 0.9)]
    assert best_threshold([misled], n_star=2) == (-math.inf, pytest.approx(2 / 3))


def test_the_temperature_with_the_highest_balance_is_chosen():
    """At 0.5 one right text sampled four times; at 1.0 two distinct right texts and two wrong ones. With n* = 2
    (rewards: the right answer) 0.5 reaches min(1/2, 1) * 1 = 0.5 and 1.0 reaches 1: exploration decides."""
    cold = [[right("a")] * 4]
    warm = [[right("a"), right("b"), wrong("c"), wrong("d")]]
    chosen, found = best_temperature({0.5: cold, 1.0: warm, 1.5: [[wrong("e")] * 4]}, n_star=2)
    assert chosen == 1.0
    assert found[0.5][1] == pytest.approx(0.5) and found[1.0][1] == pytest.approx(1.0) and found[1.5][1] == 0.0
    assert best_temperature({0.5: warm, 1.0: warm}, n_star=2)[0] == 0.5  # a tie: the first listed


class Recorder(SimpleNamespace):
    def __init__(self, **fields):
        super().__init__(training=True, step=0, logged={}, acts=[], **fields)

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, of, hint=None):
        self.acts.append((n, of))


def _rollout(completions, answers, group_size, rewards=None):
    return Rollout(prompts=["Q"] * len(completions), completions=completions, prompt_ids=[[1]] * len(completions),
                   completion_ids=[[2]] * len(completions), columns={"answer": answers}, group_size=group_size,
                   rewards=rewards or {})


def test_the_batch_keeps_the_rows_above_the_chosen_threshold():
    """Group 0: two right, one wrong, one unanswered; group 1 all wrong. Keeping the right ones scores (2/2 * 1) / 2
    against (2/2 * 2/4) / 2 + 0 for keeping all (n* = 2): the four others leave the loss."""
    completions = ["The answer is 3.", "x\nThe answer is 3.", "The answer is 4.", "no answer",
                   "The answer is 1.", "The answer is 2.", "The answer is 1.", "The answer is 5."]
    rollout = _rollout(completions, ["3"] * 4 + ["7"] * 4, 4)
    plugin = make_plugin("bstar", n_star=2)
    ctx = Recorder(rollout=rollout)
    advantages = torch.arange(8.0)
    assert plugin.reshape_advantages(advantages, ctx) is advantages
    assert rollout.excluded == {2, 3, 4, 5, 6, 7}
    assert ctx.acts == [(2, 8)] and ctx.logged["balance"] == pytest.approx(0.5)


def test_a_reward_component_ranks_within_the_right_answers():
    """With the component at scale 0.2 the right rows score 1.2 and 1.0: n* = 1 keeps both (a tie keeps more); the
    wrong row with a high component (0.2 * 3 = 0.6) stays below them. Without select nothing leaves the loss."""
    rollout = _rollout(["The answer is 3.", "y\nThe answer is 3.", "The answer is 9."], ["3"] * 3, 3,
                       rewards={"judge": torch.tensor([1.0, 0.0, 3.0])})
    plugin = make_plugin("bstar", n_star=1, reward="judge")
    assert plugin.needs_rewards() == {"reward": "judge"}
    plugin.reshape_advantages(torch.zeros(3), Recorder(rollout=rollout))
    assert rollout.excluded == {2}
    loose = _rollout(rollout.completions, ["3"] * 3, 3)
    ctx = Recorder(rollout=loose)
    make_plugin("bstar", n_star=1, select=False).reshape_advantages(torch.zeros(3), ctx)
    assert loose.excluded == set() and ctx.acts == [(3, 3)]


def test_the_probe_picks_the_next_temperature_and_sampling_uses_it():
    """A scripted policy answers one right text at 0.5, two distinct right texts at 1.0 and wrong ones at 2.0: the
    probe moves the sampling temperature to 1.0, and the next batch is generated at it."""
    calls = []

    def generate(prompts, temperature=None):
        calls.append((len(prompts), temperature))
        texts = {0.5: ["The answer is 3."] * len(prompts),
                 1.0: [f"{i % 2}\nThe answer is 3." for i in range(len(prompts))],
                 2.0: ["The answer is 8."] * len(prompts)}.get(temperature, ["?"] * len(prompts))
        return [Generation(prompt_ids=[1], completion_ids=[2, 3], text=t) for t in texts]

    plugin = make_plugin("bstar", temperatures=[0.5, 1.0, 2.0], n_star=2, probe_problems=1, probe_samples=4)
    rollout = _rollout(["The answer is 3."] * 4 + ["The answer is 1."] * 4, ["3"] * 4 + ["1"] * 4, 4)
    ctx = Recorder(rollout=rollout, generate=generate, pool=None, sampling_temperature=0.7)
    assert plugin.generate_rollout(["Q"], ctx).completion_ids == [[2, 3]] and calls[-1] == (1, 0.7)
    plugin.post_step(ctx)
    assert calls[1:] == [(4, 0.5), (4, 1.0), (4, 2.0)]  # the first problem only, four samples at each
    assert plugin.temperature == 1.0 and ctx.logged["chosen_temperature"] == 1.0
    plugin.generate_rollout(["Q"], ctx)
    assert calls[-1] == (1, 1.0)
    restored = make_plugin("bstar")
    restored.load_state_dict(plugin.state_dict())
    assert restored.temperature == 1.0


def test_a_resumed_run_samples_at_the_temperature_chosen_before_the_stop(make_config, tmp_path):
    """Stopped after step 1 and resumed, step 2 is sampled at the temperature the probe chose before the stop (0.5 or
    2.0; a fresh plugin would sample at the run's 1.0)."""
    trainer = {"per_device_train_batch_size": 8, "max_completion_length": 24, "max_steps": 2,
               "save_strategy": "steps", "save_steps": 1}
    config = make_config(["bstar"], output_dir=str(tmp_path / "run"), model={"name_or_path": "stackrl/arith-tiny"},
                         data={"size": 8}, trainer=trainer,
                         bstar={"temperatures": [0.5, 2.0], "probe_problems": 1, "probe_samples": 2})
    chosen = train_steps(config, callbacks=[StopAt(1)]).plugins.plugins["bstar"].temperature
    assert chosen in (0.5, 2.0)
    resumed = train_steps(config, resume=True)
    sampled = [entry["bstar/temperature"] for entry in resumed.state.log_history if "bstar/temperature" in entry]
    assert sampled[-1] == chosen, (sampled, chosen)


def test_a_group_without_an_answer_or_of_another_role_is_left_as_it_is():
    """Only group 0 (an answer, the solve role) is scored; its wrong row leaves the loss, the others stay."""
    completions = ["The answer is 3.", "The answer is 4."] * 3
    rollout = _rollout(completions, ["3", "3", None, None, "3", "3"], 2)
    rollout.columns["role"] = ["solve", "solve", "solve", "solve", "verify", "verify"]
    ctx = Recorder(rollout=rollout)
    make_plugin("bstar", n_star=1).reshape_advantages(torch.zeros(6), ctx)
    assert rollout.excluded == {1} and ctx.acts == [(1, 6)]
