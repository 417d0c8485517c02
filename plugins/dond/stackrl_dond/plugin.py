"""DoND self-play: rounds of filtered behaviour cloning on the policy's own games (arXiv 2406.18872).

Paper: Liao, Tomlin, Klein, "Efficacy of Language Model Self-Play in Non-Zero-Sum Games". Code followed:
github.com/nickatomlin/lm-selfplay @ a3922a0 (the filter of ``utils.concatenate``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

import stackrl
from stackrl.blocks.env import ACTION, EPISODE_COLUMN, INFO_COLUMN, RETURN_COLUMN, SEAT_COLUMN, turn_examples
from stackrl.blocks.turns import SEGMENTS_COLUMN
from stackrl_dond.config import DondConfig, check
from stackrl_dond.filtering import cutoff, kept, seat_score

PHASE = "bc"  # the rounds' fine-tuning, logged as phase/bc/...


@dataclass
class Seat:
    """One live-policy seat of one of the round's games: its score under the objective, whether its game reached a
    deal, and its actions as (context, action and eos) pairs."""

    score: float
    deal: bool
    pairs: list[tuple[list[int], list[int]]] = field(default_factory=list)


class Dond(stackrl.Plugin):
    """Self-play by filtered behaviour cloning.

    The env runner plays each step's games with the live policy in every seat. A round is ``every`` steps of games;
    at its end every seat is scored under ``objective``, the seats that pass ``filter`` are kept, and the live policy
    is fine-tuned on their actions only (each action after its exact context: the seat's prompt, its earlier actions
    and the observations it saw, which are never targets), with a fresh optimizer. The next round's games are played
    by the fine-tuned policy. With ``grpo: false`` (the paper) every advantage is 0, so the phases are the only
    training; the seats of the round in progress are plugin state, so a resumed run continues exactly.
    """

    Config = DondConfig
    activity = "seats of the round's games passed the filter and had their actions imitated"

    def __init__(self, config=None):
        super().__init__(config)
        check(self.config)
        self.round: list[Seat] = []  # the seats of the round in progress
        self.rounds = 0
        self.last_round: dict | None = None  # the last ended round (scores, cutoff, kept), for logs and tests

    def check_run(self, run):
        return [run.past_end("dond.every", self.config.every, "the first round's fine-tuning comes at the end")]

    @stackrl.hookimpl
    def reshape_advantages(self, advantages, ctx):
        if self.config.grpo:
            return None
        return torch.zeros_like(advantages)  # the paper's training is the fine-tuning phases alone

    @stackrl.hookimpl
    def post_step(self, ctx):
        seats, episodes, deals = self._seats(ctx)
        self.round += seats
        ctx.log("agreement", deals / episodes if episodes else 0.0)
        ctx.log("score", sum(s.score for s in seats) / len(seats) if seats else 0.0)
        if ctx.step % self.config.every:
            ctx.acted(0, of=0)  # the round goes on
            return
        self._end_round(ctx)

    def _seats(self, ctx) -> tuple[list[Seat], int, int]:
        """The step's live-policy seats (those whose score the objective can tell), its episodes and how many of
        them reached a deal."""
        rollout = ctx.rollout
        columns = rollout.columns
        if any(c not in columns for c in (SEAT_COLUMN, EPISODE_COLUMN, RETURN_COLUMN, SEGMENTS_COLUMN)):
            ctx.warn("no_env_rows")  # not the env runner's rollout: nothing to filter
            return [], 0, 0
        games: dict[tuple, list[int]] = {}
        for row in range(len(rollout)):
            games.setdefault((row // rollout.group_size, columns[EPISODE_COLUMN][row]), []).append(row)
        infos = columns.get(INFO_COLUMN) or [[]] * len(rollout)
        eos = ctx.tokenizer.eos_token_id
        seats, deals = [], 0
        for rows in games.values():
            deal = any(isinstance(info, dict) and info.get("deal") is not None for r in rows for info in infos[r] or [])
            deals += deal
            returns: dict[int, float] = {int(columns[SEAT_COLUMN][r]): float(columns[RETURN_COLUMN][r]) for r in rows}
            if self.config.objective != "self" and len(returns) < 2:
                ctx.warn("other_seat_not_policy", len(rows))  # its return is not in the rollout
                continue
            full = [returns.get(s, 0.0) for s in range(max(returns) + 1)]
            for r in rows:
                actions = [s for s in columns[SEGMENTS_COLUMN][r] if s.kind == ACTION]
                pairs = turn_examples(rollout.prompt_ids[r], rollout.completion_ids[r], actions, eos)
                seats.append(Seat(seat_score(full, int(columns[SEAT_COLUMN][r]), self.config.objective), deal, pairs))
        return seats, len(games), deals

    def _end_round(self, ctx) -> None:
        """Filter the round's seats and fine-tune the live policy on the kept seats' actions."""
        config = self.config
        scores = [s.score for s in self.round]
        keep = kept(scores, [s.deal for s in self.round], config.objective, config.filter)
        pairs = [pair for seat, k in zip(self.round, keep) if k for pair in seat.pairs]
        bar = cutoff(scores, config.filter)
        self.rounds += 1
        self.last_round = {"scores": scores, "deals": [s.deal for s in self.round], "kept": keep, "cutoff": bar,
                           "pairs": pairs}
        ctx.log("cutoff", bar if bar is not None else float("nan"))
        ctx.log("kept", sum(keep))
        ctx.log("pairs", len(pairs))
        ctx.acted(sum(keep), of=len(self.round),
                  hint=f"no seat passed dond.filter {config.filter!r} under dond.objective {config.objective!r}")
        self.round = []
        if not pairs:
            ctx.warn("nothing_kept")  # the policy plays the next round unchanged
            return
        ctx.supervised_phase(PHASE, [c for c, _ in pairs], [t for _, t in pairs],
                             learning_rate=config.sft_learning_rate, epochs=config.sft_epochs,
                             batch_size=config.sft_batch_size)

    @stackrl.hookimpl
    def state_dict(self):
        return {"round": [[s.score, s.deal, [[list(c), list(t)] for c, t in s.pairs]] for s in self.round],
                "rounds": self.rounds}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.round = [Seat(float(score), bool(deal), [(list(c), list(t)) for c, t in pairs])
                      for score, deal, pairs in state["round"]]
        self.rounds = int(state["rounds"])
