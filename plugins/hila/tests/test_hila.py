"""HILA: the decision a check's verdict makes, the cost-aware reward on it, the rollout of attempt and decision, and
the outer loop's pairs: exactly the deferred problems (or also the failed ones) with the expert's solution."""

import pytest
import torch

from stackrl import RewardContext, StepContext
from stackrl.policy import Generation
from stackrl.rewards import ROLE_COLUMN, VERIFY
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.heldout import WRITTEN_PROBLEMS, WRITTEN_SLIPS, written_rollout
from stackrl_hila.decisions import cost_aware_reward, deferred, learns_from
from stackrl_hila.plugin import ATTEMPT_COLUMN, PHASE

RIGHT, WRONG = WRITTEN_PROBLEMS["(4 * 2) + 3"], WRITTEN_SLIPS["(4 * 2) + 3"]
KEEP = "4 * 2 = 8 | 8 yes\n8 + 3 = 11 | 11 yes\n11 | 11 yes\nVerdict: correct"
DEFER = "4 * 2 = 8 | 9 no\nVerdict: wrong"
MUMBLE = "4 * 2 = 8 | 8 yes"  # no verdict: the attempt stands


class TestConformance(PluginConformance):
    plugin_name = "hila"
    plugin_settings = {"hila": {"every": 1, "learn_from": "deferred_and_failed"}}
    refused_settings = [
        ({"cost": -0.1}, r"hila.cost: must lie in \[0, 1\]"),
        ({"cost": 1.5}, r"hila.cost: must lie in \[0, 1\]"),
        ({"learn_from": "everything"}, "hila.learn_from: must be one of deferred, deferred_and_failed"),
        ({"decision_template": "{prompt}Check:\n"}, r"hila.decision_template: must show .*\{attempt\}"),
        ({"every": 0}, "hila.every: must be at least 1"),
        ({"max_attempt_tokens": 0}, "hila.max_attempt_tokens: must be at least 1"),
        ({"sft_learning_rate": 0.0}, "hila.sft_learning_rate: must be positive"),
        ({"sft_batch_size": 0}, "hila.sft_batch_size: must be at least 1 or null"),
    ]


def test_a_wrong_verdict_defers_and_anything_else_keeps_the_attempt():
    assert deferred(DEFER) and not deferred(KEEP) and not deferred(MUMBLE) and not deferred("")


@pytest.mark.parametrize("cost", [0.0, 0.3, 0.9])
def test_the_reward_puts_a_deferral_between_a_right_and_a_wrong_solve_by_its_cost(cost):
    right_solve = cost_aware_reward(False, True, True, cost)
    deferral = cost_aware_reward(True, False, True, cost)
    wrong_solve = cost_aware_reward(False, False, True, cost)
    assert (right_solve, deferral, wrong_solve) == (1.0, 1.0 - cost, 0.0)
    # a deferral earns the expert's correctness, whatever the attempt was; a wrong expert earns only the cost
    assert cost_aware_reward(True, True, True, cost) == 1.0 - cost
    assert cost_aware_reward(True, True, False, cost) == -cost


def test_the_supervised_phase_learns_from_deferrals_or_also_from_failures():
    assert learns_from(True, True, "deferred") and learns_from(True, False, "deferred")
    assert not learns_from(False, False, "deferred") and not learns_from(False, True, "deferred")
    assert learns_from(False, False, "deferred_and_failed") and not learns_from(False, True, "deferred_and_failed")


def _rollout(tokenizer, attempts, replies, problem="(4 * 2) + 3", group_size=None):
    rollout = written_rollout(tokenizer, [problem] * len(replies), replies, group_size=group_size or len(replies))
    rollout.columns[ATTEMPT_COLUMN] = list(attempts)
    rollout.columns[ROLE_COLUMN] = [VERIFY] * len(replies)
    return rollout


def _reward(plugin, tokenizer, rollout):
    logged, acted = {}, []
    ctx = RewardContext(step=0, tokenizer=tokenizer, policy=None, _log=logged.__setitem__, _plugin="hila",
                        _acted=lambda plugin, n, m, hint: acted.append((n, m)), rollout=rollout)
    return plugin.reward(ctx), logged, acted


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_each_row_is_scored_by_its_decision_and_the_cost(tokenizer):
    attempts = [RIGHT, RIGHT, WRONG, WRONG, RIGHT, WRONG]
    replies = [KEEP, DEFER, KEEP, DEFER, MUMBLE, MUMBLE]
    rewards, logged, acted = _reward(make_plugin("hila", cost=0.25), tokenizer, _rollout(tokenizer, attempts, replies))
    assert rewards == [1.0, 0.75, 0.0, 0.75, 1.0, 0.0]
    assert acted == [(4, 6)]  # four replies held a verdict
    assert logged["hila/deferred"] == pytest.approx(2 / 6)
    assert logged["hila/attempts_right"] == pytest.approx(3 / 6)
    assert logged["hila/deferred_wrong"] == pytest.approx(1 / 2)  # one of the two deferrals was of a wrong attempt
    assert logged["hila/wrong_deferred"] == pytest.approx(1 / 3)  # one of the three wrong attempts was deferred
    # a higher cost lowers the deferrals' reward alone
    rewards, _, _ = _reward(make_plugin("hila", cost=0.9), tokenizer, _rollout(tokenizer, attempts, replies))
    assert rewards == pytest.approx([1.0, 0.1, 0.0, 0.1, 1.0, 0.0])


def test_rows_without_an_answer_or_an_attempt_are_not_scored(tokenizer):
    rollout = _rollout(tokenizer, [RIGHT, RIGHT], [DEFER, KEEP])
    rollout.columns["answer"][1] = None
    rewards, _, acted = _reward(make_plugin("hila"), tokenizer, rollout)
    assert rewards == [0.7, None] and acted == [(1, 1)]
    plain = written_rollout(tokenizer, ["(4 * 2) + 3"] * 2, [RIGHT, WRONG])  # evaluation, or another's rollout
    rewards, _, acted = _reward(make_plugin("hila"), tokenizer, plain)
    assert rewards == [None, None] and acted == [(0, 2)]


class _Sampler:
    """A sample-stage context whose policy answers each question with its attempt and each decision prompt with
    its reply, one character a token."""

    training, step = True, 0

    def __init__(self, attempts, replies, columns):
        self.attempts, self.replies, self.rollout_columns, self.calls = list(attempts), list(replies), columns, []

    def generate(self, prompts, **sampling):
        self.calls.append((list(prompts), sampling))
        texts = self.attempts if len(self.calls) == 1 else self.replies
        return [Generation([ord(c) for c in p], [ord(c) for c in t], t) for p, t in zip(prompts, texts)]


def test_the_rollout_is_an_attempt_in_the_prompt_and_the_decision_as_the_completion():
    question = "What is (4 * 2) + 3?\n"
    ctx = _Sampler([RIGHT, WRONG], [KEEP, DEFER], {"answer": ["11", "11"], "solution": [RIGHT, RIGHT]})
    samples = make_plugin("hila", max_attempt_tokens=40).generate_rollout([question, question], ctx)
    (asked, first), (judged, second) = ctx.calls
    assert asked == [question, question] and first == {"max_new_tokens": 40}
    assert judged == [f"{question}{RIGHT}\nCheck:\n", f"{question}{WRONG}\nCheck:\n"]  # the judge format
    assert second == {}  # the decision's length is the run's
    assert samples.prompt_ids == [[ord(c) for c in p] for p in judged]
    assert samples.completion_ids == [[ord(c) for c in KEEP], [ord(c) for c in DEFER]]
    assert samples.columns == {ROLE_COLUMN: [VERIFY, VERIFY], ATTEMPT_COLUMN: [RIGHT, WRONG]}


def _post_step(plugin, tokenizer, rollout, step):
    phases, logged = [], {}
    ctx = StepContext(step=step, tokenizer=tokenizer, policy=None, _log=logged.__setitem__, _plugin="hila",
                      rollout=rollout, _phase=lambda plugin, name, contexts, targets, **options:
                      phases.append((name, contexts, targets, options)))
    plugin.post_step(ctx)
    return phases, logged


def _two_problems(tokenizer):
    """Group 1, (4 * 2) + 3: one deferral of a right attempt, one wrong attempt kept. Group 2, (3 + 5) - 2: one
    right attempt kept, one deferral of a wrong attempt."""
    other = WRITTEN_PROBLEMS["(3 + 5) - 2"]
    rollout = written_rollout(tokenizer, ["(4 * 2) + 3"] * 2 + ["(3 + 5) - 2"] * 2, [DEFER, KEEP, KEEP, DEFER])
    rollout.columns[ATTEMPT_COLUMN] = [RIGHT, WRONG, other, WRITTEN_SLIPS["(3 + 5) - 2"]]
    return rollout


def test_the_phase_trains_on_exactly_the_deferred_problems_expert_solutions(tokenizer):
    plugin = make_plugin("hila", every=2, sft_learning_rate=0.01, sft_epochs=3, sft_batch_size=5)
    rollout = _two_problems(tokenizer)
    assert _post_step(plugin, tokenizer, rollout, step=1) == ([], {"hila/new_pairs": 2.0})  # no phase at step 1
    phases, logged = _post_step(plugin, tokenizer, rollout, step=2)  # the same problems again: not added twice
    eos = [tokenizer.eos_token_id]
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"] + eos  # noqa: E731
    assert phases == [(PHASE, ["What is (4 * 2) + 3?\n", "What is (3 + 5) - 2?\n"],
                       [encode(RIGHT), encode(WRITTEN_PROBLEMS["(3 + 5) - 2"])],
                       {"learning_rate": 0.01, "epochs": 3, "batch_size": 5})]
    assert logged == {"hila/new_pairs": 0.0, "hila/pairs": 2.0} and plugin.buffer.pairs == []


def test_only_the_deferred_rows_problems_are_learned_from(tokenizer):
    """One group, (4 * 2) + 3 deferred; the other, (3 + 5) - 2, failed but kept: "deferred" learns from the first
    alone, "deferred_and_failed" from both."""
    rollout = written_rollout(tokenizer, ["(4 * 2) + 3"] * 2 + ["(3 + 5) - 2"] * 2, [DEFER, KEEP, KEEP, KEEP])
    rollout.columns[ATTEMPT_COLUMN] = [WRONG, RIGHT, WRITTEN_SLIPS["(3 + 5) - 2"], WRITTEN_PROBLEMS["(3 + 5) - 2"]]
    alone = make_plugin("hila", every=1)
    phases, _ = _post_step(alone, tokenizer, rollout, step=1)
    assert [contexts for _, contexts, _, _ in phases] == [["What is (4 * 2) + 3?\n"]]
    both = make_plugin("hila", every=1, learn_from="deferred_and_failed")
    phases, _ = _post_step(both, tokenizer, rollout, step=1)
    assert [contexts for _, contexts, _, _ in phases] == [["What is (4 * 2) + 3?\n", "What is (3 + 5) - 2?\n"]]
    nothing = make_plugin("hila", every=1)
    kept = written_rollout(tokenizer, ["(4 * 2) + 3"] * 2, [KEEP, MUMBLE])
    kept.columns[ATTEMPT_COLUMN] = [WRONG, WRONG]
    assert _post_step(nothing, tokenizer, kept, step=1) == ([], {"hila/new_pairs": 0.0, "hila/pairs": 0.0,
                                                              "warnings/hila/nothing_deferred": 1.0})


def test_the_pairs_survive_a_checkpoint(tokenizer):
    plugin = make_plugin("hila", every=5)
    _post_step(plugin, tokenizer, _two_problems(tokenizer), step=1)
    state = plugin.state_dict()
    torch.save(state, "/dev/null")  # plain values
    restored = make_plugin("hila", every=5)
    restored.load_state_dict(state)
    assert restored.buffer.pairs == plugin.buffer.pairs and len(plugin.buffer) == 2


def test_a_resumed_run_carries_on_with_the_pairs_it_saved(make_config, tmp_path):
    """The tiny random model fails every problem, so with ``deferred_and_failed`` each step adds pairs and no phase
    comes before step 5: the run resumed from step 1 saves at step 2 the pairs of step 1 followed by its own."""
    from pathlib import Path

    from stackrl.testing.fixtures import train_steps

    def run(folder, steps, resume=None):
        config = make_config(["hila"], output_dir=str(folder), hila={"every": 5, "learn_from": "deferred_and_failed"},
                             trainer={"save_strategy": "steps", "save_steps": 1, "max_steps": 2})
        train_steps(config, steps=steps, resume=resume)
        return lambda step: torch.load(Path(folder) / f"checkpoint-{step}" / "stackrl_plugins.pt",
                                       weights_only=True)["hila"]["buffer"]

    first = run(tmp_path / "first", 1)(1)
    assert first  # step 1 collected pairs
    resumed = run(tmp_path / "resumed", 2, resume=str(tmp_path / "first" / "checkpoint-1"))(2)
    assert resumed[: len(first)] == first and len(resumed) > len(first)
