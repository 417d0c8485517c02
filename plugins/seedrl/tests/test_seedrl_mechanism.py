"""SEED's mechanism on the built-in model: the token signal is the skill's log-probability shift, computed here by
hand from plain forwards, and reaches the advantages with the configured weight; on sampled rollouts it lowers the
wrong rows' tokens; in training the library keeps only verified completions, the newest of each prompt retrieved."""

from pathlib import Path

import pytest
import torch

from stackrl import Rollout
from stackrl.rewards import exact_match
from stackrl.testing.heldout import advantage_context, completion_logits, right_and_wrong_rollout
from stackrl.testing.repository import load_script
from stackrl_seedrl.skills import keep_verified, retrieved_skills

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
WEIGHT = 0.37  # not 1, so a weight left out shows


def hand_shift(trainer, rollout, skills: list, row: int) -> torch.Tensor:
    """``log p(y_t | skill + blank line + question) - log p(y_t | question)`` of row ``row``'s tokens, from two plain
    forwards of the model at the run's sampling temperature."""
    model, temperature = trainer.model, trainer.args.temperature
    completion = rollout.completion_ids[row]
    teacher_ids = trainer._tokenize_prompts([f"{skills[row]}\n\n{rollout.prompts[row]}"])[0][0]
    logps = []
    for context in (teacher_ids, rollout.prompt_ids[row]):
        logits = completion_logits(model, list(context), completion) / temperature
        logps.append(logits.log_softmax(-1).gather(1, torch.tensor(completion).unsqueeze(1)).squeeze(1))
    return (logps[0] - logps[1]).float()


def test_the_token_signal_is_the_skills_log_ratio_with_its_weight(built_in_trainer):
    trainer = built_in_trainer(["seedrl"], seedrl={"skills": "library", "teacher_template": "{skill}\n\n{prompt}",
                                                   "weight": WEIGHT})
    plugin = trainer.plugins.plugins["seedrl"]
    stored = right_and_wrong_rollout(trainer.processing_class)  # each problem: its solution, then a slip
    keep_verified(plugin.library, stored, stored.rewards["exact_match"].bool().tolist(), 0)
    rollout = right_and_wrong_rollout(trainer.processing_class)
    advantages = rollout.advantages.clone()
    reshaped = plugin.reshape_advantages(advantages, advantage_context(trainer, rollout, "seedrl"))
    skills = rollout.columns["skill"]
    assert skills == [stored.completions[0]] * 2 + [stored.completions[2]] * 2  # each group's verified solution
    mask = rollout.completion_mask()
    for row in range(len(rollout)):
        n = len(rollout.completion_ids[row])
        shift = hand_shift(trainer, rollout, skills, row)
        expected = advantages[row] + WEIGHT * shift
        assert torch.allclose(reshaped[row, :n], expected, atol=2e-4), (row, reshaped[row, :n], expected)
        assert (reshaped[row, n:] == 0).all() and mask[row, n:].sum() == 0
    # The skill moves the tokens by a lot: the slips' tokens fall (a plain-on-both-sides teacher gives 0 here).
    slip = hand_shift(trainer, rollout, skills, 1)
    assert slip.min() < -1.0 and slip.sum() < -2.0, slip


def test_on_sampled_rollouts_the_skill_lowers_the_wrong_rows():
    mechanism = load_script(BENCHMARK)
    found = mechanism.signal(seed=0, problems=16)
    assert found["rescored"] > 0.2, found
    # Measured at seed 0: -1.26 per token on wrong rows, -0.003 on correct ones.
    assert found["shift_wrong"] < found["shift_correct"] - 0.5, found


def test_in_training_the_library_keeps_verified_completions_and_gives_back_the_newest():
    mechanism = load_script(BENCHMARK)
    _, _, plugin, trainer = mechanism.run(seed=0, steps=STEPS)
    answers = dict(zip(trainer.train_dataset["prompt"], trainer.train_dataset["answer"]))
    records = list(plugin.library)
    assert len(records) >= 4, len(records)
    assert all(exact_match(r.completion, answers[r.prompt]) == 1.0 for r in records)
    newest = {}
    for record in records:
        newest[record.prompt_key] = record.completion
    probe = Rollout(prompts=[r.prompt for r in records], completions=[""] * len(records),
                    prompt_ids=[r.prompt_ids for r in records], completion_ids=[[]] * len(records),
                    group_size=1, columns={}, rewards={})
    assert retrieved_skills(plugin.library, probe, "same") == [newest[r.prompt_key] for r in records]


STEPS = 5  # the pool's 8-problem batches come back at step 4: the fifth step re-scores under stored skills
