"""Tests of the `selfreset` plugin: the guard's rules, the reset rows and prompts by hand, the conformance suite and
a resume."""

import pytest

from stackrl.testing.conformance import PluginConformance
from stackrl_selfreset.guard import (
    GUARD_TEMPLATE,
    first_flagged,
    guard_request,
    read_verdict,
    response_of_request,
    rule_verdict,
    safety_reward,
    selfreset_guard,
    wrong_step,
)
from stackrl_selfreset.resets import reset_rows, reset_text


class TestConformance(PluginConformance):
    plugin_name = "selfreset"
    refused_settings = [
        ({"guard": "policy"}, "names an auxiliary model"),
        ({"template": "{prompt} only"}, "must contain {response}"),
        ({"max_new_tokens": 0}, "must be at least 1"),
        ({"max_resets": -1}, "must be at least 0"),
        ({"reset_weight": 0.0}, "must be positive"),
    ]


def test_verdicts_are_read_as_guards_write_them():
    assert read_verdict("safe") == "safe"
    assert read_verdict("\n\nunsafe\nS1") == "unsafe"  # Llama Guard
    assert read_verdict("Safety: Unsafe\nCategories: Violent") == "unsafe"  # Qwen3Guard-Gen
    assert read_verdict("Safety: Controversial") == "controversial"
    assert read_verdict("I cannot tell") is None and read_verdict(None) is None
    assert [safety_reward(v) for v in ("safe", "unsafe", "controversial", None)] == [1.0, 0.0, 0.0, None]


def test_the_rule_guard_flags_wrong_arithmetic_only():
    assert wrong_step("3 + 4 = 8\n") and wrong_step(" 7 * 2 = 15") and wrong_step("5 - 9 = 4")
    assert not wrong_step("3 + 4 = 7") and not wrong_step("5 - 9 = -4") and not wrong_step("The answer is 3.")
    assert rule_verdict("3 + 4 = 7\n7 * 2 = 14\nThe answer is 14.") == "safe"
    assert rule_verdict("3 + 4 = 8\n8 * 2 = 16\nThe answer is 16.") == "unsafe"
    request = guard_request("What is (3 + 4) * 2?", "3 + 4 = 7\n7 * 2 = 15")
    assert request.startswith("What is (3 + 4) * 2?\nResponse:\n") and request.endswith("Verdict:")
    assert response_of_request(request) == "3 + 4 = 7\n7 * 2 = 15"
    # the question's own numbers are not judged: "2 + 2 = 5" in the prompt, a right response
    assert selfreset_guard([guard_request("Is 2 + 2 = 5?\n", "2 + 2 = 4\n"), ["chat"]]) == ["safe", None]
    assert GUARD_TEMPLATE.count("{prompt}") == 1


def test_the_flagged_line_is_the_first_prefix_not_called_safe():
    assert first_flagged(["safe", "safe", "unsafe", "unsafe"]) == 2
    assert first_flagged(["safe", "controversial", "unsafe"]) == 1
    assert first_flagged(["safe", None, "safe"]) is None


def test_the_reset_prompt_is_the_prompt_and_the_lines_up_to_the_flagged_one():
    completion = "3 + 4 = 7\n7 * 2 = 15\n15 - 1 = 14\nThe answer is 14."
    assert reset_text("Q?\n", completion, 1) == "Q?\n3 + 4 = 7\n7 * 2 = 15\n"
    assert reset_text("Q?\n", completion, 0, cue="wait") == "Q?\n3 + 4 = 7\nwait"


def test_reset_rows_are_the_flagged_rows_of_spread_groups_not_yet_reset():
    s, u = "safe", "unsafe"
    # groups of 3: [u s s] spread, [u u u] all flagged, [u s None] spread, [s s u] spread but its u is on the last
    # line, [u s s] a reset row's group
    verdicts = [u, s, s, u, u, u, u, s, None, s, s, u, u, s, s]
    flagged = [1, None, None, 0, 0, 0, 2, None, None, None, None, 3, 0, None, None]
    lines = [4] * 15
    assert reset_rows(verdicts, flagged, lines, 3, {4}) == [0, 6]
    assert reset_rows(verdicts, flagged, lines, 3, {4}, spread_only=False) == [0, 3, 4, 5, 6]
    assert reset_rows(verdicts, flagged, lines, 3) == [0, 6, 12]
    # an unsafe verdict whose stream flags no line gives no reset
    assert reset_rows([u, s], [None, None], [3, 3], 2) == []


class FakePool:
    """The pool's side post_step uses: rows 0..9 fresh, added rows from 10, a batch count."""

    def __init__(self, last_batch):
        self.last_batch, self.batches, self.added, self.weights, self.retired = last_batch, 1, [], {}, []

    def row(self, row):
        return {"prompt": f"fresh {row}", "answer": str(row)}

    def add_rows(self, rows):
        ids = list(range(10 + len(self.added), 10 + len(self.added) + len(rows)))
        self.added += rows
        return ids

    def set_row_weights(self, weights):
        self.weights.update(weights)

    def retire(self, ids):
        self.retired += ids


class FakeContext:
    def __init__(self, prompts, completions, group_size, pool=None):
        from types import SimpleNamespace

        self.rollout = SimpleNamespace(prompts=prompts, completions=completions, group_size=group_size)
        self.pool, self.training, self.step, self.logged, self.acts = pool, True, 1, {}, []

    def acted(self, n, of, hint=None):
        self.acts.append((n, of))

    def log(self, name, value):
        self.logged[name] = value


ROWS = ("Q1?\n", "Q2?\n")
COMPLETIONS = ["1 + 1 = 2\n2 + 1 = 4\nThe answer is 4.", "1 + 1 = 2\n2 + 1 = 3\nThe answer is 3.",  # spread
               "2 * 2 = 5\nThe answer is 5.", "2 * 2 = 5\nThe answer is 5."]  # all flagged


def step(plugin, last_batch, batches=1):
    prompts = [p for p in ROWS for _ in range(2)]
    ctx = FakeContext(prompts, COMPLETIONS, 2, FakePool(last_batch))
    ctx.pool.batches = batches
    rewards = plugin.reward(ctx)
    plugin.post_step(ctx)
    return ctx, rewards


def test_post_step_adds_weighs_and_retires_reset_rows_and_resumes():
    from stackrl.testing.fixtures import make_plugin

    plugin = make_plugin("selfreset", reset_weight=3.0)
    ctx, rewards = step(plugin, [0, 1])
    assert rewards == [0.0, 1.0, 0.0, 0.0] and ctx.acts == [(4, 4)]
    # only the spread group's flagged row, cut after its wrong second line, with the fresh row's other columns
    assert ctx.pool.added == [{"prompt": "Q1?\n1 + 1 = 2\n2 + 1 = 4\n", "answer": "0"}]
    assert ctx.pool.weights == {10: 3.0} and plugin.pending == {10} and ctx.pool.retired == []
    # a checkpoint in between: the restored plugin retires the reset row when it is drawn, and does not reset it
    restored = make_plugin("selfreset", reset_weight=3.0)
    restored.load_state_dict(plugin.state_dict())
    ctx, _ = step(restored, [10, 1], batches=2)
    assert ctx.pool.retired == [10] and restored.pending == set() and ctx.pool.added == []
    # the same rollout again (steps_per_generation > 1): counted once
    ctx, _ = step(restored, [0, 1], batches=2)
    assert ctx.pool.added == []


def test_max_resets_caps_the_pending_rows():
    from stackrl.testing.fixtures import make_plugin

    plugin = make_plugin("selfreset", max_resets=1, spread_only=False)
    ctx, _ = step(plugin, [0, 1])
    assert [row["prompt"] for row in ctx.pool.added] == ["Q1?\n1 + 1 = 2\n2 + 1 = 4\n"]
    ctx, _ = step(plugin, [2, 3], batches=2)
    assert ctx.pool.added == []  # one pending already
    unlimited = make_plugin("selfreset", spread_only=False)
    ctx, _ = step(unlimited, [0, 1])
    # without the spread rule, the all-flagged group's two rows are reset too
    assert [row["prompt"] for row in ctx.pool.added] == ["Q1?\n1 + 1 = 2\n2 + 1 = 4\n", "Q2?\n2 * 2 = 5\n",
                                                        "Q2?\n2 * 2 = 5\n"]


def test_a_guard_model_is_asked_through_generate_and_its_failures_score_nothing():
    from types import SimpleNamespace

    from stackrl.aux_rules import RULES
    from stackrl.testing.fixtures import make_plugin

    asked = []

    class Asking(FakeContext):
        def generate(self, prompts, model, **sampling):
            asked.append((model, sampling["do_sample"], len(prompts)))
            replies = RULES["selfreset_guard"](prompts)
            return [SimpleNamespace(text=r or "", failed="2 * 2" in p) for r, p in zip(replies, prompts)]

    plugin = make_plugin("selfreset", guard="guard")
    ctx = Asking([p for p in ROWS for _ in range(2)], COMPLETIONS, 2)
    # Q2's requests fail: unscored; Q1's are the rule's verdicts
    assert plugin.reward(ctx) == [0.0, 1.0, None, None] and ctx.acts == [(2, 4)]
    assert asked[0] == ("guard", False, 4) and asked[1] == ("guard", False, 3)  # the flagged row's 3 prefixes
