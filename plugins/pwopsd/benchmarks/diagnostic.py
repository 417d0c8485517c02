"""PW-OPSD's branch-viability diagnostic on the built-in model: when does a teacher token still lead to the answer?

For held-out problems the student (the policy given the bare question) samples two completions each, the spines. At
each spine position t the teacher (the same policy shown the worked solution: the CPU recipe's teacher_template)
names its top-k next tokens; each is forced after the student prompt and the spine's first t tokens, the student
continues greedily from there, and the alternative is *viable* when that continuation's final answer is right.
Over all (position, alternative) pairs it reports the AUROC for "viable" of
- the relative position (t + 1) / T, oriented as later: viable (the paper's predictor, and PW-OPSD's weight);
- the teacher's entropy at t, oriented as lower: viable (an uncertainty score, computed without N x T x V);
- the alternative's own teacher probability, higher: viable.
Several seeds; one line per seed, then the means.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/pwopsd/benchmarks/diagnostic.py --seeds 0 1 2 --problems 64
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from stackrl.blocks.teacher import relative_positions, teacher_prompts
from stackrl.blocks.tokensignals import SignalContext, TokenSignals
from stackrl.config import load_config
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.testing.heldout import heldout_rollout
from stackrl.truth import auroc

CHUNK = 512  # continuations generated per call

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "pwopsd-cpu.yaml"


def branches(trainer, template: str, problems: int, seed: int, top_k: int) -> dict[str, torch.Tensor]:
    """One row per (spine position, teacher alternative): ``viable`` and the three scores, flat tensors."""
    policy, tokenizer = trainer._shared_policy, trainer.processing_class
    spines = heldout_rollout(trainer, problems, seed=seed, group_size=2)
    teacher = SignalContext("teacher", template)
    signals = TokenSignals(policy, spines)
    signals.rows_per_forward = 1  # one completion's T x V log-probs at a time, never N x T x V
    entropy = signals.entropy(teacher, temperature=1.0)
    top = policy.score(
        teacher_prompts(spines.prompts, spines.columns, template), spines.completion_ids, topk=top_k, temperature=1.0
    )
    keys, forced = [], []  # forced: the completion so far, ending in the teacher's alternative
    for row, spine in enumerate(spines.completion_ids):
        for t in range(len(spine)):
            for j in range(top_k):
                keys.append((row, t, j))
                forced.append(tokenizer.decode(spine[:t] + [int(top.topk_ids[row, t, j])], skip_special_tokens=True))
    # A forced end of text ends the completion there; the others continue greedily (the built-in tokenizer reads
    # back the decoded prefix as the same tokens).
    ended = [int(top.topk_ids[r, t, j]) in tokenizer.all_special_ids for r, t, j in keys]
    go_on = [i for i, end in enumerate(ended) if not end]
    continuing = [spines.prompts[keys[i][0]] + forced[i] for i in go_on]
    continued = [g for start in range(0, len(continuing), CHUNK)
                 for g in policy.generate(continuing[start : start + CHUNK], do_sample=False)]
    completions = list(forced)
    for i, generation in zip(go_on, continued):
        completions[i] += generation.text
    lengths = [len(ids) for ids in spines.completion_ids]
    position = relative_positions(lengths).split(lengths)
    return {
        "viable": torch.tensor([exact_match(c, spines.columns["answer"][r]) > 0
                                for c, (r, _, _) in zip(completions, keys)]),
        "position": torch.tensor([float(position[r][t]) for r, t, _ in keys]),
        "low_entropy": torch.tensor([-float(entropy[r, t]) for r, t, _ in keys]),
        "teacher_probability": torch.tensor([float(top.topk_logprobs[r, t, j].exp()) for r, t, j in keys]),
        "spine": torch.tensor([r for r, _, _ in keys]),
        "spine_correct": spines.rewards["exact_match"],
    }


SCORES = ("position", "low_entropy", "teacher_probability")
FIGURES = (*SCORES, *(f"{name}_within" for name in SCORES), "position_correct_spines", "position_wrong_spines")


def within_spine_auroc(scores: torch.Tensor, viable: torch.Tensor, spine: torch.Tensor) -> float | None:
    """The AUROC over pairs of a viable and a non-viable branch of the same spine only, ties one half: how well the
    score orders the branches within a sequence, whatever the spine's own success rate."""
    above = pairs = 0.0
    for row in spine.unique():
        mine = spine == row
        high, low = scores[mine & viable].double(), scores[mine & ~viable].double()
        above += ((high[:, None] > low[None, :]).sum() + 0.5 * (high[:, None] == low[None, :]).sum()).item()
        pairs += len(high) * len(low)
    return above / pairs if pairs else None


def run(seed: int, problems: int, top_k: int = 3, overrides=()) -> dict[str, float]:
    """The AUROC of each score for "the alternative is viable", and the share of viable alternatives."""
    with tempfile.TemporaryDirectory() as out:
        config = load_config([RECIPE], [f"trainer.seed={seed}", f"output_dir={out}", *overrides])
        trainer = build_trainer(config)
        template = config.plugin_configs["pwopsd"].teacher_template
        found = branches(trainer, template, problems, seed=1000 + seed, top_k=top_k)
    result = {name: auroc(found[name], found["viable"]) for name in SCORES}
    for name in SCORES:
        result[f"{name}_within"] = within_spine_auroc(found[name], found["viable"], found["spine"])
    for label, correct in (("correct", True), ("wrong", False)):
        rows = (found["spine_correct"][found["spine"]] > 0) == correct
        result[f"position_{label}_spines"] = auroc(found["position"][rows], found["viable"][rows])
    result["viable"] = found["viable"].double().mean().item()
    result["branches"] = len(found["viable"])
    result["spine_accuracy"] = found["spine_correct"].mean().item()
    return result


def main():
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.splitlines()[0], steps=None)
    parser.add_argument("--problems", type=int, default=64)
    parser.add_argument("--top-k", type=int, default=3)
    args = parser.parse_args()
    # AUROCs for "viable" of each score (FIGURES), the viable share of the branches, the spines' own accuracy
    compare(args, ("pwopsd",), lambda method, seed, folder: run(seed, args.problems, args.top_k, args.overrides),
            figures=(*FIGURES, "viable", "branches", "spine_accuracy"))


if __name__ == "__main__":
    main()
