"""The debate context: candidates chosen for distinct final answers, shown after the question."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from stackrl.answers import group_answers


def diverse_candidates(texts: Sequence[str], size: int, extract: Callable[[str], str | None], math_verify: bool) -> list[int]:
    """The indices of ``size`` candidates: the first of each distinct final answer, in the order they were
    sampled, then candidates without an answer, then the rest; so the context holds as many reasoning paths that
    disagree as the candidates offer."""
    clusters = group_answers([extract(t) for t in texts], math_verify=math_verify).index
    seen, first, unanswered, repeats = set(), [], [], []
    for i, cluster in enumerate(clusters):
        if cluster is None:
            unanswered.append(i)
        elif cluster in seen:
            repeats.append(i)
        else:
            seen.add(cluster)
            first.append(i)
    return (first + unanswered + repeats)[:size]


def debate_prompt(prompt: str, candidates: Sequence[str], template: str) -> str:
    """The question followed by each candidate as ``template`` shows it."""
    return prompt + "".join(template.format(candidate=c) for c in candidates)
