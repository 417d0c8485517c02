"""Self-ReSET's settings (the config section ``selfreset:``)."""

from __future__ import annotations

from dataclasses import dataclass

import stackrl
from stackrl_selfreset.guard import GUARD_TEMPLATE


@dataclass
class SelfresetConfig:
    # The safety guard (its name under aux_models: an hf model such as Llama-Guard-3-8B, an openai server or a
    # rule). Empty: the plugin's own rule guard of the built-in task (guard.rule_verdict, the rule
    # `selfreset_guard` an aux model of backend `rule` names), called in the process without an aux model.
    guard: str = ""
    # The guard's request: {prompt} the question (a reset row's question followed by its prefix), {response} the
    # text judged; the reply's first "safe", "unsafe" or "controversial" is the verdict.
    template: str = GUARD_TEMPLATE
    max_new_tokens: int = 16  # the guard's reply length (a model guard; the rule ignores it)
    # Reset rows pending in the pool at most; further flagged rows are not reset until some are drawn (the
    # authors' --buffer-max-length 256).
    max_resets: int = 256
    # A reset row's draw weight against 1 for a fresh problem. The authors' buffer is drawn before any fresh
    # prompt; the pool draws by weight, so 4 is ours: resets come first, fresh problems still fill the batch.
    reset_weight: float = 4.0
    # Reset only rows of groups whose verdicts spread (the authors' zero-std skip: a group all safe or all unsafe
    # gives no reset).
    spread_only: bool = True
    # Text put after the prefix (the authors' optional --enable-add-after appends "wait"; off in their script).
    cue: str = ""

    def __post_init__(self):
        if self.guard in ("policy", "reference"):
            raise stackrl.ConfigError(f"selfreset.guard: names an auxiliary model (aux_models), not '{self.guard}'")
        missing = [field for field in ("{prompt}", "{response}") if field not in self.template]
        if missing:
            raise stackrl.ConfigError(f"selfreset.template: must contain {' and '.join(missing)}")
        if self.max_new_tokens < 1:
            raise stackrl.ConfigError(f"selfreset.max_new_tokens: must be at least 1, not {self.max_new_tokens}")
        if self.max_resets < 0:
            raise stackrl.ConfigError(f"selfreset.max_resets: must be at least 0, not {self.max_resets}")
        if not self.reset_weight > 0:
            raise stackrl.ConfigError(f"selfreset.reset_weight: must be positive, not {self.reset_weight}")
