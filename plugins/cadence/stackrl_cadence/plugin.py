"""CADENCE: on-policy distillation from a larger teacher. DRIFT adds to each sampled token's advantage a mixture of
the reverse-KL surrogate (the teacher's log-ratio) and the forward-KL one (self-normalised importance weights),
mixed by a beta that COVA anneals faster once the student covers the teacher's top tokens, and that FTB boosts at
the teacher's high-entropy tokens; the reward is CCD's (partial credit for a numerically close wrong answer) with
LAP's bonus for a short right one.

Paper: "CADENCE: Closing the Reasoning Gap via Coverage-Adaptive On-Policy Distillation" (2026, arXiv 2607.16955).
Code followed: none public (README.md says what was searched); EMR and BSD are left out (README.md says why).
"""

from __future__ import annotations

import torch

import stackrl
from stackrl.blocks.tokensignals import per_token
from stackrl.rewards import reference_answers

from stackrl_cadence.config import CadenceConfig
from stackrl_cadence.drift import (
    coverage,
    cosine_beta,
    cova_beta,
    drift_advantages,
    entropy,
    forking_boost,
    log_ratio,
)
from stackrl_cadence.rewards import dense_rewards


def _pad(rows: torch.Tensor, width: int) -> torch.Tensor:
    return torch.nn.functional.pad(rows, (0, width - rows.size(1)))


class Cadence(stackrl.Plugin):
    """The reward hook gives CCD and LAP's reward; the advantage hook adds DRIFT's per-token advantage (with COVA's
    beta and FTB's boost), scored by the teacher on the student's own completions. The coverage's moving average
    is plugin state."""

    Config = CadenceConfig
    activity = "completions had their token advantages moved by the teacher (DRIFT) or got CCD/LAP credit beyond pass/fail"

    def __init__(self, config=None):
        super().__init__(config)
        self.coverage_ema: float | None = None  # COVA's moving average of the batches' coverage
        self.beyond: list[bool] = []  # the last reward's rows credited beyond pass/fail (CCD or LAP)
        self.last: dict = {}  # the last batch's DRIFT quantities, for monitors and the benchmark (not state)

    def check_run(self, run):
        config = self.config
        run.need_column("cadence.answer_column", config.answer_column, "score answers for the CCD and LAP reward")
        notes = []
        if config.drift_scale > 0:
            known = {*run.aux_models} | ({"reference"} if run.reference else set())
            if config.teacher not in known:
                names = ", ".join(sorted(known)) or "none"
                if config.absent == "error":
                    raise stackrl.ConfigError(
                        f"cadence.teacher: '{config.teacher}' names no model of this run (aux_models and reference: "
                        f"{names})")
                notes.append(f"cadence.teacher: '{config.teacher}' is no model of this run; DRIFT is left out, "
                             "the CCD and LAP reward still act")
        if run.max_steps is not None and config.anneal_steps > run.max_steps:
            notes.append(f"cadence.anneal_steps: {config.anneal_steps} is past the run's {run.max_steps} steps, "
                         "so beta never reaches cadence.beta_end")
        return notes or None

    # -- reward: CCD's partial credit and LAP's brevity bonus ---------------------------------------------------------
    @stackrl.hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        references = reference_answers(rollout.columns, config.answer_column, plugin="cadence",
                                       purpose="score answers for the CCD and LAP reward")
        rewards, self.beyond = dense_rewards(
            rollout.completions, references, [len(ids) for ids in rollout.completion_ids], rollout.group_size,
            config.is_correct, config.partial_credit, config.tolerance, config.brevity)
        scored = [r for r in rewards if r is not None]
        if scored:
            ctx.log("partial_share", sum(0.0 < r < 1.0 for r in scored) / len(scored))
        return rewards

    # -- advantage: DRIFT with COVA and FTB -------------------------------------------------------------------------
    def _teacher_at_hand(self, ctx) -> bool:
        config = self.config
        if config.drift_scale == 0:
            return False
        if config.teacher in ctx.aux_model_names or config.teacher == "reference":
            return True
        if config.absent == "error":
            raise stackrl.PluginError(f"cadence.teacher: '{config.teacher}' names no model of this run")
        ctx.warn("absent_teacher")
        return False

    def score(self, ctx) -> dict[str, torch.Tensor]:
        """Student and teacher on every completion token, ``(N, T)``: the sampled token's log-prob under each, the
        teacher's entropy and the coverage of its top-k, from the full distributions a few rows at a time."""
        config, rollout = self.config, ctx.rollout
        temperature = config.temperature or ctx.sampling_temperature
        width = max((len(ids) for ids in rollout.completion_ids), default=0)
        parts: dict[str, list[torch.Tensor]] = {"student": [], "teacher": [], "entropy": [], "coverage": []}
        for start in range(0, len(rollout), config.rows_per_forward):
            rows = slice(start, start + config.rows_per_forward)
            contexts, ids = rollout.prompt_ids[rows], rollout.completion_ids[rows]
            student = ctx.score(contexts, ids, full_vocab=True, temperature=temperature)
            teacher = ctx.score(contexts, ids, model=config.teacher, full_vocab=True, temperature=temperature)
            s_vocab, t_vocab = student.vocab_logprobs.float(), teacher.vocab_logprobs.float()
            parts["student"].append(_pad(student.logprobs.float().cpu(), width))
            parts["teacher"].append(_pad(teacher.logprobs.float().cpu(), width))
            parts["entropy"].append(_pad(entropy(t_vocab).cpu(), width))
            parts["coverage"].append(_pad(coverage(s_vocab, t_vocab, config.coverage_k, config.coverage_tau).cpu(),
                                          width))
        return {name: torch.cat(values) for name, values in parts.items()}

    def beta(self, step: int) -> tuple[float, float]:
        """(COVA's beta, the cosine schedule's) at ``step`` with the current coverage average."""
        config = self.config
        cosine = cosine_beta(step, config.anneal_steps, config.beta_start, config.beta_end)
        if not config.cova:
            return cosine, cosine
        return cova_beta(cosine, self.coverage_ema, config.gate, config.alpha_max, config.beta_end), cosine

    @stackrl.hookimpl
    def reshape_advantages(self, advantages, ctx):
        config, rollout = self.config, ctx.rollout
        n = len(rollout)
        beyond = self.beyond if len(self.beyond) == n else [False] * n
        if not ctx.training or not self._teacher_at_hand(ctx):
            ctx.acted(sum(beyond), of=n, hint="no teacher, and no answer earned partial or brevity credit")
            return None
        mask = rollout.completion_mask().float()
        scored = self.score(ctx)
        real = mask.bool()
        batch_coverage = scored["coverage"][real].mean().item() if real.any() else None
        if batch_coverage is not None:
            decay = config.coverage_decay
            self.coverage_ema = (batch_coverage if self.coverage_ema is None
                                 else decay * self.coverage_ema + (1 - decay) * batch_coverage)
        beta, cosine = self.beta(ctx.step)
        k = log_ratio(scored["student"], scored["teacher"], mask)
        drift = drift_advantages(k, mask, beta, config.weight_clip)
        if config.boost:
            drift = drift * forking_boost(scored["entropy"], mask, config.boost, config.entropy_ref)
        reshaped = per_token(advantages, mask) + config.drift_scale * drift
        moved = ((drift.abs() > 0) & real).any(1).tolist()
        ctx.acted(sum(m or b for m, b in zip(moved, beyond)), of=n,
                  hint="the teacher agreed with the student on every token, and no answer earned partial credit")
        self.last = {"beta": beta, "beta_cosine": cosine, "batch_coverage": batch_coverage, "coverage_ema": self.coverage_ema,
                     "k": k, "drift": drift, "mask": mask, **scored}
        ctx.log("beta", beta)
        ctx.log("beta_cosine", cosine)
        if batch_coverage is not None:
            ctx.log("coverage", batch_coverage)
            ctx.log("coverage_ema", self.coverage_ema)
            ctx.log("reverse_kl", k[real].mean().item())
            ctx.log("teacher_entropy", scored["entropy"][real].mean().item())
            ctx.log("drift_mean", drift[real].mean().item())
        return reshaped

    @stackrl.hookimpl
    def state_dict(self):
        return {"coverage_ema": self.coverage_ema}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.coverage_ema = state.get("coverage_ema")
