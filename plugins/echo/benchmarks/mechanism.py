"""ECHO's update on the built-in task, label-free: what it sets, recomputed by hand, and what it does to training.

1. ``run``: a short label-free run of configs/recipes/echo-cpu.yaml (TTRL's majority vote through serl, then ECHO).
   At each step a monitor recomputes, from the policy's own logits at the sampling temperature, every completion
   token's entropy and top-k confidence, and from them the exploration score, the hybrid advantages and each row's
   clip range; it keeps what the plugin returned beside them. After the run, the loss TRL computes on the last
   batch, made off-policy (ratio 1.3 where the advantage is positive, 0.7 where negative, as tests/test_stages.py
   does), against the clipped loss by hand with those ranges, and against TRL's loss with the config's range.
2. ``main``: label-free training with ECHO and with majority vote alone (serl-cpu.yaml, its difficulty filter off:
   plain TTRL on GRPO), at equal steps: held-out pass@1 before and after, and the pseudo-label accuracy the host
   logged against the hidden answers. Several seeds; one line per run, then the means.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/echo/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl.config import load_config
from stackrl.run import build_trainer
from stackrl.testing.measure import label_free_run
from stackrl.trainer import ROW_INDEX

RECIPES = Path(__file__).resolve().parents[3] / "configs" / "recipes"
# TTRL: majority vote on GRPO, with echo-cpu.yaml's two optimizer steps on each rollout
BASELINE = ("serl-cpu.yaml", ["serl.difficulty_filter=false", "trainer.steps_per_generation=2"])


def token_statistics(model, prompt_ids, completion_ids, temperature: float, k: int):
    """Each completion token's entropy and mean top-``k`` probability under ``model``, one row at a time."""
    entropies, confidences = [], []
    with torch.no_grad():
        for prompt, completion in zip(prompt_ids, completion_ids):
            ids = torch.tensor([list(prompt) + list(completion)])
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / temperature
            logp = logits.log_softmax(-1)
            entropies.append(-(logp.exp() * logp).sum(-1))
            confidences.append(logp.topk(k, -1).values.exp().mean(-1))
    width = max(len(c) for c in completion_ids)
    pad = lambda rows: torch.stack([torch.nn.functional.pad(r, (0, width - len(r))) for r in rows])  # noqa: E731
    mask = torch.tensor([[1.0] * len(c) + [0.0] * (width - len(c)) for c in completion_ids])
    return pad(entropies), pad(confidences), mask


class Recomputed:
    """A run's monitor: at each step, echo's input and output advantages and clip range, and the same recomputed."""

    def __init__(self):
        self.trainer = None
        self.steps: list[dict] = []
        self._pending: dict = {}

    def __call__(self, hook, plugin, kwargs, result):
        if plugin != "echo" or not kwargs["ctx"].training:
            return
        if hook == "reshape_advantages":
            shaped = kwargs["advantages"] if result is None else result  # None: the advantages unchanged
            self._pending = {"advantages": kwargs["advantages"].clone(), "shaped": shaped}
        elif hook == "clip_range":
            clip = kwargs["clip"] if result is None else result  # None: the range before it, unchanged
            self.steps.append({**self._pending, "clip": clip, **self._by_hand(kwargs["ctx"])})

    def _by_hand(self, ctx) -> dict:
        config = self.trainer.plugins.plugins["echo"].config
        rollout = ctx.rollout
        model = self.trainer.model
        entropy, confidence, mask = token_statistics(model, rollout.prompt_ids, rollout.completion_ids,
                                                     ctx.sampling_temperature, config.confidence_topk)
        tokens = mask.bool()
        # The z-score over the batch's tokens: unbiased variance, 1e-8 added to it as the authors' masked_whiten does
        # (on the built-in model the top-5 confidence varies by about 1e-4, and that term is not negligible there).
        z = lambda x: (x - x[tokens].mean()) / (x[tokens].var() + 1e-8).sqrt()  # noqa: E731
        score = (config.alpha * z(entropy) + config.beta * z(1 - confidence)).clamp(-config.s_max, config.s_max) * mask
        lengths = mask.sum(1).long()
        tails = torch.stack([confidence[i, max(0, n - config.tail_window) : n].mean() if n else torch.tensor(0.0)
                             for i, n in enumerate(lengths.tolist())])
        eps = config.eps_min + (config.eps_max - config.eps_min) * torch.sigmoid(config.kappa * (1 - tails))
        return {"entropy": entropy, "confidence": confidence, "mask": mask, "score": score, "tail": tails, "eps": eps}


def figures_of(steps: list[dict], mult_coeff: float) -> dict[str, float]:
    """What the monitor saw: the largest gap between each returned quantity and its recomputation, and how the
    clip range and the advantage weights fall on uncertain completions and tokens."""
    clip_error = weight_error = 0.0
    disorder = 0
    wide, narrow, heavy, light = [], [], [], []
    for step in steps:
        low, high = step["clip"]
        clip_error = max(clip_error, float((low - step["eps"]).abs().max()), float((high - step["eps"]).abs().max()))
        tail = step["tail"]
        # A pair of completions whose returned ranges do not order opposite to their recomputed tail confidences.
        disorder += int(((tail.unsqueeze(1) < tail.unsqueeze(0) - 1e-6) & (low.unsqueeze(1) <= low.unsqueeze(0))).sum())
        below = tail < tail.median()
        wide.append(float(low[below].mean()))
        narrow.append(float(low[~below].mean()))
        base = step["advantages"].unsqueeze(1).expand_as(step["mask"]) * step["mask"]
        moved = step["mask"].bool() & (base != 0)
        if moved.any():
            weight = step["shaped"][moved] / base[moved]
            weight_error = max(weight_error, float((weight - (1 + mult_coeff * step["score"][moved])).abs().max()))
            uncertain = step["score"][moved] > 0
            heavy.append(float(weight[uncertain].mean()))
            light.append(float(weight[~uncertain].mean()))
    mean = lambda values: sum(values) / len(values) if values else float("nan")  # noqa: E731
    return {"clip_error": clip_error, "clip_disorder": disorder, "weight_error": weight_error,
            "clip_uncertain_tail": mean(wide),
            "clip_confident_tail": mean(narrow), "weight_uncertain_tokens": mean(heavy),
            "weight_confident_tokens": mean(light), "shaped_steps": len(heavy)}


def loss_check(trainer) -> dict[str, float]:
    """TRL's loss on the last batch made off-policy, with echo's clip range, by hand, and with the config's."""
    batch = trainer._buffered_inputs[0]
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    logps, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention,
                                                             batch["completion_ids"].size(1))
    advantages = batch["advantages"]  # (B, T): per token after the shaping
    ratio = torch.where(advantages > 0, 1.3, torch.where(advantages < 0, 0.7, 1.0))
    batch = {**batch, "old_per_token_logps": logps.detach() - ratio.log()}
    mask = batch["completion_mask"] * batch.get("tool_mask", 1)
    clip = trainer._rollouts["train"].clip or (torch.full((len(trainer._rollouts["train"]),), trainer.epsilon_low),
                                               torch.full((len(trainer._rollouts["train"]),), trainer.epsilon_high))
    low, high = (bound[batch[ROW_INDEX].cpu()].unsqueeze(1) for bound in clip)

    # TRL's dapo loss: the generation batch's token count, rescaled to one accumulation window, divides the sum.
    assert trainer.loss_type == "dapo", trainer.loss_type
    normalizer = (batch["num_items_in_batch"].clamp(min=1.0) * trainer.current_gradient_accumulation_steps
                  / trainer.args.steps_per_generation)

    def by_hand(low, high):
        clipped = torch.minimum(torch.maximum(ratio, 1 - low), 1 + high)
        return float((-torch.minimum(ratio * advantages, clipped * advantages) * mask).sum() / normalizer)

    trainer.model.train()
    with torch.no_grad():
        echo = float(trainer.compute_loss(trainer.model, batch))
        clip, trainer._rollouts["train"].clip = trainer._rollouts["train"].clip, None
        plain = float(trainer.compute_loss(trainer.model, batch))
        trainer._rollouts["train"].clip = clip
    return {"loss": echo, "loss_by_hand": by_hand(low, high), "loss_config_range": plain,
            "loss_config_by_hand": by_hand(torch.tensor(trainer.epsilon_low), torch.tensor(trainer.epsilon_high))}


def run(seed: int = 0, steps: int = 2, overrides=()) -> tuple[dict, Recomputed]:
    """A short label-free run of the CPU recipe: the monitor's figures and the loss check, and the monitor."""
    monitor = Recomputed()
    with tempfile.TemporaryDirectory() as out:
        config = load_config([RECIPES / "echo-cpu.yaml"], [f"trainer.seed={seed}", f"trainer.max_steps={steps}",
                                                          f"output_dir={out}", *overrides])
        trainer = build_trainer(config, monitor=monitor)
        monitor.trainer = trainer
        trainer.train()
        figures = {**figures_of(monitor.steps, trainer.plugins.plugins["echo"].config.mult_coeff), **loss_check(trainer)}
    return figures, monitor


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=30, eval_size=200, methods=("echo", "majority")).parse_args()
    torch.set_num_threads(1)
    figures, _ = run(seed=0, steps=2)
    for key, value in figures.items():
        print(f"recomputed {key}: {value:.4f}", flush=True)
    recipes = {"echo": ("echo-cpu.yaml", []), "majority": BASELINE}

    def trained(name, seed, folder):
        recipe, settings = recipes[name]
        overrides = [o for o in args.overrides if name == "echo" or not o.startswith("echo.")]
        return label_free_run(RECIPES / recipe, [f"trainer.seed={seed}", f"trainer.max_steps={args.steps}",
                                                 f"eval.size={args.eval_size}", *settings, *overrides])

    compare(args, args.methods, trained)


if __name__ == "__main__":
    main()
