"""CADENCE on the built-in models, one step of configs/recipes/cadence-cpu.yaml (the student arith-tiny, the
recipe's teacher): the advantages the plugin returned are GRPO's plus DRIFT's mixture at the beta it used, with its
forking boost, worked out again from the two models scored apart; that beta is COVA's of the coverage measured
again, below the cosine schedule's; and the rewards are CCD's and LAP's by hand."""

import math
from pathlib import Path

import pytest
import torch
import yaml

from stackrl.answers import extract_answer
from stackrl.modeling import resolve_model_path
from stackrl.rewards import exact_match
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

ROOT = Path(__file__).resolve().parents[3]
BENCHMARK = ROOT / "plugins" / "cadence" / "benchmarks" / "mechanism.py"
RECIPE = yaml.safe_load((ROOT / "configs" / "recipes" / "cadence-cpu.yaml").read_text())
SETTINGS = RECIPE["cadence"]
# alpha_max 0.3 keeps COVA's beta (about 0.7 at this coverage) away from 1/2, where a swapped mixture would agree.
ALPHA_MAX = 0.3


@pytest.fixture(scope="module")
def first():
    record, plugin = load_script(BENCHMARK).run(seed=0, steps=1, overrides=[f"cadence.alpha_max={ALPHA_MAX}"])
    return record, plugin.last


def distributions(name: str, prompts, completions) -> list[torch.Tensor]:
    """Each row's log-probs over the vocabulary at each completion token, from the model ``name`` loaded apart."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(resolve_model_path(name)).eval()
    out = []
    with torch.no_grad():
        for prompt, completion in zip(prompts, completions):
            ids = torch.tensor([prompt + completion])
            logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
            out.append(torch.log_softmax(logits, -1))  # the recipe samples at temperature 1
    return out


def test_drift_cova_and_ftb_are_the_rules_on_the_two_models(first):
    record, last = first
    batch = record["reshape_advantages"]
    assert batch["step"] == 0  # the first batch: the student is still arith-tiny
    prompts, completions = batch["prompt_ids"], batch["completion_ids"]
    student = distributions(RECIPE["model"]["name_or_path"], prompts, completions)
    teacher = distributions(RECIPE["aux_models"][SETTINGS["teacher"]]["name_or_path"], prompts, completions)

    # Coverage of the teacher's top-k by the student, over every completion token, and COVA's beta from it (the
    # first batch's average is its coverage).
    covered = []
    for s, t in zip(student, teacher):
        top = t.topk(SETTINGS["coverage_k"], dim=-1)
        mass = top.values.exp()
        covered.append((mass * (s.gather(-1, top.indices).exp() > SETTINGS["coverage_tau"])).sum(-1) / mass.sum(-1))
    coverage = torch.cat(covered).mean().item()
    assert last["batch_coverage"] == pytest.approx(coverage, abs=1e-4)
    assert last["coverage_ema"] == pytest.approx(coverage, abs=1e-4)
    cosine = 1.0  # step 0 of the cosine schedule
    excess = max(0.0, coverage - SETTINGS["gate"]) / (1 - SETTINGS["gate"])
    beta = max(SETTINGS["beta_end"], cosine * (1 - ALPHA_MAX * excess))
    assert last["beta_cosine"] == pytest.approx(cosine)
    assert last["beta"] == pytest.approx(beta, abs=1e-4)
    assert coverage > SETTINGS["gate"] and beta < cosine - 0.1  # COVA acted: the student covers the teacher

    # Each token: GRPO's advantage + drift_scale * ((1 - beta) * -k + beta * T * w / sum w) * (1 + boost * min(1, H/2)).
    grpo, reshaped = batch["advantages"], batch["reshaped"]
    assert grpo.dim() == 1 and reshaped.dim() == 2
    checked = 0
    for row, (s, t, ids) in enumerate(zip(student, teacher, completions)):
        index = torch.tensor(ids).unsqueeze(1)
        k = (s.gather(1, index) - t.gather(1, index)).squeeze(1)
        weights = torch.exp(-k).clamp(max=SETTINGS["weight_clip"])
        forward = len(ids) * weights / weights.sum()
        h = -(t.exp() * t).sum(-1)
        boost = 1 + SETTINGS["boost"] * (h / SETTINGS["entropy_ref"]).clamp(max=1)
        drift = ((1 - beta) * -k + beta * forward) * boost
        expected = grpo[row] + SETTINGS["drift_scale"] * drift
        assert reshaped[row, :len(ids)].tolist() == pytest.approx(expected.tolist(), abs=2e-4), row
        assert (reshaped[row, len(ids):] == 0).all()
        checked += len(ids)
    assert checked > 100


def test_the_reward_is_ccd_partial_credit_and_lap_brevity_by_hand(first):
    record, _ = first
    batch = record["reward"]
    size, partial, tolerance, brevity = (batch["group_size"], SETTINGS["partial_credit"], SETTINGS["tolerance"],
                                         SETTINGS["brevity"])
    expected = []
    for start in range(0, len(batch["completions"]), size):
        rows = range(start, start + size)
        right = [exact_match(batch["completions"][i], batch["answers"][i]) == 1.0 for i in rows]
        longest = max((batch["lengths"][i] for i, r in zip(rows, right) if r), default=0)
        for i, r in zip(rows, right):
            if r:
                expected.append(1.0 + brevity * (1 - batch["lengths"][i] / longest))
                continue
            found = extract_answer(batch["completions"][i])
            try:
                guess, gold = float(found), float(batch["answers"][i])
            except (TypeError, ValueError):
                expected.append(0.0)
                continue
            expected.append(partial * math.exp(-abs(guess - gold) / (tolerance * max(1.0, abs(gold)))))
    assert batch["rewards"] == pytest.approx(expected, abs=1e-6)
    # Partial credit acted on this batch: some wrong answer earned a share of a right one's reward, and a closer
    # wrong answer more than a farther one.
    assert any(0.05 < r < 1.0 for r in batch["rewards"]), batch["rewards"]
