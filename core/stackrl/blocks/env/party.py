"""Text games for three or more players, in the runner's game protocol (:mod:`stackrl.blocks.env.protocol`) and the
``move`` grammar, for methods whose one policy plays every seat of a multi-party episode (OMAR's "one model, all
roles").

:class:`PublicGoods` is the iterated public-goods game: it is played with ``move: C`` and ``move: D`` and rendered
like the built-in prisoner's dilemma (``round``, ``you-them``, ``actions: C D``), so ``stackrl/arith-games`` plays it
legally without retraining (its prompt is the ``games`` task's prisoner's-dilemma prompt). That model reads the
layout only as it learned it: two letters a round (the seat's move, then whether all the others contributed) and
``of 4`` or ``of 5`` rounds (``of 2`` and ``of 3`` throw it off), hence the four rounds by default.
"""

from __future__ import annotations


class PublicGoods:
    """The iterated public-goods game: ``players`` seats (at least 3), ``rounds`` rounds. Each round every seat in
    seat order contributes its endowment of 1 (``C``) or keeps it (``D``), none seeing the others' moves of the
    round; after the round's last move each seat is paid what it kept plus an equal share of the contributions
    times ``multiplier``: ``(1 - c_i) + multiplier * sum(c) / players``. Below ``players`` the multiplier makes a
    social dilemma (keeping pays each seat more, contributing pays the group more); above it contributing pays
    everyone. Another action ends the game: its seat gets -1, the others 0 (``info["illegal"]``)."""

    def __init__(self, players: int = 3, rounds: int = 4, multiplier: float = 2.0):
        if players < 3:
            raise ValueError(f"players must be at least 3, not {players}")
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1, not {rounds}")
        if multiplier <= 0:
            raise ValueError(f"multiplier must be positive, not {multiplier}")
        self.seats, self.rounds, self.multiplier = players, rounds, float(multiplier)
        self.turn = 0

    def reset(self, seed: int = 0, **row) -> str:
        self.played: list[tuple[str, ...]] = []
        self.pending: list[str] = []
        self.turn = 0
        return self.render()

    def render(self) -> str:
        """The seat to move's view, in the prisoner's dilemma's layout: the round, and each past round as its own
        move then ``C`` if every other seat contributed, else ``D``."""
        me = self.turn
        past = ", ".join(
            moves[me] + ("C" if all(m == "C" for s, m in enumerate(moves) if s != me) else "D") for moves in self.played
        )
        return f"round {len(self.played) + 1} of {self.rounds}\nyou-them: {past or '-'}\nactions: C D"

    def legal_actions(self) -> list[str]:
        return ["C", "D"]

    def payoffs(self, moves) -> list[float]:
        """Each seat's pay for one round's moves."""
        pot = self.multiplier * sum(m == "C" for m in moves) / self.seats
        return [float(m == "D") + pot for m in moves]

    def step(self, text: str):
        action = text.strip().upper()
        if action not in ("C", "D"):
            rewards = [0.0] * self.seats
            rewards[self.turn] = -1.0
            return None, rewards, True, {"illegal": text}
        self.pending.append(action)
        if len(self.pending) < self.seats:
            self.turn += 1
            return self.render(), [0.0] * self.seats, False, {}
        moves, self.pending, self.turn = tuple(self.pending), [], 0
        self.played.append(moves)
        done = len(self.played) == self.rounds
        return (None if done else self.render()), self.payoffs(moves), done, {"round": "".join(moves)}
