"""Each problem's tables as a read-only SQLite file (the sandbox block's ``SqlDatabase``), built once from the row's
``setup`` script and kept while the run lasts, with the reference query's result beside it."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from stackrl.blocks.sandbox import SqlDatabase, SqlResult


class Databases:
    """``setup`` script -> its ``SqlDatabase``, at most ``keep`` of them open (the oldest closed first)."""

    def __init__(self, timeout_s: float, keep: int = 256):
        self.timeout_s, self.keep = timeout_s, keep
        self.folder: Path | None = None
        self.open: dict[str, SqlDatabase] = {}
        self.references: dict[tuple[str, str], SqlResult] = {}

    def of(self, setup: str) -> SqlDatabase:
        key = hashlib.sha1(setup.encode()).hexdigest()
        if key not in self.open:
            if self.folder is None:
                self.folder = Path(tempfile.mkdtemp(prefix="sqlpartial-"))
            if len(self.open) >= self.keep:
                oldest = next(iter(self.open))
                self.open.pop(oldest).close()
                (self.folder / f"{oldest}.sqlite").unlink(missing_ok=True)
                self.references = {k: v for k, v in self.references.items() if k[0] != oldest}
            path = self.folder / f"{key}.sqlite"
            path.unlink(missing_ok=True)
            self.open[key] = SqlDatabase.build(path, setup, timeout_s=self.timeout_s)
        return self.open[key]

    def run(self, setup: str, query: str) -> SqlResult:
        return self.of(setup).execute(query)

    def reference(self, setup: str, solution: str) -> SqlResult:
        key = (hashlib.sha1(setup.encode()).hexdigest(), solution)
        if key not in self.references:
            self.references[key] = self.run(setup, solution)
        return self.references[key]

    def close(self) -> None:
        for database in self.open.values():
            database.close()
        self.open, self.references = {}, {}
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
