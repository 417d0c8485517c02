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


def check_names(section, where: str) -> None:
    """Each key of one layer's ``trainer`` section is a GRPOConfig field the host does not own."""
    known = _field_types()
    for key in section:
        if key in HOST_OWNED:
            raise ConfigError(f"{where}: 'trainer.{key}' is set by stackrl; use '{HOST_OWNED[key]}' instead")
        if key not in known:
            raise ConfigError(
                f"{where}: unknown key 'trainer.{key}' (not a GRPOConfig field).{did_you_mean(key, known)}"
            )


def check_values(settings: dict) -> None:
    """Each value of the merged, resolved ``trainer`` section has its field's type and lies in its range."""
    types_ = _field_types()
    for key, value in settings.items():
        if not _fits(value, types_[key]):
            raise ConfigError(f"wrong type for 'trainer.{key}': {value!r} is not {_describe(types_[key])}")
        if key in RANGES and value is not None and not _within(value, RANGES[key]):
            raise ConfigError(f"trainer.{key} must be {_describe_range(RANGES[key])}, not {value}")


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
