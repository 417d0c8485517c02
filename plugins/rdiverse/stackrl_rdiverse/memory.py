"""The Memory-Augmented Penalty and the Skill-Aware Measurement: a question compared with every question posed at
earlier steps (the memory bank, kept across the whole run), by the skill it exercises rather than its surface."""

from __future__ import annotations

import re
from enum import Enum

from stackrl.blocks.selfinstruct import SimilarityIndex

_OPERATORS = {"+": " plus ", "-": " minus ", "*": " times ", "/": " over ", "(": " open ", ")": " close ",
              "^": " power ", "=": " equals "}
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


class Skill(str, Enum):
    """What two questions are compared by."""

    structure = "structure"  # the operations and their nesting, numbers abstracted (skill-aware)
    surface = "surface"  # the question's words and numbers as written (ROUGE-L on the text)


def skill_text(question: str, skill: Skill = Skill.structure) -> str:
    """The text a question is compared by: with ``structure``, every number is ``n`` and every operator and bracket
    a word, so two questions that differ only in their numbers read the same; with ``surface``, the question."""
    if Skill(skill) is Skill.surface:
        return question
    text = _NUMBER.sub(" n ", question)
    for symbol, word in _OPERATORS.items():
        text = text.replace(symbol, word)
    return " ".join(text.split())


def memory_penalty(similarities: list[float], max_weight: float, mean_weight: float) -> float:
    """The dual-perspective penalty of a question against the memory bank: ``max_weight`` times its highest
    similarity to a remembered question (a near copy) plus ``mean_weight`` times its mean similarity (a crowded
    region); 0 against an empty memory."""
    if not similarities:
        return 0.0
    return max_weight * max(similarities) + mean_weight * sum(similarities) / len(similarities)


class MemoryBank:
    """Every question posed at earlier steps, compared by ``skill``; its state is the questions, in order."""

    def __init__(self, skill: Skill = Skill.structure):
        self.skill = Skill(skill)
        self.questions: list[str] = []
        self._index = SimilarityIndex()

    def similarities(self, question: str) -> list[float]:
        return self._index.similarities(skill_text(question, self.skill))

    def add(self, questions: list[str]) -> None:
        for question in questions:
            self.questions.append(question)
            self._index.add(skill_text(question, self.skill))

    def state_dict(self) -> dict:
        return {"questions": list(self.questions)}

    def load_state_dict(self, state: dict) -> None:
        self.questions, self._index = [], SimilarityIndex()
        self.add(list(state["questions"]))
