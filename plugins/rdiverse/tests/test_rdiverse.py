"""R-Diverse: the skill a question is compared by, the dual-perspective memory penalty, the challenger's reward
(uncertainty less the penalty, -1 for posing nothing) and the solver's pseudo-label reward on hand-built rollouts
(the solver's sub-rollouts scripted), the questions that join the pool, and the memory across a checkpoint."""

from types import SimpleNamespace

import pytest
import torch

from stackrl import Generation, RewardContext, Rollout
from stackrl.pool import CATEGORY_COLUMN
from stackrl.testing.conformance import PluginConformance
from stackrl_rdiverse import RDiverse, RDiverseConfig
from stackrl_rdiverse.memory import MemoryBank, Skill, memory_penalty, skill_text
from stackrl_rdiverse.plugin import LABEL_COLUMN


class TestConformance(PluginConformance):
    plugin_name = "rdiverse"
    refused_settings = [
        ({"solver_samples": 1}, "at least 2"),
        ({"min_agreement": 0.9, "max_agreement": 0.2}, r"0 <= min <= max <= 1, not \[0.9, 0.2\]"),
        ({"proposer_share": 0.0}, "strictly between 0 and 1"),
        ({"mean_weight": -1.0}, "0 or more"),
        ({"topic": ""}, "is empty"),
    ]


def test_the_skill_of_a_question_is_its_operations_not_its_numbers():
    assert skill_text("What is (3 + 4) * 2?") == "What is open n plus n close times n ?"
    assert skill_text("What is (31 + 47) * 9?") == skill_text("What is (3 + 4) * 2?")
    assert skill_text("What is (3 - 4) * 2?") != skill_text("What is (3 + 4) * 2?")
    assert skill_text("What is (3 + 4) * 2?", Skill.surface) == "What is (3 + 4) * 2?"


def test_the_penalty_weighs_the_closest_and_the_mean_similarity():
    assert memory_penalty([0.2, 1.0, 0.6], max_weight=0.5, mean_weight=0.5) == pytest.approx(0.5 + 0.5 * 0.6)
    assert memory_penalty([0.2, 1.0, 0.6], max_weight=1.0, mean_weight=0.0) == 1.0
    assert memory_penalty([], 0.5, 0.5) == 0.0


def test_the_memory_compares_by_skill_a_surface_copy_by_its_text():
    bank = MemoryBank(Skill.structure)
    bank.add(["What is (3 + 4) * 2?", "What is 5 - 1?"])
    # The same operations with other numbers: as close as a copy; another operation: less.
    assert bank.similarities("What is (8 + 9) * 7?")[0] == 1.0
    assert bank.similarities("What is (8 - 9) * 7?")[0] < 1.0
    surface = MemoryBank(Skill.surface)
    surface.add(["What is (3 + 4) * 2?"])
    assert surface.similarities("What is (8 + 9) * 7?")[0] < 1.0  # the words only: "what is" of five tokens


QUESTIONS = ["What is 1 + 1?", "What is (2 * 2) - 1?", "What is 3 + 3?"]
SOLVER = {  # the solver's four answers to each question
    "What is 1 + 1?": ["2", "2", "2", "2"],  # p = 1
    "What is (2 * 2) - 1?": ["3", "3", "4", "5"],  # p = 0.5
    "What is 3 + 3?": ["6", "6", "6", "7"],  # p = 0.75
}


def _ctx(solver_labels, training=True):
    def generate(prompts, model="policy", caller="", **sampling):
        answers = {q: iter(a) for q, a in SOLVER.items()}
        return [Generation([], [], f"The answer is {next(answers[p.strip()])}.") for p in prompts]

    texts = [f" {q}\n5. What is 9 - 9?\n" for q in QUESTIONS] + [" \n"]
    texts += ["The answer is 3.", "The answer is 4.", "none", "The answer is 3."]
    columns = {CATEGORY_COLUMN: ["rdiverse/propose"] * 4 + ["rdiverse/solve"] * 4,
               LABEL_COLUMN: [None] * 4 + [solver_labels] * 4}
    rollout = Rollout(["topic"] * 4 + ["q"] * 4, texts, [[1]] * 8, [[2]] * 8, columns, group_size=4)
    return RewardContext(step=0, tokenizer=None, policy=SimpleNamespace(generate=generate), _log=lambda *_: None,
                         _plugin="rdiverse", rollout=rollout, training=training)


def _plugin(**settings):
    plugin = RDiverse(RDiverseConfig(answer_extractor="answer_is", math_verify=False, solver_samples=4, **settings))
    plugin.name = "rdiverse"
    plugin.prompts = lambda question: question + "\n"
    return plugin


def test_the_challenger_earns_the_uncertainty_less_the_memory_penalty_and_the_solver_its_label():
    plugin = _plugin()
    plugin.memory.add(["What is 5 + 8?"])  # the skill of 1 + 1 and 3 + 3 (similarity 1), not of (2 * 2) - 1
    rewards = plugin.reward(_ctx("3"))
    # "what is open n times n close minus n" against "what is n plus n": LCS "what is n n", 2 * 4 / (9 + 5).
    other = 8 / 14
    # 1 - 2|p - 1/2| less 0.5 * max + 0.5 * mean of the similarities (one remembered question: both the same).
    assert rewards[:4] == pytest.approx([0.0 - 1.0, 1.0 - other, 0.5 - 1.0, -1.0])  # nothing posed: -1
    assert rewards[4:] == [1.0, 0.0, 0.0, 1.0]  # the solver: reaching the label 3
    # Only p in [0.3, 0.8] with a majority answer goes to the solver, with its label; every posed one to memory.
    assert plugin.pending == [("What is (2 * 2) - 1?", "3"), ("What is 3 + 3?", "6")]
    assert plugin.posed == QUESTIONS and plugin.memory.questions == ["What is 5 + 8?"]  # added after the step


def test_without_memory_the_reward_is_the_uncertainty_and_evaluation_adds_nothing():
    plugin = _plugin()
    rewards = plugin.reward(_ctx(None, training=False))
    assert rewards[:4] == pytest.approx([0.0, 1.0, 0.5, -1.0])
    assert rewards[4:] == [None] * 4  # solutions of a question without a pseudo-label: not scored
    assert plugin.pending == [] and plugin.posed == []


def test_the_surface_measure_penalises_a_renumbered_question_less_than_the_skill_measure():
    skill, surface = _plugin(), _plugin(skill="surface")
    for plugin in (skill, surface):
        plugin.memory.add(["What is 5 + 8?"])
    assert surface.reward(_ctx("3"))[0] > skill.reward(_ctx("3"))[0]


def test_the_memory_survives_a_weights_only_checkpoint(tmp_path):
    plugin = _plugin()
    plugin.memory.add(["What is (3 + 4) * 2?", "What is 5 - 1?"])
    torch.save(plugin.state_dict(), tmp_path / "state.pt")
    restored = _plugin()
    restored.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert restored.memory.questions == plugin.memory.questions
    assert restored.memory.similarities("What is (1 + 1) * 9?") == plugin.memory.similarities("What is (1 + 1) * 9?")
