"""Make the built-in ``stackrl/arith-games`` checkpoint: ``stackrl/arith-tiny`` taught to play the environment
runner's built-in games (tic-tac-toe, Kuhn poker, the iterated prisoner's dilemma, the bandit and the negotiation)
in its move format by imitating random legal moves (:mod:`stackrl.blocks.env.imitation`), so that RL in the ``env`` plugin
starts from a policy that moves legally and has a win rate to raise.

Remake it (CPU, one thread; core/stackrl/assets/arith-games/README.md gives the command the shipped checkpoint was
made with)::

    HF_HUB_OFFLINE=1 python -m stackrl.blocks.env.pretrain_games --out core/stackrl/assets/arith-games --init core/stackrl/assets/arith-tiny --threads 1

One phase from arith-tiny's weights: ``--steps`` batches of ``--batch-size`` examples, each example one action of a
fresh demonstration episode of a game drawn uniformly (every seat's actions of the episode, each after its exact
context: :func:`stackrl.blocks.env.imitation.demo_examples`), AdamW at a constant rate after ``--warmup`` steps, the loss a mean
over examples (the ``_fit`` of the earlier phases). The checkpoint carries ``stackrl_pretrain.json`` with the
settings, the hash of :data:`RECIPE`, the hash of the starting weights and the figures of
:func:`evaluate_games`. Arithmetic is not in the mix: the model is a game player (arith-tiny stays the solver).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from stackrl.tasks.pretrain import RECORD_FILE, _fit, file_hash, recipe_hash
from stackrl.tasks.pretrain_roles import phase_main

__all__ = ["RECIPE", "evaluate_games", "finish_snapshot", "main", "pretrain_games"]


def _games_batches(tokenizer, rng: random.Random, batch_size: int):
    from stackrl.blocks.env.imitation import demo_examples
    from stackrl.tasks.games import GAMES

    pool: list = []
    while True:
        while len(pool) < batch_size:
            pool += demo_examples(tokenizer, rng.choice(GAMES), rng.randrange(2**31))
        rng.shuffle(pool)
        yield pool[:batch_size]
        pool = pool[batch_size:]


def evaluate_games(model, tokenizer, *, episodes: int = 100, seed: int = 0) -> dict[str, dict]:
    """Per game, greedy and sampled at temperature 1, :func:`stackrl.blocks.env.imitation.play`'s figures against the random
    legal opponent on ``episodes`` held-out seeds (from 10**9 + seed; training draws below 2**31 at random)."""
    from stackrl.blocks.env.imitation import play
    from stackrl.tasks.games import GAMES

    return {game: {mode: play(model, tokenizer, game, episodes, greedy=mode == "greedy", seed=10**9 + seed)
                   for mode in ("greedy", "sampled")} for game in GAMES}


# What decides the weights, besides the settings and the starting checkpoint: the games, the prompts and layout,
# the demonstrations and the training loop.
RECIPE = (
    "stackrl.blocks.env.games:TicTacToe",
    "stackrl.blocks.env.games:KuhnPoker",
    "stackrl.blocks.env.games:PrisonersDilemma",
    "stackrl.blocks.env.games:Bandit",
    "stackrl.blocks.env.games:Negotiation",
    "stackrl.blocks.env.layout:episode_layout",
    "stackrl.blocks.env.layout:turn_examples",
    "stackrl.blocks.env.layout:observation_ids",
    "stackrl.blocks.env.layout:shown_observation",
    "stackrl.tasks.games:PROMPTS",
    "stackrl.blocks.env.imitation:TEMPLATE",
    "stackrl.blocks.env.imitation:_ACCEPT",
    "stackrl.blocks.env.imitation:demo_action",
    "stackrl.blocks.env.imitation:prompt_ids",
    "stackrl.blocks.env.imitation:demo_examples",
    "stackrl.tasks.pretrain:_fit",
    "stackrl.blocks.env.pretrain_games:_games_batches",
    "stackrl.blocks.env.pretrain_games:pretrain_games",
)


def pretrain_games(
    out: str | Path,
    *,
    init: str | Path,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 2e-3,
    warmup: int = 30,
    eval_episodes: int = 100,
    save_every: int = 0,
    seed: int = 0,
    threads: int | None = None,
) -> dict:
    """Train from ``init`` on demonstrations of the games for ``steps``, save the checkpoint in ``out`` with its
    record, and return the figures."""
    settings = {name: str(value) if isinstance(value, Path) else value for name, value in locals().items()}
    recipe = recipe_hash(RECIPE)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads:
        torch.set_num_threads(threads)
    random.seed(seed)
    torch.manual_seed(seed)
    tokenizer, model = AutoTokenizer.from_pretrained(init), AutoModelForCausalLM.from_pretrained(init)
    out = Path(out)

    def save(folder: Path, **record) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        record = {"settings": settings, "recipe_sha256": recipe,
                  "init_sha256": file_hash(Path(init) / "model.safetensors"), **record}
        (folder / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")

    batches = _games_batches(tokenizer, random.Random(seed + 11), batch_size)
    train_s = _fit(model, tokenizer, batches, steps=steps, lr=lr, schedule=lambda s: min(1.0, (s + 1) / warmup),
                   test=None, save_every=save_every,
                   snapshot=lambda step: save(Path(f"{out}-games{step}"), snapshot={"step": step}), per_example=True)
    t_eval = time.time()
    summary = {"train_seconds": round(train_s), "params": sum(p.numel() for p in model.parameters()),
               "games": evaluate_games(model, tokenizer, episodes=eval_episodes, seed=seed)}
    summary["eval_seconds"] = round(time.time() - t_eval)
    save(out, summary=summary)
    print(json.dumps(summary), flush=True)
    return summary


def finish_snapshot(folder: str | Path, train_seconds: int) -> dict:
    """Measure a snapshot a run saved (``--save-every``) and record it as the run of that many steps it is (the rate
    is constant after warmup and the batches do not depend on the run's length, as in
    :func:`stackrl.tasks.pretrain_roles.finish_snapshot`): settings ``steps`` k and ``save_every`` 0, the run it came
    from under ``snapshot``, and the summary :func:`pretrain_games` writes (``train_seconds`` from the run's log)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(folder)
    record = json.loads((folder / RECORD_FILE).read_text())
    settings = record["settings"]
    if settings.get("threads"):
        torch.set_num_threads(settings["threads"])
    record["snapshot"] = {**record["snapshot"], "of_steps": settings["steps"], "out": settings["out"]}
    settings.update(steps=record["snapshot"]["step"], save_every=0, out=str(folder))
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    t_eval = time.time()
    summary = {"train_seconds": train_seconds, "params": sum(p.numel() for p in model.parameters()),
               "games": evaluate_games(model, tokenizer, episodes=settings["eval_episodes"], seed=settings["seed"])}
    summary["eval_seconds"] = round(time.time() - t_eval)
    record["summary"] = summary
    (folder / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(summary), flush=True)
    return summary


def main(argv: list[str] | None = None) -> None:
    phase_main(pretrain_games, argv, starts_from="arith-tiny", snapshots="games")


if __name__ == "__main__":
    main()
