"""Lexical retrieval over a fixed list of texts: ROUGE-L F (the self-instruction block's measure) or BM25 through the
optional ``bm25s`` package (``pip install 'stackrl[bm25]'``). The experience library ranks its records with it, the
``search`` environment its corpus. Texts are compared as :func:`stackrl.blocks.selfinstruct.rouge_tokens` splits
them (lower-case runs of letters and digits), so both measures see the same words."""

from __future__ import annotations

from collections.abc import Sequence

from stackrl.blocks.selfinstruct import rouge_l, rouge_tokens

RETRIEVALS = ("rouge_l", "bm25")


class LexicalIndex:
    """Scores of a query against each of ``texts`` (token lists, as ``rouge_tokens`` makes them), in their order."""

    def __init__(self, texts: Sequence[Sequence[str]], method: str):
        if method not in RETRIEVALS:
            raise ValueError(f"retrieval must be one of {', '.join(RETRIEVALS)}, not {method!r}")
        self.texts, self.method, self._bm25 = [list(t) for t in texts], method, None

    def scores(self, query: str | Sequence[str]) -> list[float]:
        query = rouge_tokens(query) if isinstance(query, str) else list(query)
        if self.method == "rouge_l":
            return [rouge_l(query, text) for text in self.texts]
        if not query or not self.texts:
            return [0.0] * len(self.texts)
        if self._bm25 is None:
            import bm25s

            self._bm25 = bm25s.BM25()
            # An empty text still takes its place, so the index's rows stay the texts in order.
            self._bm25.index([text or [""] for text in self.texts], show_progress=False)
        return [float(s) for s in self._bm25.get_scores(query)]
