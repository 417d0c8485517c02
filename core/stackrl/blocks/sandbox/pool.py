"""``Sandbox``: the run's sandbox settings, the isolation they give on this machine, and a bounded worker pool.

A plugin gets the run's sandbox with ``Sandbox.of(ctx)`` (the ``sandbox`` section the context carries, one
sandbox per distinct section in the process) and runs a program with ``run`` or a batch with ``run_many`` (at
most ``sandbox.workers`` at once, results in the batch's order). Tests (:mod:`stackrl.blocks.sandbox.testcases`)
and interpreter sessions (:mod:`stackrl.blocks.sandbox.session`) run on a sandbox.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable

from stackrl.blocks.sandbox import isolation as isolations
from stackrl.blocks.sandbox.execution import ExecResult, Limits, execute
from stackrl.errors import ConfigError
from stackrl.sandbox_section import SandboxSection

logger = logging.getLogger(__name__)

_made: dict[tuple, Sandbox] = {}
_making = threading.Lock()


class Sandbox:
    """Runs model-written Python programs under the ``settings``' isolation and limits.

    Made, it has checked that its isolation works here, or refused (:class:`stackrl.ConfigError` naming
    ``sandbox.isolation``) unless ``sandbox.allow_unisolated`` is set. Every call may override a limit for itself
    (``timeout_s``, ``cpu_s``, ``memory_mb``).
    """

    def __init__(self, settings: SandboxSection | None = None):
        self.settings = settings or SandboxSection()
        self.isolation = isolations.choose(self.settings)
        self.interpreter = self._interpreter()
        self._pool = ThreadPoolExecutor(max_workers=self.settings.workers, thread_name_prefix="stackrl-sandbox")

    def _interpreter(self) -> list[str]:
        """The first interpreter that runs a program in this sandbox: ``sandbox.python``, else the trainer's, else
        the system's ``/usr/bin/python3`` (the trainer's may sit where the sandbox's user cannot read, under
        ``/root``)."""
        flags = ["-s"] if self.settings.site_packages else ["-s", "-S"]
        if self.settings.python:
            candidates = [self.settings.python]
        else:
            trainer = sys.executable if self.settings.site_packages else os.path.realpath(sys.executable)
            candidates = [trainer, "/usr/bin/python3"]
        failures = []
        for python in candidates:
            try:
                tried = execute(self.isolation, self.limits(), "pass", interpreter=[python, *flags])
            except OSError as exc:  # unisolated, the interpreter is started directly
                failures.append(str(exc))
                continue
            if tried.ok:
                if python != candidates[0]:
                    logger.warning("sandbox: programs run with %s; %s cannot run in the sandbox (%s)", python,
                                   candidates[0], failures[0])
                return [python, *flags]
            failures.append(tried.stderr.strip() or f"stopped: {tried.stopped}")
        raise ConfigError(
            f"sandbox.python: no interpreter runs in the sandbox as user {self.isolation.user.owner}: "
            + "; ".join(f"{python}: {why}" for python, why in zip(candidates, failures))
        )

    @classmethod
    def of(cls, ctx: Any) -> Sandbox:
        """The sandbox of the run ``ctx`` belongs to (its ``sandbox`` section; the defaults for a context built
        outside a run), made once per process and section."""
        return shared(getattr(ctx, "sandbox", None))

    @property
    def isolated(self) -> bool:
        return self.isolation.isolated

    def limits(self, **overrides) -> Limits:
        """The settings' limits with ``overrides`` (``None`` values left out) in their place."""
        values = {field.name: getattr(self.settings, field.name) for field in dataclasses.fields(Limits)}
        values.update({key: value for key, value in overrides.items() if value is not None})
        return Limits(**values)

    def run(
        self,
        program: str,
        stdin: str | bytes = "",
        files: dict[str, str | bytes] | None = None,
        timeout_s: float | None = None,
        cpu_s: float | None = None,
        memory_mb: int | None = None,
        argv: tuple[str, ...] = (),
    ) -> ExecResult:
        """Run the Python source ``program`` once, in a fresh folder holding ``files`` (relative name -> content),
        with ``stdin`` and ``argv``; see :class:`ExecResult` for what comes back."""
        return execute(
            self.isolation, self.limits(timeout_s=timeout_s, cpu_s=cpu_s, memory_mb=memory_mb), program,
            stdin=stdin, files=files, argv=tuple(argv), interpreter=self.interpreter,
        )

    def run_many(self, programs: Iterable[str], stdins: Iterable[str | bytes] | None = None, **options) -> list[ExecResult]:
        """Run each program (with the matching stdin, if given) on the pool, ``sandbox.workers`` at a time; the
        results come in the programs' order, and each run is the same as ``run``'s alone."""
        programs = list(programs)
        stdins = [""] * len(programs) if stdins is None else list(stdins)
        if len(stdins) != len(programs):
            raise ValueError(f"run_many: {len(programs)} programs but {len(stdins)} stdins")
        return list(self._pool.map(lambda job: self.run(job[0], job[1], **options), zip(programs, stdins)))

    def map(self, function, items: Iterable) -> list:
        """``function(item)`` for each item on the pool (for work made of several runs, such as a program's tests),
        ``sandbox.workers`` at a time, results in order."""
        return list(self._pool.map(function, items))


def shared(settings: SandboxSection | None) -> Sandbox:
    """The process's sandbox for ``settings`` (``None``: the defaults), made on first use."""
    settings = settings or SandboxSection()
    key = dataclasses.astuple(settings)
    with _making:
        if key not in _made:
            _made[key] = Sandbox(settings)
        return _made[key]


def check_isolation(settings: SandboxSection | None) -> Sandbox:
    """For a plugin's ``check_run``: make the run's sandbox now (``run.sandbox``), so that a machine where no
    isolation can be had refuses the run before anything loads, with the :class:`ConfigError` naming
    ``sandbox.isolation``."""
    return shared(settings)

