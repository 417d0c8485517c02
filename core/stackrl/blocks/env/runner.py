"""The batched episode loop: every row's episode, one ``ctx.generate`` over the rows still playing per turn.

:class:`Runner` plays a batch of prompts (a ``generate_rollout``'s) in the configured environment and returns the
rollout as :class:`stackrl.Samples`: one row per live-policy seat of each episode, its completion the seat's actions
with the observations between them (loss mask 0; :mod:`stackrl.blocks.env.layout`), and per-row columns for the
plugins that credit turns or seats (the ``COLUMN`` names below). A group's ``group_size`` rows are
``group_size / seats`` episodes of its prompt, a row per live seat in seat order, all seeded alike from the step
and the group, so every process plays the same episodes. With ``rotate_seats`` each episode moves the players one
seat on from the episode before (the policy against a scripted opponent then moves first in half the episodes).

An episode stops when the environment says done, at ``max_turns`` actions, when a row's next turn would pass
``max_tokens``, and on a failure the settings end rather than raise (an environment that raises or breaks the
protocol, a turn with no action); each end is a value of the ``env_end`` column and a logged share.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from stackrl.blocks.env.actions import parse_action
from stackrl.blocks.env.layout import ACTION, observation_ids, shown_observation, with_observation
from stackrl.blocks.env.protocol import (
    Episode, EnvironmentFailure, Outcome, ToolCall, ToolFailure, construct, is_game, load_object, seats_of, tool_names,
)
from stackrl.blocks.env.settings import POLICY, SCRIPTED, SNAPSHOT, EnvSettings
from stackrl.blocks.turns import Trajectory, packed_samples
from stackrl.context import Samples
from stackrl.errors import ConfigError, PluginError, StackrlError
from stackrl.policy import is_chat, tool_schemas

SEAT_COLUMN = "env_seat"  # the seat the row played
EPISODE_COLUMN = "env_episode"  # the episode's index in the batch (a row per live seat shares it)
SEED_COLUMN = "env_seed"  # the episode's seed
TURN_REWARDS_COLUMN = "env_turn_rewards"  # one reward per action of the row: what its seat got until its next turn
RETURN_COLUMN = "env_return"  # the seat's whole reward: its turns' rewards and get_reward()'s
INFO_COLUMN = "env_info"  # the info dict of each action of the row
MOVES_COLUMN = "env_moves"  # the episode's actions in order, each [seat, action] (a tool call as [name, args, kwargs])
END_COLUMN = "env_end"  # why the episode stopped: done, turns, budget, unparsed or error
ENDS = ("done", "turns", "budget", "unparsed", "error")


def episode_seed(seed: int, step: int, group: int) -> int:
    """The seed of a group's episodes at a step: the same on every process and after a resume."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{step}:{group}".encode()).digest()[:7], "big")


@dataclass
class _Seat:
    player: str
    row: int | None = None  # the rollout row of a live-policy seat
    trajectory: Trajectory | None = None  # the seat's tokens so far (None before its first move)
    pending: str | None = None  # the observation it is shown before its next move
    turn_rewards: list[float] = field(default_factory=list)
    infos: list[dict] = field(default_factory=list)
    reward: float = 0.0  # all it was given, including rewards before its first move


@dataclass
class _Play:
    index: int
    prompt: object
    row: dict
    episode: Episode
    seats: list[_Seat]
    rng: random.Random
    live: list[int]  # the live policy's seats, one row each
    moves: list = field(default_factory=list)
    end: str | None = None


class Runner:
    """Plays batches of episodes of one environment under ``settings``."""

    def __init__(self, settings: EnvSettings):
        self.settings = settings
        self.env_class = load_object(settings.environment, key="env.environment")
        self.game = is_game(self.env_class)
        if not self.game and not callable(getattr(self.env_class, "reset", None)):
            raise ConfigError(f"env.environment: {self.env_class.__name__} has neither step() nor reset()")
        try:
            self.seats = seats_of(self.env_class, dict(settings.kwargs))
        except TypeError as e:
            raise ConfigError(f"env.kwargs: {self.env_class.__name__} cannot be made with them: {e}") from None
        self.players = list(settings.seats) or [POLICY] * self.seats
        if len(self.players) != self.seats:
            raise ConfigError(
                f"env.seats: lists {len(self.players)} players; {self.env_class.__name__} has {self.seats} seats"
            )
        self.grammar = settings.actions or ("move" if self.game else "tag")
        tool_grammar = self.grammar in ("tag", "tool_call")
        if self.game and tool_grammar:
            raise ConfigError(
                f"env.actions: '{self.grammar}' reads tool calls; {self.env_class.__name__} is a game (step)"
            )
        if not self.game and not tool_grammar:
            raise ConfigError(
                f"env.actions: '{self.grammar}' reads a game's action; {self.env_class.__name__} is played by its tools "
                f"({', '.join(tool_names(self.env_class)) or 'none'}): use tag or tool_call"
            )
        self.scripts = {
            p: load_object(p, key="env.seats") for p in self.players if ":" in p and not p.startswith(SNAPSHOT)
        }
        if SCRIPTED in self.players and not callable(getattr(self.env_class, "legal_actions", None)):
            raise ConfigError(
                f"env.seats: a scripted seat plays a random legal action; {self.env_class.__name__} has no "
                "legal_actions()"
            )
        self.live = [seat for seat, player in enumerate(self.players) if player == POLICY]
        self.schemas, self.schema_problem = self._tool_schemas()

    def _tool_schemas(self) -> tuple[list[dict] | None, str | None]:
        """The JSON schemas of a TRL-style environment's tools (from one instance's methods, as TRL makes them), or
        why there are none to show."""
        if self.game or self.settings.tool_schemas is False:
            return None, None
        probe = self.env_class(**dict(self.settings.kwargs))
        try:
            return tool_schemas([getattr(probe, name) for name in tool_names(self.env_class)]) or None, None
        except StackrlError as e:
            if self.settings.tool_schemas:
                raise ConfigError(f"env.tool_schemas: {e} (env.tool_schemas: null shows none instead)") from None
            return None, str(e)

    def _shown_tools(self, contexts: list, ctx) -> dict:
        """``tools=`` for a generation from chat prompts with a chat template: the tools' schemas, as TRL shows them."""
        if not (contexts and is_chat(contexts[0]) and getattr(ctx.tokenizer, "chat_template", None)):
            return {}
        if self.schema_problem:
            ctx.warn("tool_schemas_missing")
        return {"tools": self.schemas} if self.schemas else {}

    # -- the loop -------------------------------------------------------------------------------------------------

    def run(self, prompts: list, ctx) -> Samples:
        """Play every prompt's episodes and return their rows (see the module's docstring)."""
        per_episode = len(self.live)
        if len(prompts) % per_episode or ctx.group_size % per_episode:
            raise PluginError(
                f"env: {len(prompts)} rows in groups of {ctx.group_size} do not split into episodes of {per_episode} "
                "live-policy seats; make trainer.num_generations a multiple of it"
            )
        plays = [self._start(e, prompts, ctx) for e in range(len(prompts) // per_episode)]
        for _ in range(self.settings.max_turns):
            active = [p for p in plays if p.end is None]
            if not active:
                break
            movers: dict[str, list[tuple[_Play, int]]] = {}
            for play in active:
                seat = self._guarded(play, ctx, lambda play=play: play.episode.turn())
                if seat is not None:
                    movers.setdefault(play.seats[seat].player, []).append((play, seat))
            for player, moving in movers.items():
                for play, seat, text, cut in self._actions(player, moving, ctx):
                    self._apply(play, seat, text, generated=player not in self.scripts and player != SCRIPTED,
                                cut=cut, ctx=ctx)
        for play in plays:
            if play.end is None:
                play.end = "turns"
        self._finish(plays, ctx)
        return self._samples(plays, ctx)

    def _start(self, index: int, prompts: list, ctx) -> _Play:
        first_row = index * len(self.live)
        row = {"prompt": prompts[first_row], **{k: v[first_row] for k, v in ctx.rollout_columns.items()}}
        seed = episode_seed(self.settings.seed, ctx.step, first_row // ctx.group_size)
        shift = index % self.seats if self.settings.rotate_seats else 0
        seats = [_Seat(self.players[(seat - shift) % self.seats]) for seat in range(self.seats)]
        live = [seat for seat, state in enumerate(seats) if state.player == POLICY]
        for j, seat in enumerate(live):
            seats[seat].row = first_row + j
        play = _Play(index, prompts[first_row], row, None, seats, random.Random(seed), live)
        try:
            play.episode = construct(self.env_class, dict(self.settings.kwargs), self.seats, seed)
            first = play.episode.reset(row)
            seats[play.episode.turn()].pending = first
        except EnvironmentFailure as failure:
            self._failed(play, None, failure, ctx)
        return play

    def _guarded(self, play: _Play, ctx, call):
        try:
            return call()
        except EnvironmentFailure as failure:
            self._failed(play, None, failure, ctx)
            return None

    def _failed(self, play: _Play, seat: int | None, failure: EnvironmentFailure, ctx) -> None:
        seed = play.episode.seed if play.episode else "?"
        where = f"env: step {ctx.step}, row {play.seats[play.live[0]].row} (episode {play.index}, seed {seed})"
        if self.settings.on_error == "raise":
            raise PluginError(
                f"{where}: {self.env_class.__name__}.{failure.method} {failure.problem} (env.on_error: end ends such an "
                "episode instead, counted)"
            ) from failure.__cause__
        ctx.warn("environment_errors")
        if seat is not None:
            self._reward(play.seats[seat], self.settings.penalty)
        play.end = "error"

    @staticmethod
    def _reward(seat: _Seat, value: float) -> None:
        seat.reward += value
        if seat.turn_rewards:
            seat.turn_rewards[-1] += value

    def _context(self, play: _Play, seat: int, ctx):
        """What a seat's next action is sampled from: its prompt with its first observation (text), or its exact
        tokens so far with the observation since injected. ``None`` where that would pass the token budget."""
        s, state = self.settings, play.seats[seat]
        observation, state.pending = state.pending, None
        if state.trajectory is None:
            if observation is None:
                return play.prompt
            shown, cut = shown_observation(ctx.tokenizer, s.observation_template, observation, s.observation_tokens)
            if cut:
                ctx.warn("observations_cut")
            return with_observation(play.prompt, shown)
        if observation is not None:
            ids, cut = observation_ids(ctx.tokenizer, s.observation_template, observation, s.observation_tokens)
            if cut:
                ctx.warn("observations_cut")
            if len(state.trajectory.completion_ids) + len(ids) >= s.max_tokens:
                return None
            state.trajectory.inject(ids)
        return state.trajectory.context() if len(state.trajectory.completion_ids) < s.max_tokens else None

    def _actions(self, player: str, moving: list[tuple[_Play, int]], ctx):
        """Each moving seat's action text: sampled for the policy and snapshots (one call for the seats' first
        turns, from text, and one for the others, from tokens), chosen for scripted seats."""
        if player == SCRIPTED or player in self.scripts:
            for play, seat in moving:
                text = self._guarded(play, ctx, lambda play=play: self._scripted(player, play))
                if text is not None:
                    yield play, seat, text, False
            return
        model = POLICY if player == POLICY else player[len(SNAPSHOT):]
        if model != POLICY:
            self._ensure_snapshot(model, ctx)
        fresh, continued = [], []
        for play, seat in moving:
            context = self._context(play, seat, ctx)
            if context is None:
                play.end = "budget"
            else:
                (fresh if play.seats[seat].trajectory is None else continued).append((play, seat, context))
        for batch in (fresh, continued):
            if not batch:
                continue
            trajectories = [play.seats[seat].trajectory for play, seat, _ in batch]
            room = [self.settings.max_tokens - (0 if t is None else len(t.completion_ids)) for t in trajectories]
            contexts = [c for _, _, c in batch]
            generations = ctx.generate(contexts, model=model, max_new_tokens=min(self.settings.turn_tokens, max(room)),
                                       **self._shown_tools(contexts, ctx))
            for (play, seat, _), g, left in zip(batch, generations, room):
                state = play.seats[seat]
                ids, text, cut = list(g.completion_ids), g.text, len(g.completion_ids) > left
                if cut:  # the row's budget: keep the sampled prefix that fits
                    ids = ids[:left]
                    text = ctx.tokenizer.decode(ids, skip_special_tokens=True)
                if state.trajectory is None:
                    state.trajectory = Trajectory(g.prompt_ids)
                state.trajectory.add(ACTION, ids, text, ctx.eos_token_ids)
                yield play, seat, text, cut

    @staticmethod
    def _ensure_snapshot(name: str, ctx) -> None:
        """A snapshot seat no plugin has made yet plays the policy as it is now, kept from then on (and in
        checkpoints) until a plugin moves it with ``ctx.update_snapshot``."""
        try:
            ctx.policy.snapshot(name)
        except StackrlError:
            ctx.update_snapshot(name, checkpoint=True)

    def _scripted(self, player: str, play: _Play) -> str:
        """A scripted seat's action: a uniformly random legal one, or the configured function's."""
        if player == SCRIPTED:
            return play.rng.choice(play.episode.legal_actions())
        try:
            return str(self.scripts[player](play.episode.env, play.rng))
        except Exception as e:  # the user's opponent failed: reported like the environment's failures
            raise EnvironmentFailure(player, f"raised {type(e).__name__}: {e}") from e

    def _apply(self, play: _Play, seat: int, text: str, *, generated: bool, cut: bool, ctx) -> None:
        """Play a seat's turn; a turn the budget cut before it stated an action ends the episode there."""
        if play.end is not None:
            return
        state = play.seats[seat]
        state.turn_rewards.append(0.0)
        move = parse_action(self.grammar, text) if generated else text
        if move is None and not self.game:  # TRL's convention: a turn without a tool call is the final answer
            state.infos.append({})
            play.end = "done"
            return
        if move is None and cut:
            state.infos.append({})
            play.end = "budget"
            return
        if move is None:
            state.infos.append({"unparsed": True})
            self._unparsed(play, seat, text, ctx)
            return
        play.moves.append([seat, move] if isinstance(move, str) else [seat, [move.name, list(move.args), move.kwargs]])
        try:
            outcome = play.episode.step(move) if self.game else self._tool(play.episode, move, ctx)
            following = None if outcome.done else play.episode.turn()
        except EnvironmentFailure as failure:
            state.infos.append({"error": str(failure)})
            self._failed(play, seat, failure, ctx)
            return
        state.infos.append(outcome.info)
        for s, value in zip(play.seats, outcome.rewards):
            self._reward(s, value)
        if outcome.done:
            play.end = "done"
        else:
            play.seats[following].pending = outcome.observation

    def _tool(self, episode: Episode, call: ToolCall, ctx) -> Outcome:
        outcome = tool_outcome(episode, call, self.settings)
        if "tool_error" in outcome.info:
            ctx.warn("tool_errors")
        return outcome

    def _unparsed(self, play: _Play, seat: int, text: str, ctx) -> None:
        ctx.warn("unparsed_actions")
        if self.settings.on_unparsed == "raise":
            raise PluginError(
                f"env: step {ctx.step}, row {play.seats[seat].row} (episode {play.index}, seat {seat}): no action in "
                f"the turn {text!r} under env.actions '{self.grammar}' (env.on_unparsed: end or feedback go on)"
            )
        self._reward(play.seats[seat], self.settings.penalty)
        if self.settings.on_unparsed == "end":
            play.end = "unparsed"
        else:
            play.seats[seat].pending = self.settings.unparsed_feedback

    def _finish(self, plays: list[_Play], ctx) -> None:
        """The rewards of environments that own theirs, and a masked token for a live seat that never moved."""
        for play in plays:
            if play.episode is not None and self.seats == 1 and play.end != "error":
                value = self._guarded(play, ctx, play.episode.final_reward)
                if value is not None:
                    self._reward(play.seats[0], value)
        idle = [(play, seat) for play in plays for seat in play.live if play.seats[seat].trajectory is None]
        if idle:
            texts = [self._context(play, seat, ctx) for play, seat in idle]
            for (play, seat), g in zip(idle, ctx.generate(texts, max_new_tokens=1, **self._shown_tools(texts, ctx))):
                play.seats[seat].trajectory = Trajectory(g.prompt_ids)
                play.seats[seat].trajectory.inject(g.completion_ids[:1])  # attended to, never trained

    def _samples(self, plays: list[_Play], ctx) -> Samples:
        rows = [(play, seat) for play in plays for seat in play.live]
        columns = {
            SEAT_COLUMN: [seat for _, seat in rows],
            EPISODE_COLUMN: [play.index for play, _ in rows],
            SEED_COLUMN: [play.episode.seed if play.episode else None for play, _ in rows],
            TURN_REWARDS_COLUMN: [list(play.seats[seat].turn_rewards) for play, seat in rows],
            RETURN_COLUMN: [play.seats[seat].reward for play, seat in rows],
            INFO_COLUMN: [list(play.seats[seat].infos) for play, seat in rows],
            MOVES_COLUMN: [list(play.moves) for play, _ in rows],
            END_COLUMN: [play.end for play, _ in rows],
        }
        for end in ENDS:
            ctx.log(f"end/{end}", sum(p.end == end for p in plays) / len(plays))
        ctx.log("turns", sum(len(p.moves) for p in plays) / len(plays))
        ctx.log("return", sum(columns[RETURN_COLUMN]) / len(rows))
        ctx.acted(sum(p.end == "done" for p in plays), of=len(plays),
                  hint="episodes stopped before the environment's end: raise env.max_turns or env.max_tokens")
        return packed_samples([play.seats[seat].trajectory for play, seat in rows], columns)


def tool_outcome(episode: Episode, call: ToolCall, settings: EnvSettings) -> Outcome:
    """A tool's result; a tool that raised shows its error instead (``info["tool_error"]``), unless
    ``on_tool_error: fail`` makes it a failure of the environment."""
    try:
        return episode.call(call)
    except ToolFailure as failure:
        if settings.on_tool_error == "fail":
            raise
        return Outcome(f"error: {failure.problem.removeprefix('raised ')}", [0.0], False,
                       {"tool": call.name, "tool_error": failure.problem})


def replay(settings: EnvSettings, row: dict, seed: int, moves: list) -> list[Outcome]:
    """The outcomes of an episode's recorded moves (``env_moves``) replayed from its seed on a fresh environment."""
    env_class = load_object(settings.environment, key="env.environment")
    seats = seats_of(env_class, dict(settings.kwargs))
    episode = construct(env_class, dict(settings.kwargs), seats, seed)
    episode.reset(row)
    outcomes = []
    for _, move in moves:
        if isinstance(move, str):
            outcomes.append(episode.step(move))
        else:
            name, args, kwargs = move
            outcomes.append(tool_outcome(episode, ToolCall(name, tuple(args), kwargs), settings))
    return outcomes
