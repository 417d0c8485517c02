"""sirlc: the conformance suite, what its defaults ask and read (the judge's general rules, the likelihood score
among them: tests/test_judges.py), and its mechanism on the built-in judging model, stackrl/arith-skills, with
the CPU recipe's generated grades: the grades of its own answers rank right above wrong within each question's
group (stackrl.testing.judging.JudgingMechanism)."""

import pytest
import torch

from stackrl import RewardContext
from stackrl.blocks.judges import Mode, Scale
from stackrl.testing.heldout import written_rollout
from stackrl.testing.judging import JudgingConformance, JudgingMechanism, judge_prompt
from stackrl.testing.tiny import tiny_config
from stackrl_sirlc import CORRECTNESS, SIRLC


class TestConformance(JudgingConformance):
    plugin_name = "sirlc"


class TestMechanism(JudgingMechanism):
    plugin_name = "sirlc"


def test_it_asks_whether_the_answer_is_correct_and_scores_the_yes_no_likelihood():
    settings = SIRLC().config
    prompt = judge_prompt(SIRLC(), "4 * 2 = 8")
    assert prompt.startswith("Here is a question and an answer to it.\nQuestion: What is (4 * 2) + 3?")
    assert prompt.endswith("Answer: 4 * 2 = 8\nIs the answer to the question correct? Reply yes or no.\nReply:")
    assert (settings.mode, settings.scale) == (Mode.likelihood, Scale.yes_no)


@pytest.fixture(scope="module")
def judging_trainer(tmp_path_factory):
    """A real trainer with a reference model (``trainer.beta`` > 0) on a tiny model whose byte-level BPE tokenizer,
    trained here, has " yes" and "yes" (" no" and "no") as different tokens; the live policy is moved off the
    reference so the two grade apart."""
    from stackrl.run import build_trainer
    from stackrl.tiny import tiny_model, train_tokenizer

    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("sirlc-judge")
    texts = [CORRECTNESS.format(prompt=f"What is {a} + 1?", attempt=str(a + 1)) + verdict
             for a in range(20) for verdict in (" yes", " no")] + ["yes", "no"] * 20
    tokenizer = train_tokenizer(texts, vocab_size=320)
    torch.manual_seed(0)
    tiny_model(tokenizer, hidden_size=32, num_layers=1, num_heads=2).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    trainer = build_trainer(tiny_config(folder, ["sirlc"], tmp_dir=folder, rewards={"exact_match": None, "sirlc": 1.0},
                                        trainer={"beta": 0.04}, output_dir=str(folder / "run")))
    with torch.no_grad():
        torch.manual_seed(1)
        head = trainer.model.lm_head.weight
        head.add_(torch.randn_like(head) * 3 * head.std())
    return trainer


def yes_share(trainer, prompts, words, model):
    """P(first word) / (P(first) + P(second)) after each prompt, by hand on ``model``."""
    tokenizer, policy = trainer.processing_class, trainer._shared_policy
    ids = [tokenizer(word, add_special_tokens=False)["input_ids"] for word in words]
    scores = policy.score([p for p in prompts for _ in ids], [i for _ in prompts for i in ids], model=model)
    return torch.softmax((scores.logprobs * scores.mask).sum(dim=1).view(-1, 2), dim=1)[:, 0]


def test_the_likelihood_grade_is_the_live_policys_p_yes_over_yes_and_no_as_the_template_goes_on(judging_trainer):
    trainer, tokenizer = judging_trainer, judging_trainer.processing_class
    spaced, bare = ([tokenizer(w, add_special_tokens=False)["input_ids"] for w in pair]
                    for pair in ((" yes", " no"), ("yes", "no")))
    assert all(len(ids) == 1 for ids in spaced + bare) and spaced != bare  # one token each, spaced ones apart
    batch = written_rollout(tokenizer, ["(4 * 2) + 3", "(3 + 5) - 2"], ["4 * 2 = 8", "3 + 5 = 9"], group_size=1)
    logs = {}
    ctx = RewardContext(step=0, tokenizer=tokenizer, policy=trainer._shared_policy, _log=logs.__setitem__,
                        _plugin="sirlc", rollout=batch)
    graded = torch.tensor(SIRLC()._judge(ctx))
    prompts = SIRLC()._judge.prompts(batch)
    live = yes_share(trainer, prompts, (" yes", " no"), "policy")
    assert graded == pytest.approx(live, abs=1e-6)
    # each alternative reading gives other grades on these prompts: the reference model, the words without the
    # space the template calls for, the ratio the other way round
    for other in (yes_share(trainer, prompts, (" yes", " no"), "reference"), yes_share(trainer, prompts, ("yes", "no"), "policy"),
                  1 - live):
        assert (graded - other).abs().max() > 0.05
