"""Self-instruction: the policy writes new problems into the prompt pool.

What the methods whose policy poses its own practice problems share (SeRL's self-instruction, self-judging's
practice loop). A round asks the policy, in a few requests, to continue a numbered list of example problems (some
from the training data, some it wrote before), reads the numbered problems it wrote, rejects those that are too
short or too long, name a banned word, start badly, or are too close (ROUGE-L) to a problem the pool already
holds, and adds the others to the pool as label-free rows, their prompt made as the run makes its prompts
(``ctx.pool.format_row``).

Every process runs the same round on the same generations (``ctx.generate`` in ``post_step`` returns the whole
result everywhere) and draws the examples from the block's own generator, so every process adds the same rows.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import torch

from stackrl.errors import ConfigError, PluginError
from stackrl.tasks.posing import REQUEST, parse_problems, request_text

REJECTIONS = ("length", "banned", "form", "similar")  # why a written problem is refused, in the order checked

# Words that ask for what a text model cannot see or do (a figure, a file), as in the self-instruct rules.
BANNED_WORDS = ["image", "images", "graph", "graphs", "picture", "pictures", "file", "files", "map", "maps", "draw",
                "plot", "go to"]

SYSTEM_PROMPT = ("You write practice problems for students of mathematics. Write new problems of your own only; "
                 "do not solve them.")


# -- ROUGE-L ----------------------------------------------------------------------------------------------------------


def rouge_tokens(text: str) -> list[str]:
    """The tokens ROUGE compares: lower-case runs of letters and digits (no stemming)."""
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).split()


def lcs_length(first: list, second: list) -> int:
    """The length of the longest common subsequence of two token lists.

    Bit-parallel (one big-integer update per token of ``second``), so comparing a problem with thousands of pool
    problems each round stays cheap: bit ``i`` of ``row`` is 0 where the LCS grows at ``first[i]``.
    """
    if not first or not second:
        return 0
    matches: dict = {}
    for i, token in enumerate(first):
        matches[token] = matches.get(token, 0) | (1 << i)
    full = (1 << len(first)) - 1
    row = full
    for token in second:
        hit = row & matches.get(token, 0)
        row = ((row + hit) | (row - hit)) & full
    return len(first) - bin(row).count("1")


def rouge_l(candidate, reference) -> float:
    """ROUGE-L F-measure of two texts (or token lists): ``2PR / (P + R)`` with ``P = LCS / len(candidate)`` and
    ``R = LCS / len(reference)``, computed as its equal ``2 LCS / (len(candidate) + len(reference))`` (exact at
    a threshold such as 0.7); 0 when either is empty."""
    a = rouge_tokens(candidate) if isinstance(candidate, str) else list(candidate)
    b = rouge_tokens(reference) if isinstance(reference, str) else list(reference)
    return 2 * lcs_length(a, b) / (len(a) + len(b)) if a and b else 0.0


# -- reading and reviewing written problems ----------------------------------------------------------------------------

def rule_rejection(problem: str, settings: SelfInstructSettings) -> str | None:
    """Why the rules refuse ``problem`` (a name of :data:`REJECTIONS` other than ``similar``), or ``None``."""
    words = len(problem.split())
    if words < settings.min_words or words > settings.max_words:
        return "length"
    if any(re.search(rf"\b{re.escape(word)}\b", problem, flags=re.IGNORECASE) for word in settings.banned_words):
        return "banned"
    if any(problem.startswith(start) for start in settings.banned_starts):
        return "banned"
    if problem[0] in string.punctuation or not problem[0].isascii():
        return "form"
    return None


def _common_ending(texts: list[str]) -> str:
    """The trailing whitespace every one of ``texts`` ends with."""
    endings = [text[len(text.rstrip()):] for text in texts]
    shortest = min(endings, key=len)
    return shortest if all(ending.endswith(shortest) for ending in endings) else ""


class SimilarityIndex:
    """The problems a new one must not repeat: ``closest(problem)`` is the highest ROUGE-L against any of them."""

    def __init__(self, problems=()):
        self._tokens: list[list[str]] = []
        for problem in problems:
            self.add(problem)

    def __len__(self) -> int:
        return len(self._tokens)

    def add(self, problem: str) -> None:
        self._tokens.append(rouge_tokens(problem))

    def closest(self, problem: str) -> float:
        return max(self.similarities(problem), default=0.0)

    def similarities(self, problem: str) -> list[float]:
        """The ROUGE-L of ``problem`` against each problem of the index, in the order they were added."""
        tokens = rouge_tokens(problem)
        return [rouge_l(tokens, known) for known in self._tokens]


def review(problems: list[str], known: SimilarityIndex, settings: SelfInstructSettings) -> tuple[list[str], Counter]:
    """The problems to keep, in order, and the count of each rejection. A kept problem joins ``known``, so a later
    one that repeats it is ``similar``."""
    kept, rejected = [], Counter()
    for problem in problems:
        reason = rule_rejection(problem, settings)
        if reason is None and known.closest(problem) > settings.max_similarity:
            reason = "similar"
        if reason is None:
            kept.append(problem)
            known.add(problem)
        else:
            rejected[reason] += 1
    return kept, rejected


# -- the round ------------------------------------------------------------------------------------------------------


@dataclass
class SelfInstructSettings:
    """A plugin's self-instruction, its config's ``self_instruct`` section (defaults: the self-instruct rules)."""

    every_steps: int = 0  # a round after every this many optimizer steps (0: never)
    problem_column: str = "question"  # the dataset column holding a problem's text; written rows get this column
    requests: int = 4  # few-shot requests per round
    examples: int = 8  # example problems per request
    written_examples: int = 2  # of those, how many are problems the policy wrote before (the rest: the dataset's)
    system_prompt: Optional[str] = SYSTEM_PROMPT  # a chat's system message; text runs put it first
    request: str = REQUEST  # before the numbered examples
    sampling: Dict[str, Any] = field(
        default_factory=lambda: {"do_sample": True, "temperature": 0.8, "top_p": 0.95, "max_new_tokens": 1024}
    )
    min_words: int = 4  # fewer words: rejected ("length")
    max_words: int = 150  # more words: rejected ("length")
    banned_words: List[str] = field(default_factory=lambda: list(BANNED_WORDS))  # whole words, any case
    banned_starts: List[str] = field(default_factory=lambda: ["Write a program"])
    max_similarity: float = 0.7  # ROUGE-L F above this against a problem the pool holds: rejected ("similar")
    seed: int = 0  # the examples' draws


def _generate(ctx, prompts, **sampling):
    return ctx.generate(prompts, **sampling)


class SelfInstruct:
    """The self-instruction of one plugin (``section``: its config section): its rounds, and what it wrote.

    ``written`` maps the pool id of each row it added to the problem; ``examples`` are the ids of written problems
    that requests may show (a plugin decides which: all, or those a filter kept). ``generate(ctx, prompts,
    **sampling)`` writes the problems (default: ``ctx.generate``); a test gives scripted text there.
    """

    def __init__(self, settings: SelfInstructSettings, section: str):
        key = f"{section}.self_instruct"
        if settings.every_steps < 0:
            raise ConfigError(f"{key}.every_steps must be 0 (no rounds) or more, not {settings.every_steps}")
        if settings.requests < 1 or settings.examples < 1:
            raise ConfigError(f"{key}.requests and {key}.examples must be at least 1")
        if not 0 <= settings.written_examples <= settings.examples:
            raise ConfigError(f"{key}.written_examples must lie in 0..{key}.examples ({settings.examples})")
        if not 1 <= settings.min_words <= settings.max_words:
            raise ConfigError(f"{key}.min_words and {key}.max_words must satisfy 1 <= min <= max")
        if not 0.0 <= settings.max_similarity <= 1.0:
            raise ConfigError(f"{key}.max_similarity must lie in [0, 1], not {settings.max_similarity}")
        self.settings, self.section = settings, section
        self.generate = _generate
        self.written: dict[int, str] = {}
        self.examples: list[int] = []
        self._generator = torch.Generator().manual_seed(settings.seed)

    def due(self, step: int) -> bool:
        return self.settings.every_steps > 0 and step > 0 and step % self.settings.every_steps == 0

    def round(self, ctx) -> list[int]:
        """Write, review and add problems to ``ctx.pool``; logs what was written, kept and rejected (by reason).
        Returns the new rows' ids."""
        settings = self.settings
        seeds = self._read_seeds(ctx)
        prompts = [self.request_prompt(self._pick(seeds, settings.examples - len(shown)) + shown, ctx.pool.chat)
                   for shown in (self._shown() for _ in range(settings.requests))]
        texts = [g.text for g in self.generate(ctx, prompts, **settings.sampling)]
        problems = [p for text in texts for p in parse_problems(text, continued=not ctx.pool.chat)]
        kept, rejected = review(problems, SimilarityIndex([*seeds, *self.written.values()]), settings)
        # A written problem ends as the seeds do: the built-in task's questions end in a newline, and after a
        # question without it the model solves almost none.
        ending = _common_ending(seeds)
        rows = [ctx.pool.format_row({settings.problem_column: p + ending}) for p in kept]
        ids = ctx.pool.add_rows(rows) if kept else []
        self.written.update(zip(ids, kept))
        ctx.log("instruct/written", len(problems))
        ctx.log("instruct/added", len(kept))
        for reason in REJECTIONS:
            ctx.log(f"instruct/rejected/{reason}", rejected[reason])
        return ids

    def request_prompt(self, problems: list[str], chat: bool):
        """A request to continue the numbered list of ``problems`` (in a random order): text ending with the next
        number, or a chat."""
        order = torch.randperm(len(problems), generator=self._generator).tolist()
        user = request_text([problems[i] for i in order], self.settings.request)
        system = self.settings.system_prompt
        if chat:
            return [*([{"role": "system", "content": system}] if system else []), {"role": "user", "content": user}]
        return f"{system}\n{user}" if system else user

    def _shown(self) -> list[str]:
        return [self.written[i] for i in self._pick(self.examples, self.settings.written_examples)]

    def _pick(self, items: list, count: int) -> list:
        order = torch.randperm(len(items), generator=self._generator)[:count].tolist()
        return [items[i] for i in order]

    def _read_seeds(self, ctx) -> list[str]:
        """The problems of the pool's active rows that this plugin did not write (read anew each round: the pool,
        not a copy, is what a checkpoint restores)."""
        column = self.settings.problem_column
        rows = [ctx.pool.row(i) for i in ctx.pool.active_rows() if i not in self.written]
        seeds = [str(row[column]) for row in rows if row.get(column) is not None]
        if not seeds:
            columns = sorted(set().union(*rows)) if rows else []
            raise PluginError(
                f"{self.section}.self_instruct.problem_column: no active row of the pool has a '{column}' to show as "
                f"an example problem at step {ctx.step}; columns: {', '.join(columns) or 'none'}"
            )
        return seeds

    def state_dict(self) -> dict:
        return {"written": dict(self.written), "examples": list(self.examples),
                "generator": self._generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.written = {int(i): text for i, text in state["written"].items()}
        self.examples = list(state["examples"])
        self._generator.set_state(state["generator"])
