"""Judging with an auxiliary model: what the step's cache saves, and what a second model costs per step.

The built-in judge ``stackrl/arith-skills`` is the policy and judges its own solutions with selfjudge (the task's
judge prompt, greedy verdicts), in two runs alike but for the judge: the policy itself (``judge_model: policy``),
or the same weights loaded a second time as an auxiliary ``hf`` model (``judge_model: twin``). A group's
completions often repeat one another (the judge solves most problems one way), so the twin's run is asked fewer
distinct judge prompts than completions.

It prints ``calls_per_distinct_request: X`` (calls the twin's backend answered, over the distinct judge prompts
of each step, counted at the judge: goal 1.0), ``requests_per_call: X`` (judge prompts asked per call made: what
the cache saves) and ``aux_judge_time_ratio: X``: the median step time (this process's CPU time) of the twin's run
over the policy's, in one run, rounds alternating the two.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/aux_models.py [--rounds 3] [--steps 6] [--short]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections import defaultdict

import torch

from stackrl.aux_models import AuxModels, aux_models_of
from stackrl.run import build_trainer
from stackrl.tasks.roles import JUDGE_TEMPLATE
from stackrl.testing.steptime import StepClock
from stackrl.testing.tiny import TINY_TRAINER, tiny_config

JUDGE = {"judge_template": JUDGE_TEMPLATE, "scale": "correct_wrong", "verdict_prefix": "Verdict:",
         "max_new_tokens": 64, "temperature": 0.0}


class RequestCounter:
    """The judge prompts each step asks of the auxiliary models (every ``AuxModels.generate`` while installed)."""

    def __init__(self):
        self.asked: dict[int, list] = defaultdict(list)

    def __enter__(self):
        self._original = AuxModels.generate
        counter = self

        def counting(models, name, prompts, sampling, *, step, shared):
            counter.asked[step] += [str(p) for p in prompts]
            return counter._original(models, name, prompts, sampling, step=step, shared=shared)

        AuxModels.generate = counting
        return self

    def __exit__(self, *exc):
        AuxModels.generate = self._original

    def distinct(self) -> int:
        return sum(len(set(prompts)) for prompts in self.asked.values())

    def total(self) -> int:
        return sum(len(prompts) for prompts in self.asked.values())


def train(judge_model: str, steps: int, seed: int, folder: str) -> tuple[StepClock, RequestCounter, int]:
    """Step times, the judge prompts asked, and the twin's calls, of ``steps`` steps judged by ``judge_model``."""
    config = tiny_config(
        "stackrl/arith-skills", ["selfjudge"], tmp_dir=folder, output_dir=f"{folder}/run-{judge_model}-{seed}",
        trainer={**TINY_TRAINER, "max_steps": steps, "seed": seed, "logging_steps": 1000, "num_generations": 8,
                 "per_device_train_batch_size": 8, "max_completion_length": 48},
        eval={"before_and_after": False}, selfjudge={**JUDGE, "judge_model": judge_model},
        aux_models={"twin": {"backend": "hf", "name_or_path": "stackrl/arith-skills"}},
    )
    clock = StepClock()
    trainer = build_trainer(config, callbacks=[clock])
    with RequestCounter() as counter:
        trainer.train()
    return clock, counter, aux_models_of(trainer).totals["twin"].calls


def run(rounds: int, steps: int, warmup: int = 1) -> dict:
    times = {"policy": [], "twin": []}
    per_round = []  # each round's median step time of the twin's run over the policy's
    calls = distinct = asked = 0
    with tempfile.TemporaryDirectory() as folder:
        for r in range(rounds):
            this_round = {}
            for judge_model in ("policy", "twin") if r % 2 == 0 else ("twin", "policy"):
                clock, counter, made = train(judge_model, steps, seed=r, folder=folder)
                times[judge_model] += clock.cpu[warmup:]
                this_round[judge_model] = statistics.median(clock.cpu[warmup:])
                if judge_model == "twin":
                    calls, distinct, asked = calls + made, distinct + counter.distinct(), asked + counter.total()
            per_round.append(this_round["twin"] / this_round["policy"])
    median = {name: statistics.median(values) for name, values in times.items()}
    return {
        "per_round": per_round,
        "calls_per_distinct_request": calls / distinct,
        "requests_per_call": asked / calls,
        "aux_judge_time_ratio": median["twin"] / median["policy"],
        "policy_cpu_s": median["policy"], "twin_cpu_s": median["twin"], "calls": calls, "asked": asked,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--short", action="store_true", help="one round of two steps (what the test suite runs)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rounds, steps = (1, 2) if args.short else (args.rounds, args.steps)
    result = run(rounds, steps)
    print(f"median step, CPU time: judged by the policy {result['policy_cpu_s']:.2f} s, by the twin "
          f"{result['twin_cpu_s']:.2f} s; the twin was asked {result['asked']} judge prompts, made {result['calls']} calls")
    print(f"calls_per_distinct_request: {result['calls_per_distinct_request']:.2f}")
    print(f"requests_per_call: {result['requests_per_call']:.2f}")
    print(f"aux_judge_time_ratio: {result['aux_judge_time_ratio']:.2f}")
    print("per-round ratios: " + ", ".join(f"{ratio:.2f}" for ratio in result["per_round"]))


if __name__ == "__main__":
    main()
