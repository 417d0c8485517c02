"""Every setting of the DASD plugin. The paper's router and gate are read from a secondary summary of it (no code is
public); the values it does not give are guesses, said so in the README."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl import ConfigError
from stackrl.blocks.teacher import check_teacher_settings
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE

ENTROPY_OF = ("student", "teacher")
THRESHOLD_KINDS = ("quantile", "fixed")
FORMS = ("advantage", "loss")


@dataclass
class DasdConfig:
    # "advantage": the paper's sampled-token form, a routed correction added to GRPO's advantage,
    # A_t = A + scale * omega_t * delta_t (the reward keeps the run anchored); "loss": a loss term that descends a
    # full-vocabulary JSD to the teacher at low-entropy tokens and ascends it at high-entropy ones (on the built-in
    # model it destroys the greedy accuracy; see the README).
    form: str = "advantage"
    # The advantage form's weight beta of the routed correction next to GRPO's advantage.
    scale: float = 0.03
    # The teacher's prompt, formatted with {prompt} and the dataset columns: {solution} is the reference trace
    # the student never sees. The default is the solution, a blank line, then the question.
    teacher_template: str = REFERENCE_TEMPLATE
    # The teacher's weights: any model ctx.score knows ("policy": the live policy, "reference": the frozen one).
    teacher: str = "policy"
    # Both distributions are softmax(logits / temperature); null: the run's sampling temperature.
    temperature: Optional[float] = None
    # Whose next-token entropy routes a token: the student's (the exploration the push protects is the
    # student's), or the teacher's.
    entropy_of: str = "student"
    # "quantile": tokens above this quantile of the token entropies are pushed (0.8: the top fifth), taken over
    # each completion in the advantage form (the paper's trajectory-local quantile) and over the micro-batch in
    # the loss form; "fixed": tokens above `threshold` nats are pushed. Tokens at or below it are pulled.
    threshold_kind: str = "quantile"
    threshold: float = 0.8
    # The loss form only. The pull: the generalized JSD with mixture weight pull_beta (0: forward KL(teacher || student), 1: reverse
    # KL; 0.5 the JSD, as OPSD).
    pull_beta: float = 0.5
    # The push: minus the generalized JSD with push_beta strictly inside (0, 1), so that no token can gain more
    # than the binary entropy of push_beta (log 2 at 0.5), times push_weight.
    push_beta: float = 0.5
    push_weight: float = 1.0


def check(config: DasdConfig) -> None:
    """Refuse settings no run could use, naming the key (the host has already checked the types)."""

    def refuse(key: str, message: str):
        raise ConfigError(f"dasd.{key}: {message}")

    check_teacher_settings("dasd", config, teachers=None)
    if config.form not in FORMS:
        refuse("form", f"must be one of {', '.join(FORMS)}, not '{config.form}'")
    if config.scale < 0:
        refuse("scale", f"must be non-negative, not {config.scale}")
    if config.entropy_of not in ENTROPY_OF:
        refuse("entropy_of", f"must be one of {', '.join(ENTROPY_OF)}, not '{config.entropy_of}'")
    if config.threshold_kind not in THRESHOLD_KINDS:
        refuse("threshold_kind", f"must be one of {', '.join(THRESHOLD_KINDS)}, not '{config.threshold_kind}'")
    if config.threshold_kind == "quantile" and not 0.0 <= config.threshold <= 1.0:
        refuse("threshold", f"a quantile must lie in [0, 1], not {config.threshold}")
    if config.threshold_kind == "fixed" and config.threshold < 0:
        refuse("threshold", f"an entropy in nats must be non-negative, not {config.threshold}")
    if not 0.0 <= config.pull_beta <= 1.0:
        refuse("pull_beta", f"must lie in [0, 1], not {config.pull_beta}")
    if not 0.0 < config.push_beta < 1.0:
        refuse("push_beta", f"must lie strictly inside (0, 1), where the push is bounded, not {config.push_beta}")
    if config.push_weight < 0:
        refuse("push_weight", f"must be non-negative, not {config.push_weight}")
