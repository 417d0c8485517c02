"""TurnSight: each tool turn's advantage scaled, never flipped, by the group-normalised gap between the policy's
log-prob of the action with and without the tool results that followed it, where the look-ahead horizons agree."""

import pytest
import torch

from stackrl.blocks.turns import SEGMENTS_COLUMN, Segment
from stackrl.context import AdvantageContext, Rollout
from stackrl.policy import Scores
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_turnsight import agreed, group_normalized, hindsight, observations, scale, teacher_context, view_signal


class TestConformance(PluginConformance):
    plugin_name = "turnsight"
    stacked_with = ("env",)  # its rows: the env plugin's default episodes (the calculator on the built-in task)
    refused_settings = [
        ({"horizons": []}, "turnsight.horizons: must be distinct positive integers"),
        ({"horizons": [1, 1]}, "turnsight.horizons: must be distinct positive integers"),
        ({"horizons": [0, 2]}, "turnsight.horizons: must be distinct positive integers"),
        ({"template": "no place"}, r"turnsight.template: must hold \{results\} once"),
        ({"alpha": -0.5}, "turnsight.alpha: must be non-negative"),
        ({"band": 1.0}, r"turnsight.band: must be in \(0, 1\)"),
    ]


# -- the rules on hand-built values ------------------------------------------------------------------------------------

def A(kind="action", turn=0, start=0, end=0):
    return Segment(kind, turn, start, end, "")


def test_a_turns_results_are_the_tokens_between_it_and_the_next_action():
    ids = [1, 2, 3, 90, 91, 4, 5, 92, 6, 7]
    segments = [A(start=0, end=3), A(turn=1, start=5, end=7), A(turn=2, start=8, end=10)]
    shown = observations(ids, segments)
    assert shown == [[90, 91], [92], []]
    assert hindsight(shown, 0, 1) == [90, 91]
    assert hindsight(shown, 0, 2) == [90, 91, 92]
    assert hindsight(shown, 0, 3) == [90, 91, 92], "a horizon past the episode's end shows what there is"
    assert hindsight(shown, 1, 3) == [92]
    assert hindsight(shown, 2, 1) == [], "the final answer has nothing after it"


def test_the_teacher_sees_prompt_then_hindsight_in_its_template_then_the_rows_tokens_up_to_the_turn():
    assert teacher_context([7, 8], [50], [90, 91], [51], [1, 2]) == [7, 8, 50, 90, 91, 51, 1, 2]


def test_a_views_signal_is_the_mean_gap_over_the_actions_tokens():
    teacher = torch.tensor([-1.0, -0.5, -2.0])
    student = torch.tensor([-1.5, -1.5, -1.0])
    assert view_signal(teacher, student) == pytest.approx((0.5 + 1.0 - 1.0) / 3)


def test_a_turn_is_kept_only_where_every_horizon_points_the_same_way():
    assert agreed([0.2, 0.4, 0.6]) == pytest.approx(0.4)
    assert agreed([-0.3, -0.1]) == pytest.approx(-0.2)
    assert agreed([0.2, -0.1, 0.3]) is None
    assert agreed([0.2, 0.0]) is None, "no direction is no agreement"
    assert agreed([0.5]) == 0.5


def test_signals_are_z_scored_over_the_kept_turns_of_the_same_group_only():
    # two groups of two rows; row 1's second turn dropped; the second group has one kept turn
    values = [[1.0, 3.0], [2.0, None], [5.0], [None, None]]
    z = group_normalized(values, 2)
    mean, std = 2.0, (2 / 3) ** 0.5
    assert z[0] == pytest.approx([(1 - mean) / std, (3 - mean) / std], rel=1e-5)
    assert z[1] == pytest.approx([0.0, 0.0], abs=1e-9)
    assert z[2] == [0.0] and z[3] == [0.0, 0.0], "a lone kept turn has no siblings to be normalised against"
    # the batch as one group would give other values
    assert group_normalized(values, 4)[0] != pytest.approx(z[0])


def test_the_scale_follows_the_advantages_sign_and_never_flips_it():
    direction = torch.tensor([2.0, -2.0, 0.0])
    assert scale(0.4, direction, 0.5, 0.5).tolist() == pytest.approx([1.2, 0.8, 1.0])
    assert scale(-0.4, direction, 0.5, 0.5).tolist() == pytest.approx([0.8, 1.2, 1.0])
    big = scale(10.0, direction, 0.5, 0.5)
    assert big.tolist() == pytest.approx([1.5, 0.5, 1.0])
    assert (big > 0).all()


# -- the hook on a hand-built rollout ----------------------------------------------------------------------------------

class CharTokenizer:
    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


def fake_logprob(context, token, t):
    """A scorer whose log-probs depend on the whole context, so each view gives its own signal."""
    return -1.0 - ((sum(context) * 7 + token * 3 + t * 11) % 13) / 10


class FakePolicy:
    def __init__(self):
        self.calls = 0

    def score(self, contexts, continuations, **options):
        self.calls += 1
        width = max(len(c) for c in continuations)
        logprobs, mask = torch.zeros(len(contexts), width), torch.zeros(len(contexts), width)
        for j, (context, ids) in enumerate(zip(contexts, continuations)):
            for t, token in enumerate(ids):
                logprobs[j, t], mask[j, t] = fake_logprob(context, token, t), 1
        return Scores(logprobs=logprobs, mask=mask)


# one group of three rows. row 0: action 0:3, result 3:5, action 5:8, result 8:9, answer 9:11;
# row 1: action 0:2, result 2:4, answer 4:6; row 2: an answer alone (no tool turn)
PROMPT = [60, 61]
IDS = [[1, 2, 3, 90, 91, 4, 5, 6, 92, 7, 8], [1, 9, 93, 94, 7, 8], [5, 5, 5]]
SEGMENTS = [
    [A(start=0, end=3), A(turn=1, start=5, end=8), A(turn=2, start=9, end=11)],
    [A(start=0, end=2), A(turn=1, start=4, end=6)],
    [A(start=0, end=3)],
]
LOSS = [[1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1], [1, 1, 0, 0, 1, 1], [1, 1, 1]]


def rollout():
    return Rollout(
        prompts=["p"] * 3, completions=["c"] * 3, prompt_ids=[PROMPT] * 3, completion_ids=[list(i) for i in IDS],
        columns={SEGMENTS_COLUMN: SEGMENTS}, group_size=3, loss_mask=LOSS,
    )


def context(plugin, rows, logs, acted):
    return AdvantageContext(
        step=0, tokenizer=CharTokenizer(), policy=FakePolicy(), _log=lambda k, v: logs.__setitem__(k, v),
        _plugin="turnsight", _acted=lambda p, n, of, hint: acted.append((n, of)), rollout=rows,
        total_reward=torch.zeros(3),
    )


def hand_signal(row, start, end, results):
    """The turn's view signal with ``results`` shown in the template 'R:{results}.', written out."""
    action = IDS[row][start:end]
    student = PROMPT + IDS[row][:start]
    teacher = PROMPT + [ord("R"), ord(":")] + results + [ord(".")] + IDS[row][:start]
    gaps = [fake_logprob(teacher, a, t) - fake_logprob(student, a, t) for t, a in enumerate(action)]
    return sum(gaps) / len(gaps)


def test_the_hook_scales_each_agreeing_tool_turn_by_its_group_z_score_and_leaves_the_rest():
    plugin = make_plugin("turnsight", horizons=[1, 2], template="R:{results}.", alpha=0.5, band=0.5)
    logs, acted = {}, []
    advantages = torch.tensor([1.0, -1.0, 0.5])
    out = plugin.reshape_advantages(advantages, context(plugin, rollout(), logs, acted))
    # hand: the three tool turns' views
    views = {
        (0, 0): [hand_signal(0, 0, 3, [90, 91]), hand_signal(0, 0, 3, [90, 91, 92])],
        (0, 1): [hand_signal(0, 5, 8, [92]), hand_signal(0, 5, 8, [92])],
        (1, 0): [hand_signal(1, 0, 2, [93, 94]), hand_signal(1, 0, 2, [93, 94])],
    }
    kept = {key: sum(v) / 2 for key, v in views.items() if all(s > 0 for s in v) or all(s < 0 for s in v)}
    assert len(kept) >= 2, f"the fake scorer should give the example at least two kept turns: {views}"
    values = torch.tensor(list(kept.values()), dtype=torch.float64)
    z = {key: ((v - values.mean()) / (values.std(unbiased=False) + 1e-6)).item() for key, v in kept.items()}
    want = torch.zeros(3, 11)
    for i, ids in enumerate(IDS):
        want[i, : len(ids)] = advantages[i]
    spans = {(0, 0): (0, 3), (0, 1): (5, 8), (1, 0): (0, 2)}
    for (i, k), value in z.items():
        sign = 1.0 if advantages[i] > 0 else -1.0
        factor = min(max(1 + 0.5 * sign * value, 0.5), 1.5)
        start, end = spans[(i, k)]
        want[i, start:end] *= factor
    assert out.shape == (3, 11)
    assert torch.allclose(out, want, atol=1e-5), (out, want)
    assert (torch.sign(out) == torch.sign(want)).all()
    assert logs["turnsight/hindsight_turns"] == 3 and logs["turnsight/agreement"] == pytest.approx(len(kept) / 3)
    changed = sum(end - start for key, (start, end) in spans.items() if key in kept and abs(z[key]) > 1e-6)
    assert acted == [(changed, sum(map(sum, LOSS)))]


def test_rows_without_the_runners_segments_are_left_to_grpo():
    plugin = make_plugin("turnsight")
    rows = rollout()
    rows.columns = {}
    acted = []
    assert plugin.reshape_advantages(torch.ones(3), context(plugin, rows, {}, acted)) is None
    assert acted == [(0, 11 + 6 + 3)]


def test_segments_of_other_kinds_are_no_tool_turns():
    plugin = make_plugin("turnsight")
    rows = rollout()
    rows.columns = {SEGMENTS_COLUMN: [[s._replace(kind="answer") for s in row] for row in SEGMENTS]}
    acted = []
    out = plugin.reshape_advantages(torch.tensor([1.0, -1.0, 0.5]), context(plugin, rows, {}, acted))
    assert acted[0][0] == 0 and torch.equal(out[0, :11], torch.ones(11))
