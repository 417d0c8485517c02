"""ReMix on the built-in model: what reaches the loss, checked by hand, and accuracy against plain GRPO.

`run(...)` trains the CPU recipe (configs/recipes/remix-cpu.yaml, overrides applied) and checks every row of every
micro-batch where TRL's loss receives it, against a plain forward of the policy that generated the batch: a row
sampled now (age 0) reaches the loss with GRPO's advantage unchanged; a replayed row carries the behaviour log-probs
this monitor computed for the same completion when it was sampled `age` batches earlier (so the plugin stored
log-probs taken before the optimizer moved), `age` is at most `remix.max_age`, and its advantage in the loss is
GRPO's times min(c, exp(logp_now - logp_behaviour)) token by token. Per group, the replayed rows number exactly
min(size - fresh, the stored rows of that prompt within the age limit): the fresh share as configured, replay as
soon as rows are at hand, none beyond the limit. `mismatches` counts every disagreement.

The main compares held-out greedy accuracy after equal optimizer steps with plain GRPO (the same recipe without
the plugin), and the generation each run did: completions sampled and seconds spent in `generate`.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/remix/benchmarks/mechanism.py --seeds 0 1 2 --steps 24
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter, defaultdict
from pathlib import Path

import torch
from transformers.generation.utils import GenerationMixin

from stackrl.run import build_trainer
from stackrl.testing.benchmark import against_plain_grpo, one_thread
from stackrl.testing.heldout import greedy_accuracy, grpo_advantages, recipe_config
from stackrl_remix.mixing import fresh_count
from stackrl_remix.plugin import AGE

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "remix-cpu.yaml"
ROW_INDEX = "stackrl_row"  # the host's column of each micro-batch row's index in the rollout (stackrl.trainer)


@contextlib.contextmanager
def generation_timed(figures: Counter):
    """Seconds spent in and completions returned by every ``generate`` of a model (the host's, TRL's, a plugin's)."""
    original = GenerationMixin.generate

    def generate(self, *args, **kwargs):
        start = time.perf_counter()
        out = original(self, *args, **kwargs)
        figures["generate_seconds"] += time.perf_counter() - start
        figures["generated"] += out.size(0) if hasattr(out, "size") else len(out.sequences)
        return out

    GenerationMixin.generate = generate
    try:
        yield
    finally:
        GenerationMixin.generate = original


def logprobs(model, prompt: list[int], completion: list[int], temperature: float) -> torch.Tensor:
    ids = torch.tensor([list(prompt) + list(completion)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(completion).unsqueeze(1)).squeeze(1)


class Monitor:
    """Wraps the trainer's ``_compute_loss``: each generation batch's rows checked where the loss receives them."""

    def __init__(self, trainer):
        self.trainer, self.original = trainer, trainer._compute_loss
        remix = trainer.plugins.plugins["remix"].config
        self.size, self.max_age = trainer.num_generations, remix.max_age
        self.fresh = fresh_count(self.size, remix.fresh_share)
        self.c, level = trainer._importance  # the run's importance.truncation and importance.level
        assert level == "token", "the monitor checks token-level weights"
        self.sampled: dict = {}  # (batch, prompt, completion) -> log-probs under the policy that sampled it
        self.fresh_rows = Counter()  # (batch, prompt) -> rows sampled fresh
        self.batch, self.seen_rollout, self.checked_groups = -1, None, set()
        self.counts, self.notes = Counter(), []
        trainer._compute_loss = self

    def miss(self, what):
        self.counts["mismatches"] += 1
        if len(self.notes) < 10:
            self.notes.append(what)

    def __call__(self, model, inputs):
        rollout = self.trainer._rollouts["train"]
        if AGE not in rollout.columns:  # held-out evaluation, or on-policy: nothing replayed
            return self.original(model, inputs)
        if rollout is not self.seen_rollout:  # a new generation batch: the policy has not moved since it sampled
            self.seen_rollout, self.batch = rollout, self.batch + 1
            self.first_pass(model, rollout)
        self.check_loss(rollout, inputs)
        return self.original(model, inputs)

    def first_pass(self, model, rollout):
        temperature = self.trainer.temperature
        training = model.training
        model.eval()
        ages = rollout.columns[AGE]
        stored = defaultdict(int)  # prompt -> fresh rows sampled within the age limit before this batch
        too_old = defaultdict(int)  # prompt -> those sampled earlier still
        for (batch, prompt), rows in self.fresh_rows.items():
            if 1 <= self.batch - batch <= self.max_age:
                stored[prompt] += rows
            elif self.batch - batch > self.max_age:
                too_old[prompt] += rows
        self.now = {}
        # GRPO's advantages from the rewards (the recipe's only component, exact_match at weight 1), by hand
        self.grpo = grpo_advantages(rollout.rewards["exact_match"].float(), self.size)
        for row, (prompt, completion) in enumerate(zip(rollout.prompt_ids, rollout.completion_ids)):
            now = logprobs(model, prompt, completion, temperature)
            self.now[row] = now
            old = ages[row]
            if old == 0:
                if rollout.behaviour_logprobs is not None and rollout.behaviour_logprobs[row] is not None:
                    self.miss(("fresh row marked", self.batch, row))
                self.sampled[(self.batch, tuple(prompt), tuple(completion))] = now
                self.fresh_rows[(self.batch, tuple(prompt))] += 1
                continue
            self.counts["replayed"] += 1
            if old > self.max_age:
                self.miss(("older than max_age", self.batch, row, old))
            want = self.sampled.get((self.batch - old, tuple(prompt), tuple(completion)))
            got = torch.tensor(rollout.behaviour_logprobs[row])
            if want is None or not torch.allclose(got, want, atol=1e-4):
                self.miss(("behaviour log-probs", self.batch, row, old))
            ratio = torch.exp(now - got)
            # tokens the truncation changes in the loss (a row of advantage 0 is 0 whatever its weight)
            if abs(float(self.grpo[row])) > 1e-6:
                self.counts["replayed_signal"] += 1
                self.counts["clipped"] += int((ratio > self.c + 1e-3).sum())
        for group in range(len(rollout) // self.size):
            rows = range(group * self.size, (group + 1) * self.size)
            replayed = sum(ages[r] > 0 for r in rows)
            prompt = tuple(rollout.prompt_ids[group * self.size])
            want = min(self.size - self.fresh, stored[prompt])
            self.counts["groups"] += 1
            # a group a rule without the age limit would have filled with older rows
            self.counts["past_limit"] += int(want < self.size - self.fresh and too_old[prompt] > 0)
            self.counts["fresh_rows"] += self.size - replayed
            if replayed != want:
                self.miss(("replayed rows", self.batch, group, replayed, want))
        model.train(training)

    def check_loss(self, rollout, inputs):
        ages = rollout.columns[AGE]
        for i, row in enumerate(inputs[ROW_INDEX].tolist()):
            n = len(rollout.completion_ids[row])
            received = inputs["advantages"][i]
            received = received[:n] if received.dim() else received.expand(n)
            advantage = float(self.grpo[row])
            if ages[row] == 0:
                ok = torch.allclose(received.cpu().float(), torch.full((n,), advantage), atol=1e-5)
            else:
                behaviour = torch.tensor(rollout.behaviour_logprobs[row])
                want = advantage * torch.exp(self.now[row] - behaviour).clamp(max=self.c)
                ok = torch.allclose(received.cpu().float(), want, atol=1e-5)
            self.counts["loss_rows"] += 1
            if not ok:
                self.miss(("loss advantage", self.batch, row, ages[row]))


def run(seed: int = 0, steps: int = 4, overrides=(), folder=None, check: bool = True) -> dict:
    """Train the CPU recipe ``steps`` steps with ``overrides``; the monitor's counts (with ``check``), the
    generation figures and held-out accuracy are measured by the caller."""
    import tempfile

    with one_thread(), tempfile.TemporaryDirectory(dir=folder) as out:
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=out, overrides=overrides)
        trainer = build_trainer(config)
        monitor = Monitor(trainer) if check else None
        figures = Counter()
        with generation_timed(figures):
            trainer.train()
        result = {**figures, "trainer": trainer}
        if monitor:
            result.update(monitor.counts, notes=monitor.notes)
        return result


def measured(method: str, seed: int, steps: int, folder: Path, overrides, size: int) -> dict:
    import tempfile

    with one_thread(), tempfile.TemporaryDirectory(dir=folder) as out:
        config = recipe_config(RECIPE, plugins=method == "remix", seed=seed, steps=steps, output_dir=out,
                               overrides=overrides)
        trainer = build_trainer(config)
        figures = Counter()
        start = time.perf_counter()
        with generation_timed(figures):
            trainer.train()
        seconds = time.perf_counter() - start
        return {"accuracy": greedy_accuracy(trainer, size, seed=1000 + seed), "generated": figures["generated"],
                "generate_s": figures["generate_seconds"], "train_s": seconds}


if __name__ == "__main__":
    against_plain_grpo(__doc__.splitlines()[0], "remix", measured, ("accuracy", "generated", "generate_s", "train_s"),
                       steps=24, eval_size=128)
