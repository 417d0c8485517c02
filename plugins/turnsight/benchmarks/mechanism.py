"""TurnSight on the built-in calculator episodes: the advantages it hands on, checked against a hand computation
from ctx.score log-probs, and the answers' accuracy against plain GRPO at equal steps.

``run`` trains ``configs/recipes/turnsight-cpu.yaml`` (``stackrl/arith-tools`` with the calculator) and, at each
step, recomputes what the plugin should return without its code: each calculator turn's results read off the loss
mask (the masked tokens right after the action), the teacher's context per horizon written out (prompt, the
template around the next ``h`` results, the row's tokens up to the turn), every view scored with ``ctx.score``, the
agreement, the z-score over the group's kept turns and the clipped scale; then compares it with the plugin's output
and counts advantages whose sign changed. The main trains the recipe and the same recipe without turnsight (plain
GRPO in the env plugin) at each seed and reports the mean exact-match reward over the first and the last three
steps, and the share of calculator turns in the last three steps' rows.

    nice python plugins/turnsight/benchmarks/mechanism.py --seeds 0 1 2 --steps 12
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path

import torch
import yaml

import stackrl
import stackrl_turnsight.plugin as plugin_module
from stackrl.testing.benchmark import arguments, compare, training_rollouts

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "turnsight-cpu.yaml"


def hand_advantages(advantages, ctx, config) -> tuple[torch.Tensor, list[list[list[float]]], Counter]:
    """What turnsight should return for ``advantages`` on ``ctx.rollout``, written out: ``(advantages (N, T), each
    row's per-turn view signals, counts)``."""
    rollout, counts = ctx.rollout, Counter()
    before, after = config.template.split("{results}")
    encode = lambda text: ctx.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []  # noqa: E731
    before, after = encode(before), encode(after)
    turns = []  # (row, index among actions, start, end, results after each action from this one on)
    for i, segments in enumerate(rollout.columns["segments"]):
        actions = [(s.start, s.end) for s in segments if s.kind == "action"]
        mask = rollout.loss_mask[i]
        results = []
        for start, end in actions:
            t = end
            while t < len(mask) and mask[t] == 0:
                t += 1
            results.append(rollout.completion_ids[i][end:t])
        for k, (start, end) in enumerate(actions):
            if results[k]:
                turns.append((i, k, start, end, results[k:]))
    contexts, actions = [], []
    for i, k, start, end, results in turns:
        prefix = rollout.prompt_ids[i] + rollout.completion_ids[i][:start]
        action = rollout.completion_ids[i][start:end]
        contexts.append(prefix)
        actions.append(action)
        for h in config.horizons:
            shown = [t for ids in results[:h] for t in ids]
            contexts.append(rollout.prompt_ids[i] + before + shown + after + rollout.completion_ids[i][:start])
            actions.append(action)
    scores = ctx.score(contexts, actions) if contexts else None
    per_turn, kept = {}, {}
    j = 0
    for i, k, start, end, _ in turns:
        n = end - start
        student = scores.logprobs[j, :n].double()
        views = [(scores.logprobs[j + 1 + v, :n].double() - student).mean().item() for v in range(len(config.horizons))]
        j += 1 + len(config.horizons)
        per_turn[(i, k)] = views
        if all(v > 0 for v in views) or all(v < 0 for v in views):
            kept[(i, k)] = sum(views) / len(views)
        counts["turns"] += 1
    counts["kept"] = len(kept)
    width = advantages.size(1) if advantages.dim() == 2 else max(len(ids) for ids in rollout.completion_ids)
    out = torch.zeros(len(rollout), width)
    for i, ids in enumerate(rollout.completion_ids):
        out[i, : len(ids)] = advantages[i, : len(ids)] if advantages.dim() == 2 else advantages[i]
    spans = {(i, k): (start, end) for i, k, start, end, _ in turns}
    for group in range(0, len(rollout), ctx.group_size):
        members = [key for key in kept if group <= key[0] < group + ctx.group_size]
        if len(members) < 2:
            continue
        counts["groups_normalised"] += 1
        values = [kept[key] for key in members]
        mean = sum(values) / len(values)
        std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
        for key in members:
            z = (kept[key] - mean) / (std + 1e-6)
            start, end = spans[key]
            for t in range(start, end):
                a = out[key[0], t].item()
                factor = 1 + config.alpha * (1 if a > 0 else -1 if a < 0 else 0) * z
                clipped = min(max(factor, 1 - config.band), 1 + config.band)
                counts["clipped_tokens"] += clipped != factor
                counts["would_flip_unclipped"] += factor < 0
                out[key[0], t] = a * clipped
    return out, per_turn, counts


@contextlib.contextmanager
def checked(counts: Counter, notes: list):
    """Turnsight's hook wrapped for the run: each call's output compared with :func:`hand_advantages`."""
    original = plugin_module.Turnsight.reshape_advantages

    @stackrl.hookimpl
    def reshape_advantages(self, advantages, ctx):
        out = original(self, advantages, ctx)
        want, _, found = hand_advantages(advantages, ctx, self.config)
        counts.update(found)
        counts["steps"] += 1
        got = out if out is not None else want * 0 + (advantages.unsqueeze(1) if advantages.dim() == 1 else advantages)
        mask = ctx.rollout.completion_mask()
        got, want = got[:, : mask.size(1)] * mask, want[:, : mask.size(1)] * mask
        before = want * 0 + (advantages.unsqueeze(1) if advantages.dim() == 1 else advantages[:, : mask.size(1)]) * mask
        counts["sign_flips"] += int((torch.sign(got) * torch.sign(before) < 0).sum())
        counts["tokens_changed"] += int(((got - before).abs() > 1e-6).sum())
        wrong = ~torch.isclose(got, want, rtol=1e-3, atol=1e-4)
        counts["mismatched_tokens"] += int(wrong.sum())
        if wrong.any() and len(notes) < 5:
            i = int(wrong.any(1).nonzero()[0])
            notes.append((i, got[i][wrong[i]].tolist()[:8], want[i][wrong[i]].tolist()[:8]))
        return out

    plugin_module.Turnsight.reshape_advantages = reshape_advantages
    try:
        yield
    finally:
        plugin_module.Turnsight.reshape_advantages = original


def recipe_tree(plugins: bool) -> dict:
    """The CPU recipe as a dict; ``plugins=False``: plain GRPO on the same episodes (the env plugin alone)."""
    tree = yaml.safe_load(RECIPE.read_text())
    if not plugins:
        tree["plugins"] = [p for p in tree["plugins"] if p != "turnsight"]
        tree.pop("turnsight")
    return tree


def measure(rollout) -> dict:
    """A training rollout's mean exact-match reward and share of rows that called the calculator."""
    infos = rollout.columns["env_info"]
    return {"reward": rollout.rewards["exact_match"].float().mean().item(),
            "tools": sum(any(turn.get("tool") for turn in row) for row in infos) / len(infos)}


def run(seed: int = 0, steps: int = 1, overrides=(), plugins: bool = True, check: bool = True) -> dict:
    """Train the CPU recipe (``plugins=False``: without turnsight) ``steps`` steps; with ``check``, the counts of
    the comparison with the hand computation; each step's mean exact-match reward and share of rows that called
    the calculator, over the first and the last three steps."""
    counts, notes = Counter(), []
    with checked(counts, notes) if check else contextlib.nullcontext():
        seen, _ = training_rollouts(recipe_tree(plugins), measure, seed=seed, steps=steps, overrides=overrides)
    mean = lambda name, rows: sum(r[name] for r in rows) / len(rows)  # noqa: E731
    result = {"reward_first": mean("reward", seen[:3]), "reward_last": mean("reward", seen[-3:]),
              "tool_rows_last": mean("tools", seen[-3:])}
    if check:
        result |= dict(counts, notes=notes)
    return result


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], steps=12, methods=("turnsight", "grpo")).parse_args(argv)
    compare(args, args.methods,
            lambda method, seed, folder: run(seed, args.steps, args.overrides, plugins=method == "turnsight", check=False),
            figures=("reward_first", "reward_last", "tool_rows_last"))


if __name__ == "__main__":
    main()
