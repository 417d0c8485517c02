"""HeRL: the bonus, the choice of guided rows, their weight, the rubric check and guidance, and the rollout."""

from types import SimpleNamespace

import pytest
import torch

from stackrl import Rollout
from stackrl.policy import Generation
from stackrl.tasks.roles import checked_retry_prompt, judge_reply
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin, train_steps
from stackrl_herl.bonus import chosen, guided_weight, improvement_bonus
from stackrl_herl.plugin import BONUS, CHECK, GUIDED, GUIDED_REPLY
from stackrl_herl.rubric import GUIDANCE_TEMPLATE, answer_check, check_of, line_check, met_items


class TestConformance(PluginConformance):
    plugin_name = "herl"
    refused_settings = [
        ({"rubric": "judge"}, "herl.rubric: must be one of lines, answer"),
        ({"guidance_template": "{prompt}{attempt}\nTry again.\n"}, r"herl.guidance_template: must contain \{check\}"),
        ({"candidates": 0}, "herl.candidates: must be at least 1"),
        ({"temperature": 0.0}, "herl.temperature: must be above 0"),
        ({"alpha": -0.1}, "herl.alpha: must be 0 or more"),
        ({"replace": -1}, "herl.replace: must be 0 or more"),
        ({"train_on": "both"}, "herl.train_on: must be one of guided, question"),
        ({"gamma": -1.0}, "herl.gamma: must be 0 or more"),
        ({"metric": "herl"}, "herl.metric: must be a built-in outcome reward"),
    ]


# -- the numbers ------------------------------------------------------------------------------------------------------


def test_the_bonus_is_alpha_times_the_guided_gain_over_the_response():
    assert improvement_bonus(0.0, 1.0, 0.05) == pytest.approx(0.05)
    assert improvement_bonus(0.0, 0.0, 0.05) == 0.0
    assert improvement_bonus(1.0, 0.0, 0.05) == pytest.approx(-0.05)  # a worse regeneration costs
    assert improvement_bonus(0.25, 0.75, 0.2) == pytest.approx(0.1)  # a graded score: the gain, not the level


def test_better_regenerations_take_rows_first_then_equal_ones():
    assert chosen([0.0, 1.0, 1.0, 0.0], best=0.0, replace=1) == [1]
    assert chosen([0.0, 1.0, 1.0, 0.0], best=0.0, replace=3) == [1, 2, 0]
    assert chosen([0.2, 0.5, 0.9, 0.7], best=0.5, replace=2) == [2, 3]
    assert chosen([0.2, 0.5, 0.9], best=0.5, replace=3) == [2, 1]  # a worse one never takes a row
    assert chosen([0.2, 0.3], best=0.5, replace=2) == []
    assert chosen([1.0, 1.0], best=0.0, replace=0) == []


@pytest.mark.parametrize("gamma", [1.0, 0.1, 3.0])
def test_a_guided_rows_weight_is_the_gradient_of_r_over_r_plus_gamma_at_ratio_one(gamma):
    logp = torch.tensor(-1.3, requires_grad=True)
    ratio = torch.exp(logp - logp.detach())
    (ratio / (ratio + gamma)).backward()  # the authors' off-policy token objective, at the update's first pass
    assert guided_weight(gamma) == pytest.approx(logp.grad.item())  # times d log p, as an on-policy row's
    assert guided_weight(1.0) == 0.25


def test_gamma_zero_keeps_an_on_policy_rows_weight():
    assert guided_weight(0.0) == 1.0


# -- the rubric and the guidance --------------------------------------------------------------------------------------

SLIP_FIRST = "3 + 4 = 8\n8 * 2 = 16\nThe answer is 16."  # (3 + 4) * 2: the first line unmet
SLIP_ANSWER = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 15."  # every step met, the final line unmet
RIGHT = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14."


def test_a_check_marks_the_met_lines_and_stops_at_the_first_unmet_one_with_its_right_value():
    assert line_check(SLIP_FIRST) == "3 + 4 = 7 | 8 no\nVerdict: wrong"
    assert line_check(SLIP_ANSWER + "\n") == "3 + 4 = 7 | 7 yes\n7 * 2 = 14 | 14 yes\n14 | 15 no\nVerdict: wrong"
    assert met_items(line_check(SLIP_FIRST)) == 0 and met_items(line_check(SLIP_ANSWER)) == 2
    assert met_items(line_check(RIGHT)) == 3
    assert line_check("3 + 4 = 7\n7 * 2 =") is None  # cut off: no rubric to check
    assert check_of("no answer here", "lines") is None


def test_the_answer_rubric_names_the_wrong_answer():
    assert answer_check(SLIP_ANSWER) == "The final answer 15 is wrong."
    assert answer_check("I do not know") == "There is no final answer."
    assert check_of(SLIP_ANSWER, "answer") == "The final answer 15 is wrong."


def test_the_default_guidance_is_the_built_in_retry_after_a_check():
    question = "What is (3 + 4) * 2?\n"
    assert GUIDANCE_TEMPLATE.format(prompt=question, attempt=SLIP_FIRST, check=judge_reply(SLIP_FIRST)) == \
        checked_retry_prompt(question, SLIP_FIRST, judge_reply(SLIP_FIRST))


# -- the rollout, on a scripted policy ---------------------------------------------------------------------------------

Q1, Q2 = "What is (3 + 4) * 2?\n", "What is (5 + 1) * 3?\n"
GUIDED_PROMPT = lambda attempt: checked_retry_prompt(Q1, attempt, judge_reply(attempt))  # noqa: E731


class ScriptedContext:
    """A sample-stage context: the first call samples the batch, the next writes each guidance's scripted reply;
    a text's tokens are its characters."""

    group_size = 4
    training = True
    tokenizer = None

    def __init__(self, samples: list[str], replies: dict[str, str]):
        self.samples, self.replies = samples, replies
        self.rollout_columns = {"answer": ["14"] * 4 + ["18"] * 4}
        self.calls, self.logged, self.warned, self.acts = [], {}, {}, []

    def generate(self, prompts, **sampling):
        self.calls.append((list(prompts), sampling))
        texts = self.samples if len(self.calls) == 1 else [self.replies[p] for p in prompts]
        return [Generation([ord(c) for c in p], [ord(c) for c in t] + [0], t) for p, t in zip(prompts, texts)]

    def log(self, name, value):
        self.logged[name] = value

    def warn(self, name, count=1):
        self.warned[name] = count

    def acted(self, n, *, of, hint=None):
        self.acts.append((n, of))


def scripted_rollout(answers=("14", "18"), **settings):
    group1 = [SLIP_FIRST, SLIP_ANSWER, "3 + 4 = 7\n7 * 2 =", "3 + 5 = 8\n8 * 2 = 16\nThe answer is 16."]
    group2 = ["5 + 1 = 6\n6 * 3 = 18\nThe answer is 18."] * 2 + ["5 + 1 = 7\n7 * 3 = 21\nThe answer is 21."] * 2
    replies = {GUIDED_PROMPT(SLIP_FIRST): RIGHT, GUIDED_PROMPT(SLIP_ANSWER): SLIP_ANSWER,
               GUIDED_PROMPT(group1[3]): "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14."}
    ctx = ScriptedContext(group1 + group2, replies)
    ctx.rollout_columns = {"answer": [answers[0]] * 4 + [answers[1]] * 4}
    plugin = make_plugin("herl", **settings)
    return plugin, ctx, plugin.generate_rollout([Q1] * 4 + [Q2] * 4, ctx)


def text(ids):
    return "".join(map(chr, ids))


def test_a_failed_groups_responses_are_regenerated_from_their_checks_most_met_first():
    _, ctx, out = scripted_rollout()
    guidance, sampling = ctx.calls[1]
    # Only the group without a right sample; its cut-off response has no check; most rubric items met first.
    # (row 3 took 3 + 5 for 3 + 4: every line it wrote checks out, its answer is still wrong)
    assert guidance == [GUIDED_PROMPT("3 + 5 = 8\n8 * 2 = 16\nThe answer is 16."), GUIDED_PROMPT(SLIP_ANSWER),
                        GUIDED_PROMPT(SLIP_FIRST)]
    assert sampling == {"temperature": 0.3}
    assert ctx.warned == {"unchecked_responses": 1} and ctx.acts == [(1, 2)]
    assert out.columns[CHECK][:3] == [judge_reply(SLIP_FIRST), judge_reply(SLIP_ANSWER), None]
    assert out.columns[GUIDED_REPLY][:3] == [RIGHT, SLIP_ANSWER, None]
    assert ctx.logged["guided_right"] == pytest.approx(2 / 3) and ctx.logged["guided_groups"] == 0.5


def test_the_bonus_goes_to_the_responses_whose_guided_regeneration_improved_on_them():
    _, _, out = scripted_rollout(alpha=0.05)
    # row 0: its regeneration is right (+0.05); row 1: still wrong (0); row 2: unchecked (0); row 3 gave its row
    # to a guided regeneration; the right group earns nothing
    assert out.columns[BONUS] == [pytest.approx(0.05), 0.0, 0.0, 0.0] + [0.0] * 4


def test_a_right_guided_regeneration_takes_the_last_row_trained_on_its_guidance():
    _, _, out = scripted_rollout()
    assert out.columns[GUIDED] == [False, False, False, True] + [False] * 4
    # rows 3's and 0's regenerations are right: the first of them in the guidance order (most met items) takes it
    assert text(out.completion_ids[3]) == "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14.\x00"
    assert text(out.prompt_ids[3]) == GUIDED_PROMPT("3 + 5 = 8\n8 * 2 = 16\nThe answer is 16.")
    assert [text(ids) for ids in out.prompt_ids[:3] + out.prompt_ids[4:]] == [Q1] * 3 + [Q2] * 4
    assert text(out.completion_ids[0]) == SLIP_FIRST + "\x00"


def test_train_on_question_keeps_the_groups_prompt_and_replace_zero_keeps_the_samples():
    _, _, out = scripted_rollout(train_on="question")
    assert out.columns[GUIDED][3] and text(out.prompt_ids[3]) == Q1
    _, _, out = scripted_rollout(replace=0)
    assert not any(out.columns[GUIDED])
    assert out.columns[BONUS][:4] == [pytest.approx(0.05), 0.0, 0.0, pytest.approx(0.05)]


def test_a_group_without_an_answer_is_neither_regenerated_nor_scored():
    _, ctx, out = scripted_rollout(answers=(None, "18"))
    assert ctx.calls[1][0] == [] and ctx.acts == [(0, 2)]
    assert out.columns[BONUS] == [None] * 4 + [0.0] * 4 and not any(out.columns[GUIDED])


def test_candidates_caps_the_regenerations_of_a_group():
    _, ctx, _ = scripted_rollout(candidates=1)
    assert ctx.calls[1][0] == [GUIDED_PROMPT("3 + 5 = 8\n8 * 2 = 16\nThe answer is 16.")]  # the most met


# -- the reward and the advantages ------------------------------------------------------------------------------------


def rollout_with(columns):
    n = len(next(iter(columns.values())))
    return Rollout(prompts=["q"] * n, completions=["c"] * n, prompt_ids=[[1]] * n, completion_ids=[[2]] * n,
                   columns=columns, group_size=2)


def test_the_reward_is_the_bonus_column_and_none_in_evaluation():
    plugin = make_plugin("herl")
    ctx = SimpleNamespace(rollout=rollout_with({BONUS: [0.05, 0.0, None, 0.0]}))
    assert plugin.reward(ctx) == [0.05, 0.0, None, 0.0]
    assert plugin.reward(SimpleNamespace(rollout=rollout_with({"answer": ["1"] * 4}))) == [None] * 4


def test_guided_rows_advantages_carry_the_off_policy_weight():
    ctx = SimpleNamespace(rollout=rollout_with({GUIDED: [False, True, False, False]}))
    advantages = torch.tensor([0.5, 1.5, -1.0, 1.0])
    assert torch.equal(make_plugin("herl", gamma=1.0).reshape_advantages(advantages, ctx),
                       torch.tensor([0.5, 0.375, -1.0, 1.0]))
    per_token = advantages[:, None].expand(4, 3)
    assert torch.allclose(make_plugin("herl", gamma=0.1).reshape_advantages(per_token, ctx)[1],
                          torch.full((3,), 1.5 * 0.1 / 1.21))
    assert make_plugin("herl", gamma=0.0).reshape_advantages(advantages, ctx) is None


# -- the real trainer ----------------------------------------------------------------------------------------------------


def test_on_the_built_in_model_guided_rows_are_trained_on_their_guidance_with_the_bonus_in_the_reward(make_config):
    config = make_config(
        ["herl"],
        model={"name_or_path": "stackrl/arith-skills"},
        data={"options": {"categories": ["2 steps, 2-digit"]}},
        trainer={"per_device_train_batch_size": 8, "max_completion_length": 48},
    )
    trainer = train_steps(config, steps=1)
    rollout, decode = trainer._rollouts["train"], trainer.processing_class.decode
    guided = rollout.columns[GUIDED]
    assert any(guided), "no group failed: the test is void"
    for i, is_guided in enumerate(guided):
        if is_guided:
            trained_on = decode(rollout.prompt_ids[i])
            assert trained_on.startswith(rollout.prompts[i]) and trained_on.endswith("\nTry again.\n")
            assert " no\nVerdict: wrong\n" in trained_on or " yes\nVerdict: correct\n" in trained_on
        else:
            assert decode(rollout.prompt_ids[i]) == rollout.prompts[i]
    assert torch.equal(rollout.rewards["herl"], torch.tensor(rollout.columns[BONUS], dtype=rollout.rewards["herl"].dtype))
