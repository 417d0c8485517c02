"""Text games in pure Python, for tests and recipes: each follows the game protocol
(:mod:`stackrl.blocks.env.protocol`), is seeded by ``reset(seed=...)``, lists its ``legal_actions()`` (the runner's
scripted opponent plays them at random) and shows the seat to move a short rendering a small model can learn to play
from. Actions are read with the ``move`` grammar (``move: 5``). An illegal action ends the game, lost by the seat
that played it (``info["illegal"]``), in the two-seat zero-sum games.
"""

from __future__ import annotations

import random


class _TwoSeats:
    seats = 2

    def __init__(self):
        self.turn = 0

    def _illegal(self, action: str):
        """An illegal action ends the game, lost by its player."""
        rewards = [1.0, 1.0]
        rewards[self.turn] = -1.0
        return None, rewards, True, {"illegal": action}


class TicTacToe(_TwoSeats):
    """Tic-tac-toe: cells 1 to 9, seat 0 plays X and moves first; a win is worth 1, a loss -1, a draw 0."""

    LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))

    def reset(self, seed: int = 0, **row) -> str:
        self.board, self.turn = [" "] * 9, 0
        return self.render()

    def render(self) -> str:
        cells = [c if c != " " else str(i + 1) for i, c in enumerate(self.board)]
        rows = ["".join(cells[i : i + 3]) for i in (0, 3, 6)]
        return "\n".join(rows) + f"\nyou: {'XO'[self.turn]}"

    def legal_actions(self) -> list[str]:
        return [str(i + 1) for i, c in enumerate(self.board) if c == " "]

    def step(self, action: str):
        if action.strip() not in self.legal_actions():
            return self._illegal(action)
        mark = "XO"[self.turn]
        self.board[int(action) - 1] = mark
        if any(all(self.board[i] == mark for i in line) for line in self.LINES):
            rewards = [-1.0, -1.0]
            rewards[self.turn] = 1.0
            return None, rewards, True, {"winner": self.turn}
        if " " not in self.board:
            return None, [0.0, 0.0], True, {"winner": None}
        self.turn = 1 - self.turn
        return self.render(), [0.0, 0.0], False, {}


class KuhnPoker(_TwoSeats):
    """Kuhn poker: cards J < Q < K, one each, ante 1; seat 0 acts first (check or bet 1), a bet is called or
    folded; the showdown's higher card takes the pot. Rewards are chips won or lost."""

    def reset(self, seed: int = 0, **row) -> str:
        self.cards = random.Random(seed).sample("JQK", 2)
        self.history: list[str] = []
        self.turn = 0
        return self.render()

    def render(self) -> str:
        return (f"card: {self.cards[self.turn]}\nhistory: {' '.join(self.history) or '-'}\n"
                f"actions: {' '.join(self.legal_actions())}")

    def legal_actions(self) -> list[str]:
        return ["call", "fold"] if self.history and self.history[-1] == "bet" else ["check", "bet"]

    def _showdown(self, stake: float):
        winner = 0 if "JQK".index(self.cards[0]) > "JQK".index(self.cards[1]) else 1
        rewards = [-stake, -stake]
        rewards[winner] = stake
        return None, rewards, True, {"winner": winner}

    def step(self, action: str):
        action = action.strip()
        if action not in self.legal_actions():
            return self._illegal(action)
        self.history.append(action)
        if action == "fold":
            rewards = [1.0, 1.0]
            rewards[self.turn] = -1.0
            return None, rewards, True, {"winner": 1 - self.turn}
        if self.history == ["check", "check"]:
            return self._showdown(1.0)
        if action == "call":
            return self._showdown(2.0)
        self.turn = 1 - self.turn
        return self.render(), [0.0, 0.0], False, {}


class PrisonersDilemma(_TwoSeats):
    """The iterated prisoner's dilemma over ``rounds`` rounds: each round seat 0 then seat 1 plays C or D, neither
    seeing the other's move of the round; the round pays (3, 3), (0, 5), (5, 0) or (1, 1), given after it."""

    PAYOFF = {("C", "C"): (3.0, 3.0), ("C", "D"): (0.0, 5.0), ("D", "C"): (5.0, 0.0), ("D", "D"): (1.0, 1.0)}

    def __init__(self, rounds: int = 5):
        super().__init__()
        self.rounds = rounds

    def reset(self, seed: int = 0, **row) -> str:
        self.played: list[tuple[str, str]] = []
        self.pending: str | None = None
        self.turn = 0
        return self.render()

    def render(self) -> str:
        past = ", ".join(f"{mine}{theirs}" for mine, theirs in (p if self.turn == 0 else p[::-1] for p in self.played))
        return f"round {len(self.played) + 1} of {self.rounds}\nyou-them: {past or '-'}\nactions: C D"

    def legal_actions(self) -> list[str]:
        return ["C", "D"]

    def step(self, action: str):
        action = action.strip().upper()
        if action not in ("C", "D"):
            return self._illegal(action)
        if self.turn == 0:
            self.pending, self.turn = action, 1
            return self.render(), [0.0, 0.0], False, {}
        pair = (self.pending, action)
        self.played.append(pair)
        self.turn = 0
        done = len(self.played) == self.rounds
        return (None if done else self.render()), list(self.PAYOFF[pair]), done, {"round": pair}


class Bandit:
    """A multi-armed bandit: ``arms`` arms paying 1 with probabilities drawn from the seed, ``pulls`` pulls; the
    observation shows each arm's pulls and wins so far. A pull of no arm pays nothing (``info["invalid"]``)."""

    seats = 1

    def __init__(self, arms: int = 3, pulls: int = 5):
        self.arms, self.pulls = arms, pulls

    def reset(self, seed: int = 0, **row) -> str:
        self.rng = random.Random(seed)
        self.odds = [self.rng.random() for _ in range(self.arms)]
        self.counts = [[0, 0] for _ in range(self.arms)]
        self.left = self.pulls
        return self.render()

    def render(self) -> str:
        stats = " ".join(f"{i + 1}:{won}/{n}" for i, (won, n) in enumerate(self.counts))
        return f"arms {stats}\npulls left: {self.left}"

    def legal_actions(self) -> list[str]:
        return [str(i + 1) for i in range(self.arms)]

    def step(self, action: str):
        self.left -= 1
        if action.strip() not in self.legal_actions():
            return self.render(), 0.0, self.left == 0, {"invalid": action}
        arm = int(action) - 1
        paid = float(self.rng.random() < self.odds[arm])
        self.counts[arm][0] += int(paid)
        self.counts[arm][1] += 1
        return self.render(), paid, self.left == 0, {"arm": arm + 1, "paid": paid}


class Negotiation(_TwoSeats):
    """A deal-or-no-deal negotiation: three kinds of items in counts drawn from the seed, each seat's own values
    for them (private); seats take turns to propose what they take (``propose 1 0 2``) or ``accept`` the other's
    last proposal. A deal pays each seat the value of its share; no deal after ``rounds`` proposals, or an invalid
    action, pays both 0."""

    def __init__(self, rounds: int = 6):
        super().__init__()
        self.rounds = rounds

    def reset(self, seed: int = 0, **row) -> str:
        rng = random.Random(seed)
        self.items = [rng.randint(1, 3) for _ in range(3)]
        self.values = [[rng.randint(0, 3) for _ in range(3)] for _ in range(2)]
        self.offer: list[int] | None = None  # what the last proposer takes
        self.proposals, self.turn = 0, 0
        return self.render()

    def render(self) -> str:
        offer = "-" if self.offer is None else " ".join(str(n - t) for n, t in zip(self.items, self.offer))
        return (f"items: {' '.join(map(str, self.items))}\nvalues: {' '.join(map(str, self.values[self.turn]))}\n"
                f"offered you: {offer}")

    def legal_actions(self) -> list[str]:
        takes = [f"propose {a} {b} {c}" for a in range(self.items[0] + 1) for b in range(self.items[1] + 1)
                 for c in range(self.items[2] + 1)]
        return takes + (["accept"] if self.offer is not None else [])

    def step(self, action: str):
        words = action.split()
        if words == ["accept"] and self.offer is not None:
            proposer = 1 - self.turn
            shares = {proposer: self.offer, self.turn: [n - t for n, t in zip(self.items, self.offer)]}
            rewards = [float(sum(v * k for v, k in zip(self.values[s], shares[s]))) for s in (0, 1)]
            return None, rewards, True, {"deal": shares[0]}
        take = [int(w) for w in words[1:] if w.isdigit()]
        if words[:1] != ["propose"] or len(take) != 3 or len(words) != 4 or any(t > n for t, n in zip(take, self.items)):
            return None, [0.0, 0.0], True, {"illegal": action}
        self.offer, self.proposals = take, self.proposals + 1
        if self.proposals == self.rounds:
            return None, [0.0, 0.0], True, {"deal": None}
        self.turn = 1 - self.turn
        return self.render(), [0.0, 0.0], False, {}
