"""model.add_tokens: new tokens join the vocabulary, their rows train (the whole model, or only those rows beside a
LoRA adapter), and a run with them saves, resumes exactly and is evaluated from its checkpoint."""

import pytest
import torch

from stackrl import ConfigError
from stackrl.modeling import added_token_ids, load_model, load_tokenizer
from stackrl.run import build_trainer
from stackrl.testing.fixtures import StopAt, train_steps
from stackrl.trainer import last_checkpoint

TOKENS = ["<check>", "<redo>"]
# The new tokens in every prompt: the embedding rows get a gradient from the input, the output rows from the softmax.
DATA = {"prompt_template": "{question}<check>"}


def _config(make_config, tmp_path, name, **model):
    saving = {"save_strategy": "steps", "save_steps": 2, "max_steps": 4}
    model = {"name_or_path": "stackrl/arith-tiny", "add_tokens": TOKENS, **model}
    # The completions' own mean log-prob as the reward: it always varies, so every step has advantages to train on.
    return make_config(["logprob_reward"], model=model, data=DATA, trainer=saving, output_dir=str(tmp_path / name))


def _rows(model, ids):
    return model.get_input_embeddings().weight[ids].detach().clone(), model.get_output_embeddings().weight[ids].detach().clone()


def test_added_tokens_train_and_a_resumed_run_continues_exactly(make_config, tmp_path):
    config = _config(make_config, tmp_path, "straight")
    ids = added_token_ids(config.host.model)
    tokenizer = load_tokenizer(config.host.model)
    assert tokenizer.tokenize("What<check>") == ["What", "<check>"]
    assert tokenizer.decode(tokenizer("a<redo>b")["input_ids"], skip_special_tokens=True) == "a<redo>b"
    start, _ = load_model(config.host.model, torch.device("cpu"))
    again, _ = load_model(config.host.model, torch.device("cpu"))
    assert all(torch.equal(a, b) for a, b in zip(_rows(start, ids), _rows(again, ids))), "a fixed start"

    straight = train_steps(config)
    _assert_trained(_rows(start, ids), _rows(straight.model, ids))

    interrupted = _config(make_config, tmp_path, "resumed")
    train_steps(interrupted, callbacks=[StopAt(2)])
    checkpoint = last_checkpoint(str(tmp_path / "resumed"))
    assert load_tokenizer_from(checkpoint).convert_tokens_to_ids(TOKENS) == ids
    resumed = train_steps(interrupted, resume=True)
    want = dict(straight.model.named_parameters())
    assert all(torch.equal(p, want[name]) for name, p in resumed.model.named_parameters())


def _assert_trained(before, after):
    """Both output rows moved (every softmax reaches them); of the input rows, the prompts' "<check>" alone."""
    moved = [(b - a).abs().sum(1) > 0 for b, a in zip(before, after)]
    assert moved[0].tolist() == [True, False] and moved[1].tolist() == [True, True], moved


def load_tokenizer_from(folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def test_under_lora_the_new_rows_train_beside_the_adapter(make_config, tmp_path):
    config = _config(make_config, tmp_path, "lora", lora={"r": 4, "target_modules": "all-linear"})
    ids = added_token_ids(config.host.model)
    start, _ = load_model(config.host.model, torch.device("cpu"))
    trainer = train_steps(config)
    trained = {name for name, p in trainer.model.named_parameters() if p.requires_grad and "lora_" not in name}
    assert trained == {"base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta.default",
                       "base_model.model.lm_head.modules_to_save.default.weight"}
    merged = trainer.model.merge_and_unload()
    old = slice(0, min(ids))
    assert torch.equal(merged.get_input_embeddings().weight[old], start.get_input_embeddings().weight[old])
    _assert_trained(_rows(start, ids), _rows(merged, ids))


def test_bad_added_tokens_are_refused_by_name(make_config, tmp_path):
    with pytest.raises(ConfigError, match=r"model.add_tokens: 'What' is already a token of stackrl/arith-tiny"):
        build_trainer(make_config(["digit_reward"], model={"name_or_path": "stackrl/arith-tiny", "add_tokens": ["<new>", "What"]}))
    with pytest.raises(ConfigError, match=r"model.add_tokens: a token is listed twice"):
        make_config(["digit_reward"], model={"add_tokens": ["<a>", "<a>"]})
    with pytest.raises(ConfigError, match=r"trainer.use_vllm: vLLM serves the model's own vocabulary"):
        make_config(["digit_reward"], model={"add_tokens": ["<a>"]}, trainer={"use_vllm": True})
