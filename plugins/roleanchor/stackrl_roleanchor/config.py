"""Every setting of the Role Anchor plugin: the paper's where it gives one, ours (said so) where it is silent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import stackrl

REFERENCES = ("initial", "reference")
SOLVERS = ("policy", "reference")


@dataclass
class RoleanchorConfig:
    # The neutral prompt s_0, over the row's columns and {prompt}: the module's input without its role instruction.
    # The role prompt s_r is the prompt the row was sampled from. Ours: the built-in model has no system prompt, so
    # the bare question (what it solves) is the neutral prompt, and "Decompose:" after it (data.prompt_template) the
    # role. The strength lambda is `losses.roleanchor` (the paper's 1.0 on its decomposer pipeline).
    neutral_template: str = "{question}"
    # The candidate tokens v the role utility is centred over at each position: the reference's k most likely under
    # the role prompt (the paper centres over a top-k; which distribution picks it and k are ours). null: every token.
    top_k: Optional[int] = 20
    # The frozen pre-RL model the role shift is held to: "initial", a snapshot of the policy at step 0 (works without
    # LoRA or a KL reference), or "reference", the run's reference model (LoRA-disabled base, or trainer.beta > 0).
    reference: str = "initial"
    # The end-task reward (reward component `roleanchor`): the solver answers each decomposition (docs/roles.md,
    # Decompose) and the row scores 1 where its final answer is the row's answer. Which model solves: the live
    # policy (one model in both roles) or the frozen reference. Greedy, at most `solver_tokens` tokens (ours).
    solver: str = "policy"
    solver_tokens: int = 48

    def __post_init__(self):
        if self.top_k is not None and self.top_k < 2:
            raise stackrl.ConfigError(f"roleanchor.top_k: must be at least 2 (the utility is centred), not {self.top_k}")
        if self.reference not in REFERENCES:
            raise stackrl.ConfigError(f"roleanchor.reference: must be one of initial, reference, not '{self.reference}'")
        if self.solver not in SOLVERS:
            raise stackrl.ConfigError(f"roleanchor.solver: must be one of policy, reference, not '{self.solver}'")
        if self.solver_tokens < 1:
            raise stackrl.ConfigError(f"roleanchor.solver_tokens: must be at least 1, not {self.solver_tokens}")
