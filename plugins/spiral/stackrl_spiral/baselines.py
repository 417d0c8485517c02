"""Role-conditioned advantage estimation (RAE): a moving baseline of the return per game and per role (seat).

SPIRAL's rule (train_spiral.py, ``prepare_trajectories``): for each finished episode and each seat ``p`` trained,
in the order the episodes come, the advantage is ``A = R_p - b[G, p]`` with the baseline read *before* it takes
the return in, then ``b[G, p] <- decay * b[G, p] + (1 - decay) * R_p``. Baselines start at 0. No group mean, no
division by a standard deviation.
"""

from __future__ import annotations

from collections.abc import Sequence

Role = tuple[str, int]  # (game, seat)


class RoleBaselines:
    """The moving baselines ``b[game, seat]`` of one run (plugin state: checkpointed)."""

    def __init__(self, decay: float):
        self.decay = decay
        self.values: dict[Role, float] = {}

    def baseline(self, role: Role) -> float:
        return self.values.get(role, 0.0)

    def advantages(self, returns: Sequence[float], roles: Sequence[Role], *, update: bool = True) -> list[float]:
        """Each row's return less its role's baseline as it stood before the row; the baseline then takes the
        row's return in. Rows are taken in order, so a later episode of a batch sees the earlier ones' returns.
        With ``update`` false the same advantages are computed and the baselines are left as they were."""
        values = self.values if update else dict(self.values)
        out = []
        for value, role in zip(returns, roles, strict=True):
            before = values.get(role, 0.0)
            out.append(float(value) - before)
            values[role] = self.decay * before + (1.0 - self.decay) * float(value)
        return out

    def state_dict(self) -> dict:
        roles = sorted(self.values)
        return {"games": [g for g, _ in roles], "seats": [s for _, s in roles],
                "values": [self.values[r] for r in roles]}

    def load_state_dict(self, state: dict) -> None:
        self.values = {(g, int(s)): float(v) for g, s, v in zip(state["games"], state["seats"], state["values"])}
