"""The paper's bandit figures for one episode of the built-in bandit (:class:`stackrl.blocks.env.games.Bandit`):
cumulative regret, the share of pulls on the optimal arm and the action coverage.

The arms' odds are the environment's own, rebuilt from the episode's seed (``env_seed``); the pulls are read from
the row's ``env_info`` (``{"arm": k}`` for a pull of arm k, counted from 1; ``{"invalid": ...}`` for a pull of no
arm, which pays nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from stackrl.blocks.env.games import Bandit


def bandit_odds(seed: int, arms: int) -> list[float]:
    """Each arm's probability of paying 1 in the episode seeded ``seed``."""
    bandit = Bandit(arms=arms, pulls=1)
    bandit.reset(seed=seed)
    return list(bandit.odds)


def pulls_of(infos: list[dict]) -> list[int | None] | None:
    """The arms a bandit row pulled (``None`` for a pull of no arm), or ``None`` where it pulled none (a row of
    another environment)."""
    pulls = [info["arm"] if "arm" in info else None for info in infos if "arm" in info or "invalid" in info]
    return pulls or None


@dataclass(frozen=True)
class BanditFigures:
    regret: float  # sum over pulls of the best arm's odds minus the pulled arm's (0 for a pull of no arm)
    optimal: float  # share of pulls on the best arm
    coverage: float  # share of the arms pulled at least once


def bandit_figures(pulls: list[int | None], odds: list[float]) -> BanditFigures:
    """The figures of one episode's ``pulls`` (arms counted from 1) under ``odds``."""
    best = max(range(len(odds)), key=lambda arm: odds[arm]) + 1
    regret = sum(odds[best - 1] - (odds[arm - 1] if arm is not None else 0.0) for arm in pulls)
    optimal = sum(arm == best for arm in pulls) / len(pulls) if pulls else 0.0
    coverage = len({arm for arm in pulls if arm is not None}) / len(odds)
    return BanditFigures(regret, optimal, coverage)
