"""The judges block: parsing judgements (malformed ones included), judge prompts, both modes on a real model."""

import pytest
import torch

from stackrl import ConfigError, RewardContext, Rollout
from stackrl.blocks.judges import Judge, JudgeSettings, Mode, Scale, parse_judgement


@pytest.mark.parametrize(
    ("text", "scale", "prefix", "expected"),
    [
        ("Yes.", Scale.yes_no, None, 1.0),
        ("The steps hold up, so no doubt: yes", Scale.yes_no, None, 1.0),  # the last verdict word counts
        ("Hmm, yes at first, but the sum is off. No.", Scale.yes_no, None, 0.0),
        ("I cannot tell.", Scale.yes_no, None, None),
        ("The answer is correct.", Scale.correct_wrong, None, 1.0),
        ("The answer is INCORRECT.", Scale.correct_wrong, None, 0.0),
        ("3 + 4 = 7\nVerdict: wrong", Scale.correct_wrong, "Verdict:", 0.0),
        ("It looks correct...\nVerdict: wrong", Scale.correct_wrong, "Verdict:", 0.0),  # only after the prefix
        ("3 + 4 = 7\nVerdict: correct\nVerdict: wrong", Scale.correct_wrong, "Verdict:", 1.0),  # the first verdict
        ("Verdict: maybe", Scale.correct_wrong, "Verdict:", None),  # a word outside the scale
        ("correct, correct, correct", Scale.correct_wrong, "Verdict:", None),  # no verdict line
        ("Fluent, one mistranslated term.\nScore: 85", Scale.score_100, "Score:", 0.85),
        ("Score: 85/100", Scale.score_100, None, 0.85),  # not the 100 of the scale
        ("Two errors, so 60", Scale.score_100, None, 0.6),
        ("Score: 0", Scale.score_100, "Score:", 0.0),
        ("Score: 140", Scale.score_100, "Score:", None),  # outside the scale
        ("Score: -5", Scale.score_100, "Score:", None),
        ("Score: excellent", Scale.score_100, "Score:", None),
    ],
)
def test_parsing_judgements_and_malformed_ones(text, scale, prefix, expected):
    assert parse_judgement(text, scale, prefix) == expected


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"judge_model": "reference"}, "sirlc.judge_model: 'reference' cannot write a judgement"),
        ({"mode": Mode.likelihood, "scale": Scale.score_100}, "score_100 needs generate"),
        ({"judge_template": "{prompt} only"}, "must contain {attempt}"),
        ({"judge_template": "{prompt {attempt}"}, "is not a format string"),
        ({"max_new_tokens": 0}, "sirlc.max_new_tokens must be at least 1"),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_the_key(settings, message):
    with pytest.raises(ConfigError, match=message.replace("{", r"\{").replace("(", r"\(")):
        Judge(JudgeSettings(**settings), "sirlc")


def rollout(prompts, completions, columns=None):
    n = len(completions)
    return Rollout(prompts, completions, [[0]] * n, [[0]] * n, columns or {}, group_size=n)


def test_judge_prompts_fill_the_template_from_the_row_and_keep_the_prompts_kind():
    judge = Judge(JudgeSettings(judge_template="[{source}] {prompt}|{attempt}|"), "ssr")
    text = rollout(["Translate: Hallo\n"], ["Hello"], {"source": ["de"]})
    assert judge.prompts(text) == ["[de] Translate: Hallo\n|Hello|"]
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Translate: Hallo"}]
    assert judge.prompts(rollout([chat], ["Hello"], {"source": ["de"]})) == [
        [{"role": "user", "content": "[de] Translate: Hallo|Hello|"}]
    ]
    with pytest.raises(ConfigError, match="judge_template names 'source', which the rollout lacks"):
        judge.prompts(rollout(["q"], ["a"]))


@pytest.fixture(scope="module")
def tiny_trainer(tiny_model_dir, tmp_path_factory):
    from stackrl.run import build_trainer
    from stackrl.testing.tiny import tiny_config

    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("judges")
    return build_trainer(tiny_config(tiny_model_dir, ["digit_reward"], tmp_dir=tmp, output_dir=str(tmp / "run")))


def judge_with(trainer, settings, batch):
    logs = {}
    ctx = RewardContext(step=0, tokenizer=trainer.processing_class, policy=trainer._shared_policy,
                        _log=logs.__setitem__, _plugin="sirlc", rollout=batch)
    return Judge(settings, "sirlc")(ctx), logs


def test_likelihood_judgements_are_the_first_verdict_words_share_of_the_two(tiny_trainer):
    settings = JudgeSettings(judge_template="{prompt}{attempt}\nCheck:\n", scale=Scale.correct_wrong,
                             mode=Mode.likelihood, verdict_prefix="Verdict:")
    batch = rollout(["What is 2 + 3?\n", "What is 4 * 4?\n"], ["2 + 3 = 5\nThe answer is 5.", "The answer is 8."])
    judged, logs = judge_with(tiny_trainer, settings, batch)
    tokenizer, policy = tiny_trainer.processing_class, tiny_trainer._shared_policy
    prompts = [f"{p}{c}\nCheck:\n" for p, c in zip(batch.prompts, batch.completions)]
    for prompt, value in zip(prompts, judged):
        totals = []
        for word in ("Verdict: correct", "Verdict: wrong"):
            ids = tokenizer(word, add_special_tokens=False)["input_ids"]
            scores = policy.score([prompt], [ids])
            totals.append((scores.logprobs * scores.mask).sum())
        assert value == pytest.approx(torch.softmax(torch.stack(totals), 0)[0].item(), abs=1e-6)
    assert logs == {"sirlc/judge_malformed": 0.0}


def test_a_judge_that_writes_nothing_readable_scores_none_and_logs_the_share(tiny_trainer):
    settings = JudgeSettings(scale=Scale.correct_wrong, verdict_prefix="Verdict:", max_new_tokens=4)
    batch = rollout(["What is 2 + 3?\n"] * 3, ["The answer is 5."] * 3)
    judged, logs = judge_with(tiny_trainer, settings, batch)
    assert judged == [None, None, None]  # the random tiny model writes no verdict line
    assert logs == {"sirlc/judge_malformed": 1.0}


def test_the_example_in_the_hook_reference_holds():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "hooks.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if "parse_judgement" in b)
    exec(compile(block, "docs/hooks.md", "exec"), {})
