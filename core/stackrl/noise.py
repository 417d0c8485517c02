"""Messages that stackrl's dependencies print on every run and that say nothing about the run.

The ``stackrl`` command silences them with :func:`silence`; the test kit does the same for tests. Every other
warning and log record still shows.
"""

from __future__ import annotations

import logging
import warnings

# (category, regular expression matched at the start of the message)
KNOWN_WARNINGS = (
    # transformers 5 renamed gradient checkpointing to activation checkpointing; TRL 1.16 and transformers' own
    # Trainer still use the old names, on every GRPOConfig and every training start.
    (FutureWarning, r"`(is_)?gradient_checkpointing(_enable|_disable)?` is deprecated and will be removed in v6"),
    # Importing bitsandbytes (peft imports it) compiles a kernel; that imports modules of torch that torch itself
    # marks deprecated, 14 warnings at once.
    (DeprecationWarning, r"`torch.jit.script_method` is deprecated"),
)

# logger -> start of the message. bitsandbytes looks for an optional CPU kernel on the Hub when it is imported on a
# CPU with AVX512-BF16, and falls back to its own kernel when that is not installed.
KNOWN_LOG_RECORDS = {
    "bitsandbytes.backends.cpu.ops": "Failed to load CPU gemm_4bit_forward from kernels-community",
    # A generation past the model's context: the trainer says which plugin's prompts and which setting did it.
    "transformers.generation.stopping_criteria": "This is a friendly reminder",
}


class _DropMessage(logging.Filter):
    def __init__(self, start: str):
        super().__init__()
        self.start = start

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.start)


_LOG_FILTERS = {logger: _DropMessage(start) for logger, start in KNOWN_LOG_RECORDS.items()}


def silence() -> None:
    """Drop the known warnings and log records, from now on in this process (the loggers need not exist yet)."""
    for category, message in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    for logger, drop in _LOG_FILTERS.items():
        logging.getLogger(logger).addFilter(drop)  # adding the same filter twice keeps one
