"""A search tool over a local corpus, in TRL's environment convention: ``reset(**row)`` and one public method, the
tool ``search``, which shows the ``k`` documents that match a query best (BM25 through ``bm25s``, or ROUGE-L:
:mod:`stackrl.blocks.retrieval`). The corpus is the built-in task ``lookup``'s (:func:`stackrl.tasks.lookup.corpus`)
unless ``corpus`` names a file: a ``.jsonl`` of objects with a ``text`` field, or a text file of one document a line.
The run's outcome reward scores the final answer, as on the task without it."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from stackrl.blocks.retrieval import RETRIEVALS, LexicalIndex
from stackrl.blocks.selfinstruct import rouge_tokens
from stackrl.errors import ConfigError

NO_RESULTS = "no results"


@cache
def _index(corpus: str | None, retrieval: str) -> tuple[list[str], LexicalIndex]:
    """A corpus's documents and their index, made once per process (every episode's instance shares them)."""
    if corpus is None:
        from stackrl.tasks.lookup import corpus as builtin

        documents = builtin()
    else:
        path = Path(corpus)
        if not path.is_file():
            raise ConfigError(f"env.kwargs.corpus: no file {corpus}")
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        try:
            documents = [json.loads(line)["text"] for line in lines] if path.suffix == ".jsonl" else lines
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ConfigError(f"env.kwargs.corpus: {corpus} is not JSON lines with a 'text' field ({e!r})") from None
    if retrieval == "bm25":
        try:
            import bm25s  # noqa: F401
        except ImportError:
            raise ConfigError("env.kwargs.retrieval: bm25 needs the bm25s package: pip install 'stackrl[bm25]' "
                              "(or retrieval: rouge_l)") from None
    return documents, LexicalIndex([rouge_tokens(d) for d in documents], retrieval)


class Search:
    """Search a local corpus: ``<search>kavo</search>`` shows ``kavo is 37.``"""

    def __init__(self, corpus: str | None = None, k: int = 3, retrieval: str = "bm25"):
        if not isinstance(k, int) or k < 1:
            raise ConfigError(f"env.kwargs.k: must be a positive integer, not {k!r}")
        if retrieval not in RETRIEVALS:
            raise ConfigError(f"env.kwargs.retrieval: must be one of {', '.join(RETRIEVALS)}, not '{retrieval}'")
        self.documents, self.index = _index(corpus, retrieval)
        self.k = k

    def reset(self, **row) -> None:
        return None

    def search(self, query: str) -> str:
        """Find the documents of the corpus that match a query best, one a line (or "no results").

        Args:
            query: words to look for, such as a name
        """
        scores = self.index.scores(query)
        best = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))[: self.k]
        return "\n".join(self.documents[i] for i in best) or NO_RESULTS
