"""Loading the policy and its tokenizer from a config's ``model`` section."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

from stackrl.config import ModelSection
from stackrl.errors import ConfigError


def resolve_model_path(name_or_path: str) -> str:
    """A built-in model's local folder (built on first use), or the name or path as given."""
    from stackrl.tasks import BUILTIN_MODELS

    if name_or_path in BUILTIN_MODELS:
        return str(BUILTIN_MODELS[name_or_path]())
    return name_or_path


def load_tokenizer(section: ModelSection):
    path = resolve_model_path(section.name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=section.trust_remote_code)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if section.add_tokens:
        known = [token for token in section.add_tokens if token in tokenizer.get_vocab()]
        if known:
            raise ConfigError(
                f"model.add_tokens: {known[0]!r} is already a token of {section.name_or_path}; list only new tokens"
            )
        # Not special: completions are decoded without special tokens, and a method reads these in its text.
        tokenizer.add_tokens(list(section.add_tokens))
    return tokenizer


def added_token_ids(section: ModelSection) -> list[int]:
    """The ids of ``model.add_tokens`` in the run's tokenizer, in the order listed."""
    return load_tokenizer(section).convert_tokens_to_ids(list(section.add_tokens)) if section.add_tokens else []


def _add_token_rows(model, vocab_size: int) -> None:
    """Resize the embedding and output rows to the extended vocabulary. The new rows start from the old rows' mean
    and covariance (transformers' default), drawn from a fixed seed: every process and a resumed run start alike."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model.resize_token_embeddings(vocab_size)


def _quantization(section: ModelSection, compute_dtype: torch.dtype) -> BitsAndBytesConfig | None:
    if section.quantization == 4:
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type=section.quant_type,
            bnb_4bit_use_double_quant=section.double_quant,
            bnb_4bit_compute_dtype=compute_dtype,
        )
    if section.quantization == 8:
        return BitsAndBytesConfig(load_in_8bit=True)
    return None


def load_model(section: ModelSection, device: torch.device):
    """The policy model (quantized if asked) and the PEFT config TRL should wrap it with (or ``None``)."""
    path = resolve_model_path(section.name_or_path)
    dtype = section.dtype if section.dtype == "auto" else getattr(torch, section.dtype)
    compute_dtype = torch.float32 if dtype == "auto" else dtype
    quantization = _quantization(section, compute_dtype)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            path,
            dtype=dtype,
            quantization_config=quantization,
            # bitsandbytes quantizes while loading, so the weights must land on this process's device.
            device_map={"": device} if quantization else None,
            trust_remote_code=section.trust_remote_code,
        )
    except OSError as exc:
        raise ConfigError(f"model.name_or_path: cannot load '{section.name_or_path}': {exc}") from exc
    new_ids = added_token_ids(section)
    if new_ids and max(new_ids) >= model.get_input_embeddings().num_embeddings:
        # Many models have rows to spare beyond their tokenizer (a padded vocabulary): those rows serve as they are.
        _add_token_rows(model, max(new_ids) + 1)
    return model, _lora(section, model, new_ids)


def _lora(section: ModelSection, model, new_ids: list[int]):
    if section.lora is None:
        return None
    from peft import LoraConfig

    target = section.lora.target_modules
    return LoraConfig(
        r=section.lora.r,
        lora_alpha=section.lora.alpha,
        lora_dropout=section.lora.dropout,
        target_modules=target if isinstance(target, str) else list(target),
        task_type="CAUSAL_LM",
        **(_new_token_training(section, model, new_ids) if new_ids else {}),
    )


def _new_token_training(section: ModelSection, model, new_ids: list[int]) -> dict:
    """What trains beside the adapter so the added tokens can be read and written: their input embedding rows (PEFT's
    trainable tokens), and the whole output layer. TRL's log-prob head reads the output layer's weight itself, so
    PEFT's per-row wrapper there would be bypassed; a full trainable copy is what it reads."""
    names = {id(module): name for name, module in model.named_modules()}
    embedding, output = model.get_input_embeddings(), model.get_output_embeddings()
    if output is None or output.weight is embedding.weight:
        raise ConfigError(
            f"model.add_tokens with model.lora: {section.name_or_path} ties its output layer to its input embedding, "
            "and TRL's log-prob head would bypass the trainable rows of the new tokens there; train without lora"
        )
    return {
        "trainable_token_indices": {names[id(embedding)].rsplit(".", 1)[-1]: new_ids},
        "modules_to_save": [names[id(output)].rsplit(".", 1)[-1]],
    }
