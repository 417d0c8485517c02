"""SSRL's reward and information mask acting in one real training step of the built-in model.

The built-in model writes no self-search tags, so the policy's samples are replaced by written ones, per group of
four (in this order): a well-formed self-search with the right answer, a malformed one (no opening <think>) with
the same answer, a well-formed one with a wrong answer, a malformed one with a wrong answer; each has one
<information> block. One step of configs/recipes/ssrl-cpu.yaml (exact_match off: the written answers are in
<answer> tags) reads what GRPO made of the plugin's reward, and the gradient of TRL's policy loss with respect to
each completion token's log-probability: zero on the information blocks, non-zero on the rest of a row whose
advantage is not zero.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/ssrl/benchmarks/mechanism.py --seeds 0 1 2
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path

import torch

from stackrl.policy import Generation, PolicyAccess
from stackrl.run import build_trainer
from stackrl.testing.heldout import recipe_config
from stackrl.trainer import StackTrainer
from stackrl_ssrl.masking import information_spans

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "ssrl-cpu.yaml"
WELL_FORMED = ("<think>I need the value of the expression.</think>\n<search>value of the expression</search>\n"
               "<information>The expression equals {answer}.</information>\n<think>So it is {answer}.</think>\n"
               "<answer>{answer}</answer>")
MALFORMED = ("<search>value of the expression</search>\n<information>The expression equals {answer}.</information>\n"
             "<answer>{answer}</answer>")
KINDS = ("well_formed_right", "malformed_right", "well_formed_wrong", "malformed_wrong")


def written(kind: str, answer: str) -> str:
    value = answer if kind.endswith("right") else str(int(answer) + 1)
    return (WELL_FORMED if kind.startswith("well") else MALFORMED).format(answer=value)


@contextmanager
def written_policy(answers: dict[str, str], tokenizer):
    """The policy's samples replaced: row i of a batch gets the completion of kind ``KINDS[i % 4]`` (the model
    samples nothing; the plugin trains each completion on its prompt's own tokens)."""
    generate = PolicyAccess.generate
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731

    def writing(self, prompts, **kwargs):
        out = []
        for i, prompt in enumerate(prompts):
            text = written(KINDS[i % len(KINDS)], answers[prompt])
            out.append(Generation(encode(prompt), encode(text) + [tokenizer.eos_token_id], text))
        return out

    PolicyAccess.generate = writing
    try:
        yield
    finally:
        PolicyAccess.generate = generate


class LossGradients:
    """Each loss call's completion ids, mask and advantages, and the gradient of the loss with respect to the
    per-token log-probabilities TRL's loss was computed from."""

    def __init__(self):
        self.calls: list[dict] = []

    @contextmanager
    def recording(self):
        compute = StackTrainer._compute_loss
        calls = self.calls

        def recorded(trainer, model, inputs):
            loss = compute(trainer, model, inputs)
            grad = torch.autograd.grad(loss, trainer._policy_logps, retain_graph=True)[0]
            calls.append({"ids": inputs["completion_ids"].tolist(), "mask": inputs["completion_mask"].tolist(),
                          "advantages": inputs["advantages"].tolist(), "grad": grad.detach().abs().tolist()})
            return loss

        StackTrainer._compute_loss = recorded
        try:
            yield
        finally:
            StackTrainer._compute_loss = compute


def token_kinds(tokenizer, ids: list[int], mask: list[int]) -> list[str]:
    """Each real token of a completion: "information" where its text lies inside an information block, "own" where
    it lies outside every block, "boundary" where it straddles a block's edge."""
    ids = [t for t, m in zip(ids, mask) if m]
    text = tokenizer.decode(ids, skip_special_tokens=True)
    spans = information_spans(text)
    kinds = []
    for k in range(len(ids)):
        start = len(tokenizer.decode(ids[:k], skip_special_tokens=True))
        end = len(tokenizer.decode(ids[:k + 1], skip_special_tokens=True))
        if end > start and any(s <= start and end <= e for s, e in spans):
            kinds.append("information")
        elif all(end <= s or start >= e for s, e in spans):
            kinds.append("own")
        else:
            kinds.append("boundary")  # a token whose text straddles a block's edge: masked, but not all information
    return kinds


def run(seed: int, overrides=()) -> dict:
    """One step: the mean advantage of each kind of row, and the largest loss gradient on information tokens and
    the smallest on the other tokens of rows with a non-zero advantage."""
    gradients = LossGradients()
    with tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=1, output_dir=out,
                               overrides=["rewards.exact_match=null", *overrides])
        trainer = build_trainer(config)
        tokenizer = trainer.processing_class
        answers = dict(zip(trainer.train_dataset["prompt"], trainer.train_dataset["answer"]))
        with written_policy(answers, tokenizer), gradients.recording():
            trainer.train()
    rollout = trainer._rollouts["train"]
    advantages = {kind: [] for kind in KINDS}
    for i, text in enumerate(rollout.completions):
        kind = next(k for k in KINDS if text.strip() == written(k, rollout.columns["answer"][i]))
        advantages[kind].append(float(rollout.advantages[i]))
    on_information, on_own = 0.0, float("inf")
    for call in gradients.calls:
        for ids, mask, advantage, grad in zip(call["ids"], call["mask"], call["advantages"], call["grad"]):
            kinds = token_kinds(tokenizer, ids, mask)
            real = [g for g, m in zip(grad, mask) if m]
            on_information = max([on_information, *(g for g, k in zip(real, kinds) if k == "information")])
            if abs(advantage) > 1e-6:
                on_own = min([on_own, *(g for g, k in zip(real, kinds) if k == "own")])
    figures = {f"advantage_{kind}": sum(v) / len(v) for kind, v in advantages.items()}
    return {**figures, "grad_information_max": on_information, "grad_own_min": on_own,
            "rows": len(rollout), "loss_calls": len(gradients.calls)}


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=None).parse_args()
    compare(args, ["ssrl"], lambda method, seed, folder: run(seed, args.overrides),
            figures=(*(f"advantage_{kind}" for kind in KINDS), "grad_information_max", "grad_own_min"))


if __name__ == "__main__":
    main()
