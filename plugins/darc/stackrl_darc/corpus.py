"""The teacher's documents: a corpus kept in the experience library (one record per document, its ``artefact`` the
document, its ``prompt`` the question it belongs to) and found again lexically for a question, then put into the
teacher's prompt (the glue between :mod:`stackrl.blocks.experience` and :mod:`stackrl.blocks.teacher`)."""

from __future__ import annotations

from stackrl.blocks.experience import Experience, ExperienceLibrary, prompt_text
from stackrl.blocks.teacher import teacher_prompts

DOCUMENT = "document"  # the records' tag, and the teacher template's field


def add_pool_rows(library: ExperienceLibrary, pool, rows, column: str, tokenizer) -> int:
    """Each of the pool's ``rows`` with a text in ``column`` kept as a document (key ``row:<id>``, so a row is kept
    once); returns how many were added."""
    added = 0
    for row in rows:
        values = pool.row(row)
        document = values.get(column)
        if not isinstance(document, str) or not document.strip():
            continue
        prompt = prompt_text(values["prompt"])
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        library.add(Experience(prompt_ids=list(ids), completion_ids=[], prompt=prompt, artefact=document,
                               tags=[DOCUMENT], key=f"row:{row}"))
        added += 1
    return added


def documents_for(library: ExperienceLibrary, prompts: list, k: int, min_score: float) -> list:
    """For each prompt, its ``k`` best documents joined by a blank line and the best one's score, or ``None`` where
    no document scores at least ``min_score``."""
    found = []
    for prompt in prompts:
        hits = [(r, s) for r, s in library.search(prompt_text(prompt), k, tags=[DOCUMENT]) if s >= min_score]
        found.append(("\n\n".join(r.artefact for r, _ in hits), hits[0][1]) if hits else None)
    return found


def teacher_prompts_with(prompts: list, documents: list[str], template: str, where: str) -> list:
    """The teacher's prompts: ``template`` with each prompt and its document (``{document}``)."""
    return teacher_prompts(prompts, {DOCUMENT: documents}, template, where=where)
