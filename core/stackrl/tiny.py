"""Builders for tiny causal LMs that need no download: a BPE tokenizer trained on given text and a small Qwen2.

Used by the built-in ``stackrl/arith-tiny`` checkpoint (see :mod:`stackrl.tasks.pretrain`) and by tests.
"""

from __future__ import annotations

from collections.abc import Iterable

PAD, EOS, IM_START, IM_END = "<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [PAD, EOS, IM_START, IM_END]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "tiny_model", "train_tokenizer"]


def train_tokenizer(texts: Iterable[str], vocab_size: int = 512):
    """A byte-level BPE :class:`~transformers.PreTrainedTokenizerFast` trained on ``texts``.

    Digits are always split into single tokens (so arithmetic is learnable); special tokens ``<|pad|>`` (pad),
    ``<|endoftext|>`` (eos), ``<|im_start|>`` and ``<|im_end|>``; no bos; left padding; a ChatML chat template.
    Deterministic for the same texts.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=EOS,
        padding_side="left",
        model_max_length=2048,
    )
    hf.chat_template = CHAT_TEMPLATE
    return hf


def tiny_model(
    tokenizer,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 512,
    **config_kwargs,
):
    """A randomly initialised float32 :class:`~transformers.Qwen2ForCausalLM` sized for ``tokenizer``.

    Seed with ``torch.manual_seed`` before calling for a reproducible init. Extra keyword arguments go to
    :class:`~transformers.Qwen2Config`.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **config_kwargs,
    )
    model = Qwen2ForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    return model
