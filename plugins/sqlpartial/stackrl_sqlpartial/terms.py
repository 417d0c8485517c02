"""The partial rewards of Reasoning-SQL (arXiv 2503.23157) for one query against the reference query, each in
[0, 1] before its weight:

- ``execution``: 1 when the query's rows are the reference's, as a multiset (row order ignored, as the authors'
  set comparison does; a failed query matches nothing);
- ``syntax``: 1 when the query runs on the problem's database without error (right or wrong rows);
- ``schema``: the overlap of the tables and columns the query names with the reference's, Jaccard
  ``|P & G| / |P | G|`` (the paper) or recall ``|P & G| / |G|`` (the authors' code); a query that does not parse
  names nothing;
- ``ngram``: the Jaccard similarity of the two queries' word n-grams (bigrams by default);
- ``format``: 1 when the completion is one statement ending in ``;`` with nothing after it (the built-in task's
  reply format; the authors' format terms reward their ``<reasoning>``/``<answer>`` tags instead).

Tables and columns come from ``stackrl.blocks.sandbox.analyze`` (sqlglot); rows from ``SqlDatabase``.
"""

from __future__ import annotations

import re

from stackrl.blocks.sandbox import SqlAnalysis, SqlResult, analyze, same_rows

TERMS = ("execution", "syntax", "schema", "ngram", "format")

_TOKEN = re.compile(r"\w+|[^\w\s]")
_FENCE = re.compile(r"```(?:sql)?\s*(.*?)\s*```", re.DOTALL | re.IGNORECASE)


def query_of(completion: str) -> str:
    """The query a completion writes: the last fenced block's (```sql ... ```, as the authors' code reads an
    instruction model's reply) or else the text's, up to and including the first ``;`` (all of it, stripped, when
    there is none)."""
    fenced = _FENCE.findall(completion)
    text = (fenced[-1] if fenced else completion).strip()
    end = text.find(";")
    return text if end < 0 else text[: end + 1]


def well_formed(completion: str) -> float:
    """1.0 when the completion is one statement ending in ``;``, nothing but white space after it."""
    text = completion.strip()
    return float(bool(text) and text.endswith(";") and text.count(";") == 1)


def execution(result: SqlResult, reference: SqlResult, ordered: bool = False) -> float:
    return float(same_rows(result, reference, ordered=ordered))


def syntax(result: SqlResult) -> float:
    return float(result.ok)


def schema_items(analysis: SqlAnalysis) -> set[tuple[str, str]]:
    """The tables and columns a query names, each tagged with its kind (a column named like a table stays apart)."""
    if not analysis.parses:
        return set()
    return {("table", name) for name in analysis.tables} | {("column", name) for name in analysis.columns}


def schema_linking(query: SqlAnalysis, reference: SqlAnalysis, mode: str = "jaccard") -> float:
    predicted, gold = schema_items(query), schema_items(reference)
    if not gold:
        return 0.0
    shared = len(predicted & gold)
    return shared / len(gold) if mode == "recall" else shared / len(predicted | gold)


def ngrams(query: str, n: int) -> set[tuple[str, ...]]:
    tokens = _TOKEN.findall(query.lower())
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def ngram_similarity(query: str, reference: str, n: int = 2) -> float:
    """Jaccard similarity of the two queries' word n-grams (words, numbers and single punctuation marks, lower-case)."""
    a, b = ngrams(query, n), ngrams(reference, n)
    return len(a & b) / len(a | b) if a | b else 0.0
