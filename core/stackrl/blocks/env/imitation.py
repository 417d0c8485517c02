"""Teaching a model the built-in games, for ``stackrl/arith-games`` (:mod:`stackrl.blocks.env.pretrain_games`):
demonstration episodes (random legal moves; simple offers in the negotiation)
laid out exactly as the environment runner lays them out (:func:`stackrl.blocks.env.layout.episode_layout`), and
:func:`play`, the policy against the runner's scripted opponent (a uniformly random legal move), measured.

An action is ``move: A`` (the runner's ``move`` grammar) followed by the end-of-sequence token; each observation is
shown in the runner's default template (``"\\n{observation}\\n"``). A row's prompt is the game's :data:`PROMPTS`
entry (:mod:`stackrl.tasks.games`, the built-in task ``games``).
"""

from __future__ import annotations

import random

from stackrl.blocks.env.actions import parse_action
from stackrl.blocks.env.layout import episode_layout, observation_ids, shown_observation, tokens, turn_examples
from stackrl.blocks.env.protocol import load_object
from stackrl.tasks.games import GAMES, PROMPTS

__all__ = ["TEMPLATE", "demo_action", "demo_examples", "play", "prompt_ids"]

TEMPLATE = "\n{observation}\n"  # the runner's default observation_template
_ACCEPT = 0.5  # the demonstration's chance of accepting an offer in the negotiation


def demo_action(env, rng: random.Random) -> str:
    """The demonstrated action: a uniformly random legal one; in the negotiation, with an offer on the table,
    ``accept`` half the time, else a proposal that takes a random share of each kind of item."""
    legal = env.legal_actions()
    if "accept" in legal and rng.random() < _ACCEPT:
        return "accept"
    return rng.choice([a for a in legal if a != "accept"])


def prompt_ids(tokenizer, game: str, observation: str) -> list[int]:
    """The tokens of a seat's prompt: the game's prompt and its first observation (uncut), as the runner shows it."""
    return tokens(tokenizer, PROMPTS[game] + shown_observation(tokenizer, TEMPLATE, observation, None)[0])


def demo_examples(tokenizer, game: str, seed: int, choose=demo_action) -> list[tuple[list[int], list[int]]]:
    """(context, ``move: A`` and eos) pairs of every action of every seat of one demonstration episode (every seat
    played by ``choose(env, rng)``, :func:`demo_action` by default), each seat's row laid out by the runner's layout,
    seat 0's pairs first."""
    env = load_object(game, key="game")()
    rng = random.Random(seed)
    first = env.reset(seed=seed)
    seats = getattr(env, "seats", 1)
    views: list[list] = [[None, []] for _ in range(seats)]  # each seat's first observation and (action, next seen)
    pending = {0: first}
    done = False
    while not done:
        seat = getattr(env, "turn", 0) if seats > 1 else 0
        view = views[seat]
        seen = pending.pop(seat)
        if view[0] is None:
            view[0] = seen
        elif view[1]:
            view[1][-1][1] = seen
        action = choose(env, rng)
        view[1].append([f"move: {action}", None])
        observation, _, done, _ = env.step(action)
        if not done:
            pending[getattr(env, "turn", 0) if seats > 1 else 0] = observation
    pairs = []
    eos = tokenizer.eos_token_id
    for first_seen, turns in views:
        if first_seen is None:
            continue
        layout = episode_layout(tokenizer, prompt_ids(tokenizer, game, first_seen), [tuple(t) for t in turns], eos,
                                template=TEMPLATE)
        ids, _, segments = layout.packed()
        pairs += turn_examples(layout.prompt_ids, ids, segments, eos)
    return pairs


def _continue(model, tokenizer, contexts: list[list[int]], *, greedy: bool, max_new_tokens: int) -> list[list[int]]:
    """The new tokens of each context (left-padded in one batch), up to and with the end-of-sequence token."""
    import torch

    width = max(map(len, contexts))
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(c)) + c for c in contexts])
    mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts])
    sampling = {"do_sample": False} if greedy else {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0}
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                             eos_token_id=tokenizer.eos_token_id, pad_token_id=pad, **sampling)
    news = []
    for row in out[:, width:].tolist():
        news.append(row[: row.index(tokenizer.eos_token_id) + 1] if tokenizer.eos_token_id in row else row)
    return news


def play(model, tokenizer, game: str, episodes: int, *, greedy: bool = True, seed: int = 0,
         max_new_tokens: int = 32, penalty: float = 0.0) -> dict[str, float]:
    """The policy against a random legal opponent in ``episodes`` episodes (seeds ``seed``...; the policy takes
    seat 0 in even episodes and seat 1 in odd ones), each seat's context laid out as the runner lays it out.
    An action may take ``max_new_tokens`` (the runner's ``env.turn_tokens`` default). Returns ``legal`` (the share of the policy's turns that stated a legal action), ``return`` (its mean return),
    and in the two-seat games ``win``/``draw``/``loss`` (its return above, equal to or below the opponent's). A
    turn with no legal action ends the episode as the runner and game do (unparsed: ``penalty`` to the policy, the
    runner's ``env.penalty``, 0 by default; illegal: the game's rule)."""
    import torch

    was_training = model.training
    model.eval()
    env_class = load_object(game, key="game")
    eos = tokenizer.eos_token_id
    plays = []
    for e in range(episodes):
        env = env_class()
        first = env.reset(seed=seed + e)
        seats = getattr(env, "seats", 1)
        plays.append({"env": env, "seat": e % seats, "seen": first, "context": None, "rng": random.Random(seed + e),
                      "returns": [0.0] * seats, "done": False, "turns": 0, "legal": 0})
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for _ in range(64):
                live = [p for p in plays if not p["done"]]
                if not live:
                    break
                for p in live:  # the opponent's moves until the policy's turn (or the end)
                    while not p["done"] and getattr(p["env"], "turn", 0) != p["seat"]:
                        _step(p, _random_legal(p))
                movers = [p for p in live if not p["done"]]
                if not movers:
                    continue
                for p in movers:
                    if p["context"] is None:
                        p["context"] = prompt_ids(tokenizer, game, p["seen"])
                    else:
                        p["context"] += observation_ids(tokenizer, TEMPLATE, p["seen"], None)[0]
                news = _continue(model, tokenizer, [p["context"] for p in movers], greedy=greedy,
                                 max_new_tokens=max_new_tokens)
                for p, new in zip(movers, news):
                    p["context"] += [t for t in new if t != eos]  # the runner holds the eos back
                    p["turns"] += 1
                    move = parse_action("move", tokenizer.decode(new, skip_special_tokens=True))
                    if move is None:
                        p["done"] = True  # the runner's on_unparsed: end, the penalty to the seat
                        p["returns"][p["seat"]] += penalty
                        continue
                    p["legal"] += move.strip() in p["env"].legal_actions()
                    _step(p, move)
    finally:
        model.train(was_training)
    figures = {"legal": sum(p["legal"] for p in plays) / max(1, sum(p["turns"] for p in plays)),
               "return": sum(p["returns"][p["seat"]] for p in plays) / episodes}
    if len(plays[0]["returns"]) == 2:
        margins = [p["returns"][p["seat"]] - p["returns"][1 - p["seat"]] for p in plays]
        figures |= {"win": sum(m > 0 for m in margins) / episodes, "draw": sum(m == 0 for m in margins) / episodes,
                    "loss": sum(m < 0 for m in margins) / episodes}
    return figures


def _random_legal(p: dict) -> str:
    """The runner's scripted opponent: a uniformly random legal action."""
    return p["rng"].choice(p["env"].legal_actions())


def _step(p: dict, action: str) -> None:
    observation, rewards, done, _ = p["env"].step(action)
    rewards = rewards if isinstance(rewards, list) else [rewards]
    p["returns"] = [a + b for a, b in zip(p["returns"], rewards)]
    p["done"] = done
    if not done and (len(p["returns"]) == 1 or getattr(p["env"], "turn", 0) == p["seat"]):
        p["seen"] = observation

