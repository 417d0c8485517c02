"""The ``trainer`` section, checked against ``trl.GRPOConfig`` before anything loads.

Every key must be a GRPOConfig field, every value of that field's type, and within the range that torch's
optimizers or transformers' sampling would refuse. GRPOConfig itself checks neither: a wrong value is taken as
given and fails only once the model is loaded and training starts, inside the optimizer or the sampler.
"""

from __future__ import annotations

import enum
import types
import typing
from functools import cache

from omegaconf import OmegaConf

from stackrl.errors import ConfigError, did_you_mean

# Keys of GRPOConfig that the host owns: setting them under `trainer` would bypass it.
HOST_OWNED = {"output_dir": "output_dir", "reward_weights": "rewards"}

# Values that GRPOConfig accepts and a run then refuses, each measured: torch's Adam optimizers ("Invalid learning
# rate", "Invalid beta parameter"), transformers' logits processors (temperature, top_k, min_p, repetition penalty)
# and its generate (max_new_tokens), and the data loader (a batch of zero rows).
RANGES = {
    "learning_rate": "[0, inf)",
    "adam_beta1": "[0, 1)",
    "adam_beta2": "[0, 1)",
    "adam_epsilon": "[0, inf)",
    "temperature": "(0, inf)",
    "top_k": "[0, inf)",
    "min_p": "[0, 1]",
    "repetition_penalty": "(0, inf)",
    "max_completion_length": "[1, inf)",
    "per_device_train_batch_size": "[1, inf)",
    "gradient_accumulation_steps": "[1, inf)",
    "steps_per_generation": "[1, inf)",
}


@cache
def _field_types() -> dict[str, typing.Any]:
    from trl import GRPOConfig

    return typing.get_type_hints(GRPOConfig)


def check_names(section, where: str) -> list[ConfigError]:
    """The mistakes in the key names of one layer's ``trainer`` section: each must be a GRPOConfig field the host
    does not own. A YAML boolean given for a field whose values are words is read back as its word, in place."""
    known, mistakes = _field_types(), []
    raw = OmegaConf.to_container(section, resolve=False)  # an interpolation is resolved later, against the whole config
    for key in section:
        if key in HOST_OWNED:
            mistakes.append(ConfigError(f"{where}: 'trainer.{key}' is set by stackrl; use '{HOST_OWNED[key]}' instead"))
        elif key not in known:
            mistakes.append(
                ConfigError(f"{where}: unknown key 'trainer.{key}' (not a GRPOConfig field).{did_you_mean(key, known)}")
            )
        elif isinstance(raw[key], bool) and not _fits(raw[key], known[key]):
            word = _word(raw[key], known[key])
            if word is not None:
                section[key] = word
    return mistakes


def _word(value: bool, hint) -> str | None:
    """The value a YAML 1.1 boolean stood for where the field takes words: unquoted ``no`` (``save_strategy: no``,
    transformers' documented value) is read as false. Only ``no`` and ``off`` are some field's word."""
    words = {member.value for arm in (*typing.get_args(hint), hint) if isinstance(arm, type) and issubclass(arm, enum.Enum)
             for member in arm}
    for word in ("no", "off") if value is False else ("yes", "on"):
        if word in words:
            return word
    return None


def check_values(settings: dict) -> list[ConfigError]:
    """The mistakes in the merged, resolved ``trainer`` section: each value must have its field's type and lie in
    its range."""
    types_, mistakes = _field_types(), []
    for key, value in settings.items():
        if not _fits(value, types_[key]):
            quote = (
                " (YAML reads unquoted yes, no, on and off as booleans: quote the word)"
                if isinstance(value, bool) and _fits("x", types_[key]) else ""
            )
            mistakes.append(
                ConfigError(f"wrong type for 'trainer.{key}': {value!r} is not {_describe(types_[key])}{quote}")
            )
        elif key in RANGES and value is not None and not _within(value, RANGES[key]):
            mistakes.append(ConfigError(f"trainer.{key} must be {_describe_range(RANGES[key])}, not {value}"))
    return mistakes


def _fits(value, hint) -> bool:
    """Whether ``value`` (as YAML gives it: a scalar, list or dict) can stand for a field typed ``hint``.

    Types this cannot judge (a class of some library) pass, and GRPOConfig has the last word on them.
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arm) for arm in args)
    if hint is type(None):
        return value is None
    if origin is typing.Literal:
        return value in args
    if origin in (list, tuple):
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value) if args else isinstance(value, list)
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return value in {member.value for member in hint}
    return True


def _describe(hint) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(arm) for arm in args)
    if hint is type(None):
        return "null"
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in args)
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_describe(a) for a in args)}]"
    return getattr(hint, "__name__", str(hint))


def _interval(text: str) -> tuple[float, float, bool, bool]:
    low, high = (float(end) for end in text[1:-1].split(","))
    return low, high, text[0] == "[", text[-1] == "]"


def _within(value, text: str) -> bool:
    low, high, low_in, high_in = _interval(text)
    return (low < value or (low_in and value == low)) and (value < high or (high_in and value == high))


def _describe_range(text: str) -> str:
    low, high, low_in, _ = _interval(text)
    if high == float("inf"):
        return f"{'at least' if low_in else 'above'} {low:g}"
    return f"in {text}"
