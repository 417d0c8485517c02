"""ExIt as a plugin: after each batch, the groups' learnability, new self-iteration tasks from the most learnable
groups, and the buffer's draw weights on the prompt pool."""

from __future__ import annotations

import random
from dataclasses import dataclass

from stackrl import ConfigError, Plugin, PluginError, hookimpl

from stackrl_exit.buffer import draw_weights, learnability, most_learnable, overflow, self_iteration_prompt
from stackrl_exit.config import ExitConfig


@dataclass
class Task:
    """A buffered self-iteration task: its learnability score, the attempts its prompt shows, the row it grew from."""

    score: float
    depth: int
    parent: int


class Exit(Plugin):
    """Exploratory Iteration: a group's partial history (its prompt and one of its attempts) becomes a new "try
    again" task when the group's rewards varied most; buffered tasks are drawn in proportion to their learnability,
    re-scored each time they are drawn, and retired when they stop varying or the buffer is full."""

    Config = ExitConfig
    activity = "groups gave a self-iteration task or re-scored one"

    def __init__(self, config=None):
        super().__init__(config)
        self.buffer: dict[int, Task] = {}
        self.batches_seen = 0  # the pool's batch count at the last update: one update per generation batch

    def needs_rewards(self):
        return {"reward": self.config.reward}

    def check_run(self, run):
        if run.chat:
            raise ConfigError("exit: a self-iteration task continues a text prompt with an attempt; set data.chat: false")

    @hookimpl
    def train_begin(self, ctx):
        if ctx.pool is None:
            raise PluginError(
                "exit needs the prompt pool, which this run lacks (its training data is not a map-style dataset)"
            )

    def depth(self, row: int) -> int:
        """The attempts ``row``'s prompt shows: 0 for a dataset problem."""
        task = self.buffer.get(row)
        return 0 if task is None else task.depth

    @hookimpl
    def post_step(self, ctx):
        # With steps_per_generation > 1 several optimizer steps share one rollout: it is counted once.
        if ctx.pool.batches == self.batches_seen or ctx.rollout is None:
            return
        self.batches_seen = ctx.pool.batches
        config, rollout, size = self.config, ctx.rollout, ctx.rollout.group_size
        # A task another plugin retired (a dataset switch) leaves the buffer.
        self.buffer = {row: task for row, task in self.buffer.items() if not ctx.pool.stats(row).retired}
        rewards = rollout.rewards[config.reward]
        drawn = ctx.pool.last_batch
        scores = [learnability(rewards[g * size : (g + 1) * size]) for g in range(len(drawn))]
        depths = [self.depth(row) for row in drawn]

        # A buffered task drawn again takes its new group's score; one that no longer varies retires.
        replayed = [g for g, row in enumerate(drawn) if row in self.buffer]
        for g in replayed:
            self.buffer[drawn[g]].score = scores[g]
        spent = sorted({drawn[g] for g in replayed if scores[g] <= config.min_score})

        # The most learnable groups, below the depth limit, each give a task: their prompt, one attempt, "Try again."
        eligible = [score if depth < config.max_depth else float("-inf") for score, depth in zip(scores, depths)]
        chosen = most_learnable(eligible, config.per_batch, config.min_score)
        rows = []
        for g in chosen:
            prompt = rollout.prompts[g * size]
            rng = random.Random(f"exit/{ctx.step}/{drawn[g]}")
            text, _ = self_iteration_prompt(prompt, rollout.completions[g * size : (g + 1) * size], rng)
            rows.append({**ctx.pool.row(drawn[g]), "prompt": text})
        for g, row in zip(chosen, ctx.pool.add_rows(rows) if rows else []):
            self.buffer[row] = Task(score=scores[g], depth=depths[g] + 1, parent=drawn[g])

        for row in spent:
            del self.buffer[row]
        full = overflow({row: task.score for row, task in self.buffer.items()}, config.capacity)
        for row in full:
            del self.buffer[row]
        if spent or full:
            ctx.pool.retire(sorted(set(spent) | set(full)))
        if self.buffer:
            ctx.pool.set_row_weights(draw_weights({row: task.score for row, task in self.buffer.items()},
                                                  config.replay_weight))

        ctx.acted(len(set(chosen) | set(replayed)), of=len(drawn))
        ctx.log("added", len(chosen))
        ctx.log("replayed", len(replayed))
        ctx.log("retired", len(spent) + len(full))
        ctx.log("buffer", len(self.buffer))
        ctx.log("learnability", sum(scores) / len(scores) if scores else 0.0)
        ctx.log("depth", max((task.depth for task in self.buffer.values()), default=0))

    @hookimpl
    def state_dict(self):
        rows = sorted(self.buffer)
        return {"rows": rows, "scores": [self.buffer[r].score for r in rows],
                "depths": [self.buffer[r].depth for r in rows], "parents": [self.buffer[r].parent for r in rows],
                "batches_seen": self.batches_seen}

    @hookimpl
    def load_state_dict(self, state):
        self.buffer = {row: Task(score, depth, parent) for row, score, depth, parent
                       in zip(state["rows"], state["scores"], state["depths"], state["parents"])}
        self.batches_seen = state["batches_seen"]
