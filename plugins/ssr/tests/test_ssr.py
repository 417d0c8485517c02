"""ssr: the conformance suite, what its defaults ask and read (the judge's general rules: tests/test_judges.py),
and its mechanism on the built-in judging model, stackrl/arith-skills: the live policy's judgements of its own
outputs rank right above wrong within each prompt's group (stackrl.testing.judging.JudgingMechanism), with the
verdict standing in for the 0-100 score. Its claim is about translation, which the built-in task cannot show."""

import pytest

from stackrl.blocks.judges import Mode, Scale, parse_judgement
from stackrl.tasks import RETRY_TEMPLATE
from stackrl.testing.fixtures import train_steps
from stackrl.testing.judging import JudgingConformance, JudgingMechanism, judge_prompt, read_judgement
from stackrl_ssr import SSR, SSRConfig


class TestConformance(JudgingConformance):
    plugin_name = "ssr"


class TestMechanism(JudgingMechanism):
    plugin_name = "ssr"


def test_it_asks_for_a_score_out_of_100_with_zero_for_the_wrong_language_and_reads_it():
    prompt = judge_prompt(SSR(), "4 * 2 = 8")
    assert "0 to 100" in prompt and "not in the requested language" in prompt and SSR().config.mode is Mode.generate
    assert read_judgement(SSR(), "Fluent, one slip.\nScore: 85") == 0.85
    assert read_judgement(SSR(), "Wrong language.\nScore: 0") == 0.0
    assert read_judgement(SSR(), "Score: 140") is None  # off the scale: malformed, not 1


class JudgeReplies:
    """At ssr's reward hook, the judge's replies again: greedy from the same prompts and weights, so the same."""

    def __call__(self, hook, plugin, kwargs, result):
        if hook == "reward" and plugin == "ssr":
            ctx, judge = kwargs["ctx"], SSR(self.config)._judge
            self.rewards = result
            self.replies = [g.text for g in ctx.generate(judge.prompts(ctx.rollout), max_new_tokens=48, do_sample=False)]


def test_a_run_rewards_the_judges_0_to_100_score_divided_by_100(make_config):
    """End to end on the 0-100 scale: the built-in model, asked in the retry format, solves again and ends with
    "The answer is N."; read after that phrase, N is the judge's score (the task's answers lie around 0 to 100,
    some above, which are off the scale and malformed)."""
    replies = JudgeReplies()
    settings = {"judge_template": RETRY_TEMPLATE, "verdict_prefix": "The answer is", "max_new_tokens": 48}
    replies.config = SSRConfig(**settings)
    config = make_config(["ssr"], model={"name_or_path": "stackrl/arith-skills"}, data={"label_free": True},
                         rewards={"exact_match": None, "ssr": 1.0}, ssr=settings,
                         trainer={"per_device_train_batch_size": 8, "max_completion_length": 32, "max_steps": 1})
    trainer = train_steps(config, monitor=replies)
    read = [parse_judgement(reply, Scale.score_100, "The answer is") for reply in replies.replies]
    assert replies.rewards == read
    scores = [value for value in read if value is not None]
    assert len({round(100 * v) for v in scores}) >= 3 and all(0 <= v <= 1 for v in scores)  # numbers, not 0/1
    logged = trainer.state.log_history[0]
    assert logged["ssr/judge_malformed"] == pytest.approx(read.count(None) / len(read))
    ssr = trainer._rollouts["train"].rewards["ssr"]
    assert [None if v != v else round(v, 6) for v in ssr.tolist()] == [None if v is None else round(v, 6) for v in read]
