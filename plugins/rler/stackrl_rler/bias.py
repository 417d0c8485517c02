"""The bias diagnostics of a self-reward against the truth (RLER's three), and the label-free coupling the plugin
logs online.

For rewards ``r_i`` in [0, 1] and correctness ``y_i`` (1 right, 0 wrong), the error ``e_i = r_i - y_i``:

    rho_noise    = mean |e_i|                                   how far the reward is from the oracle
    rho_symbias  = (sum max(e_i, 0) - sum max(-e_i, 0))
                   / (sum |e_i|)                                over- (> 0) against under-reward (< 0); 0 when exact
    rho_selfbias = corr(s_i, e_i)                               how the error follows the policy's own confidence
                                                                s_i (its share of the row's answer in its group)
    coupling     = corr(s_i, r_i)                               label-free: how the reward follows that confidence
"""

from __future__ import annotations

import torch


def _tensor(values) -> torch.Tensor:
    return torch.as_tensor(values, dtype=torch.float64).flatten()


def rho_noise(rewards, correct) -> float:
    return (_tensor(rewards) - _tensor(correct)).abs().mean().item()


def rho_symbias(rewards, correct) -> float:
    error = _tensor(rewards) - _tensor(correct)
    size = error.abs().sum()
    return 0.0 if size == 0 else ((error.clamp(min=0).sum() - (-error).clamp(min=0).sum()) / size).item()


def correlation(x, y) -> float | None:
    """Pearson's correlation; None where either side is constant."""
    x, y = _tensor(x), _tensor(y)
    x, y = x - x.mean(), y - y.mean()
    scale = (x.pow(2).sum() * y.pow(2).sum()).sqrt()
    return None if scale == 0 else (x * y).sum().div(scale).item()


def rho_selfbias(self_shares, rewards, correct) -> float | None:
    return correlation(self_shares, _tensor(rewards) - _tensor(correct))


def diagnostics(rewards, correct, self_shares) -> dict[str, float]:
    """The three figures (rho_selfbias left out where undefined)."""
    figures = {"rho_noise": rho_noise(rewards, correct), "rho_symbias": rho_symbias(rewards, correct)}
    selfbias = rho_selfbias(self_shares, rewards, correct)
    if selfbias is not None:
        figures["rho_selfbias"] = selfbias
    return figures
