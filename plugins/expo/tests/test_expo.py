"""ExPO: groups without a correct sample get answer-conditioned explanations, learnt after the original prompt as a
token-mean likelihood term or as the group's inserted positive."""

from types import SimpleNamespace

import pytest
import torch

from stackrl import ConfigError, Generation, LossContext
from stackrl.policy import PolicyAccess
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl.testing.heldout import completion_logits, written_rollout
from stackrl_expo import Expo, ExpoConfig, explanation_prompts, last_step
from stackrl_expo.explanations import explain
from stackrl_expo.plugin import EXPLANATIONS, INSERTED, explanation_nll

BUILT_IN = "{last_step}\nThe answer is {answer}.\n\n{prompt}"
HARD = {"options": {"categories": ["3 steps, 2-digit", "4 steps, 2-digit"]}}


class TestConformance(PluginConformance):
    plugin_name = "expo"


def test_the_explanation_prompt_shows_the_last_step_and_the_answer():
    solution = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14."
    assert last_step(solution) == "7 * 2 = 14" and last_step("The answer is 3.") == ""
    columns = {"solution": ["x", solution], "answer": ["1", "14"]}
    prompts = explanation_prompts(["a", "What is (3 + 4) * 2?\n"], columns, [1], BUILT_IN, where="t")
    assert prompts == ["7 * 2 = 14\nThe answer is 14.\n\nWhat is (3 + 4) * 2?\n"]


def test_only_groups_without_a_correct_row_are_explained():
    plugin = Expo(ExpoConfig())
    correct = [False, False, True, False, False, False]
    assert plugin.groups_to_explain(correct, 2) == [0, 2]
    assert Expo(ExpoConfig(every_group=True)).groups_to_explain(correct, 2) == [0, 1, 2]


def test_the_term_is_the_mean_of_each_explanations_token_mean_nll():
    """Explanations of 1 and 3 tokens: (2.0 + (1.0 + 2.0 + 3.0) / 3) / 2 = 2.0, where a mean over all tokens is
    (2 + 6) / 4 = 2.0 too; so the second pair, (4.0 + 2.0) / 2 = 3.0 against 8 / 4 = 2.0, tells them apart."""
    mask = torch.tensor([[1.0, 0, 0], [1, 1, 1]])
    assert explanation_nll(-torch.tensor([[2.0, 9, 9], [1, 2, 3]]), mask).item() == pytest.approx(2.0)
    assert explanation_nll(-torch.tensor([[4.0, 9, 9], [1, 2, 3]]), mask).item() == pytest.approx(3.0)


def test_the_hook_returns_the_explanations_nll_and_descending_it_makes_them_likelier(make_config):
    """On the built-in model: the term is the token-mean NLL of each explanation after its group's question, at
    the sampling temperature, and one plain gradient step down the term raises the explanations' likelihood."""
    temperature = 1.3
    trainer = build_trainer(make_config(["expo"], model={"name_or_path": "stackrl/arith-tiny"},
                                        trainer={"temperature": temperature}))
    rollout = written_rollout(trainer.processing_class, ["(4 * 2) + 3"] * 2 + ["(3 + 5) - 2"] * 2, ["x"] * 4)
    encode = lambda text: trainer.processing_class(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    explanations = {0: ["4 * 2 = 8\n8 + 3 = 11\nThe answer is 11."], 2: ["The answer is 6.", "8 - 2 = 6"]}
    rollout.columns[EXPLANATIONS] = [[encode(t) for t in explanations.get(i, [])] for i in range(len(rollout))]
    pairs = [(rollout.prompt_ids[i], encode(t)) for i, texts in explanations.items() for t in texts]

    def nll():  # each explanation's token-mean NLL, straight from the logits
        return torch.stack([-(completion_logits(trainer.model, c, e) / temperature).log_softmax(-1)
                            .gather(-1, torch.tensor(e).unsqueeze(-1)).mean() for c, e in pairs])

    before = nll()
    ctx = LossContext(step=0, tokenizer=trainer.processing_class, _log=lambda *_: None, _plugin="expo",
                      policy=PolicyAccess(trainer, sharded=False, model=trainer.model), rollout=rollout)
    term = trainer.plugins.plugins["expo"].loss_term(ctx)
    assert term.item() == pytest.approx(before.mean().item(), rel=1e-4)
    term.backward()
    with torch.no_grad():
        for p in trainer.model.parameters():
            if p.grad is not None:
                p.sub_(1e-3 * p.grad)
    after = nll()
    assert after.mean() < before.mean() - 0.1, "a step down the term makes the explanations likelier"
    assert (after[1:] < before[1:]).all(), "the two the model found unlikely most of all"


def _generation(text):
    return Generation(prompt_ids=[1], completion_ids=[ord(c) for c in text], text=text)


def test_explanations_that_miss_the_answer_are_dropped_unless_asked():
    asked = []

    def generate(prompts, **sampling):
        asked.append((prompts, sampling))
        return [_generation(t) for t in ["The answer is 14.", "The answer is 15."]]

    ctx = SimpleNamespace(group_size=2, generate=generate, log=lambda *_: None)
    columns = {"solution": ["3 + 4 = 7\n7 * 2 = 14\nThe answer is 14."] * 2 + ["2 * 3 = 6\nThe answer is 6."] * 2,
               "answer": ["14", "14", "6", "6"]}
    prompts = ["What is (3 + 4) * 2?\n"] * 2 + ["What is 2 * 3?\n"] * 2
    config = ExpoConfig(explanation_template=BUILT_IN, temperature=0.7)
    kept = explain(ctx, prompts, columns, [0, 1], config, where="t", per_group=1)
    assert asked[0][0] == [
        "7 * 2 = 14\nThe answer is 14.\n\nWhat is (3 + 4) * 2?\n", "2 * 3 = 6\nThe answer is 6.\n\nWhat is 2 * 3?\n",
    ]
    assert asked[0][1] == {"temperature": 0.7}
    assert {g: [x.text for x in v] for g, v in kept.items()} == {0: ["The answer is 14."]}
    kept = explain(ctx, prompts, columns, [0, 1], ExpoConfig(only_reaching=False), where="t", per_group=1)
    assert sorted(kept) == [0, 1]


def _run(make_config, monkeypatch, mode):
    """Two steps on the built-in model on hard problems; the (context, continuation) pairs the loss scored with
    gradient, and the hooks' calls."""
    scored, calls = [], []
    original = PolicyAccess.score

    def spy(self, contexts, continuation_ids, **options):
        if options.get("grad") and not options.get("full_vocab"):
            scored.append(list(zip(contexts, continuation_ids)))
        return original(self, contexts, continuation_ids, **options)

    monkeypatch.setattr(PolicyAccess, "score", spy)
    config = make_config(
        ["expo"], model={"name_or_path": "stackrl/arith-tiny"}, data=HARD,
        expo={"mode": mode, "explanation_template": BUILT_IN},
        trainer={"max_completion_length": 64, "num_generations": 4, "per_device_train_batch_size": 16},
    )
    trainer = train_steps(config, steps=2, monitor=lambda hook, plugin, kwargs, result: calls.append(
        (hook, kwargs, result)))
    return trainer, scored, calls


def test_the_loss_trains_reaching_explanations_of_failed_groups_after_the_bare_question(make_config, monkeypatch):
    trainer, scored, calls = _run(make_config, monkeypatch, "loss")
    decode = lambda ids: trainer.processing_class.decode(ids, skip_special_tokens=True)  # noqa: E731
    answers = dict(zip(trainer.train_dataset["prompt"], trainer.train_dataset["answer"]))
    pairs = [pair for call in scored for pair in call if pair]
    assert pairs, "hard problems leave some groups without a correct sample"
    for context, continuation in pairs:
        question = decode(context)
        assert question in answers, "trained after the question, not after the explanation prompt"
        assert exact_match(decode(continuation), answers[question]) == 1.0
    last = [kwargs["ctx"].rollout for hook, kwargs, _ in calls if hook == "reshape_advantages"][-1]
    solved = last.rewards["exact_match"].view(-1, last.group_size).max(1).values >= 1.0
    explained = [bool(last.columns["expo_explanations"][g * last.group_size]) for g in range(last.num_groups)]
    assert not any(e and s for e, s in zip(explained, solved.tolist())), "a solved group was explained"


def test_insert_puts_a_reaching_explanation_in_place_of_a_failed_groups_last_row(make_config, monkeypatch):
    trainer, _, calls = _run(make_config, monkeypatch, "insert")
    decode = lambda ids: trainer.processing_class.decode(ids, skip_special_tokens=True)  # noqa: E731
    generated = [(kwargs["prompts"], result) for hook, kwargs, result in calls if hook == "generate_rollout"]
    last = [kwargs["ctx"].rollout for hook, kwargs, _ in calls if hook == "reshape_advantages"][-1]
    prompts, samples = generated[-1]
    inserted = samples.columns[INSERTED]
    assert any(inserted), "hard problems leave some groups without a correct sample"
    size = last.group_size
    for row, is_inserted in enumerate(inserted):
        assert decode(samples.prompt_ids[row]) == prompts[row], "every row trains on its group's question"
        if is_inserted:
            assert row % size == size - 1
            group = last.rewards["exact_match"][row - size + 1 : row]
            assert (group < 1).all(), "only a group with no correct sample gets an explanation"
            assert last.rewards["exact_match"][row] == 1.0 and last.advantages[row] > 0


def test_bad_settings_name_the_key():
    with pytest.raises(ConfigError, match="expo.mode: must be one of loss, insert, not 'sft'"):
        Expo(ExpoConfig(mode="sft"))
    with pytest.raises(ConfigError, match="expo.explanations_per_group: must be at least 1, not 0"):
        Expo(ExpoConfig(explanations_per_group=0))
