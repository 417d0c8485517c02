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
    return tokenizer


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
    return model, _lora(section)


def _lora(section: ModelSection):
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
    )
