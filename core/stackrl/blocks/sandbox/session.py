"""An interpreter kept across turns, for multi-turn tool use: each cell runs in the namespace earlier cells left.

A :class:`Session` is one long sandboxed run of a small server that reads cells (JSON lines) on stdin, runs each
with ``print`` and errors captured, shows the value of a final expression as the interactive interpreter does,
and answers with one JSON line. A cell that passes its time limit, kills the interpreter or breaks the exchange
ends the session: its state is lost, that cell's result says why, and the next cell starts a fresh interpreter
(``restarted`` says so). ``cpu_s`` and ``memory_mb`` limit the whole session, ``timeout_s`` each cell.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from contextlib import ExitStack
from dataclasses import dataclass

from stackrl.blocks.sandbox.execution import Launch, launched
from stackrl.blocks.sandbox.pool import Sandbox

SERVER = r'''
import ast, io, json, sys, traceback

namespace = {"__name__": "__main__", "__builtins__": __builtins__}
requests, replies, limit = sys.stdin, sys.stdout, int(sys.argv[1])


def run(code):
    tree = ast.parse(code, filename="<cell>", mode="exec")
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<cell>", "exec"), namespace)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
        if value is not None:
            print(repr(value))


for line in requests:
    out, err, error = io.StringIO(), io.StringIO(), None
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(""), out, err
    try:
        run(json.loads(line)["code"])
    except BaseException as exc:  # the session survives the cell: SystemExit and KeyboardInterrupt included
        error = type(exc).__name__
        trace = exc.__traceback__
        while trace is not None and trace.tb_frame.f_code.co_filename != "<cell>":
            trace = trace.tb_next
        traceback.print_exception(type(exc), exc, trace, file=err)
    finally:
        sys.stdin, sys.stdout, sys.stderr = requests, replies, sys.__stderr__
    reply = {"stdout": out.getvalue()[:limit], "stderr": err.getvalue()[:limit], "error": error}
    replies.write(json.dumps(reply) + "\n")
    replies.flush()
'''


@dataclass(frozen=True)
class CellResult:
    """One cell: what it printed (and the value of its final expression), its traceback, the exception's name
    (``error``), ``stopped`` (``exited`` when the cell ran, else why the session ended: ``timeout``,
    ``cpu_limit``, ``memory_limit``, ``signal``, ``output_limit``, ``broken`` for an unreadable answer), and
    whether the interpreter was started fresh for it after the previous one ended (``restarted``)."""

    stdout: str
    stderr: str
    error: str | None
    stopped: str
    restarted: bool


class Session:
    """A sandboxed Python interpreter whose state is kept across :meth:`execute` calls. Use it as a context
    manager, or call :meth:`close`; a session left open is closed when it is collected."""

    def __init__(self, sandbox: Sandbox, timeout_s: float | None = None, cpu_s: float | None = None,
                 memory_mb: int | None = None):
        self.sandbox = sandbox
        self.limits = sandbox.limits(timeout_s=timeout_s, cpu_s=cpu_s, memory_mb=memory_mb)
        self._stack: ExitStack | None = None
        self._run: Launch | None = None
        self._started_once = False

    def execute(self, code: str, timeout_s: float | None = None) -> CellResult:
        """Run ``code`` in the session's namespace, at most ``timeout_s`` (default: the session's) of wall clock."""
        restarted = self._started_once and self._run is None
        if self._run is None:
            self._start()
        run = self._run
        deadline = time.monotonic() + (timeout_s or self.limits.timeout_s)
        try:
            run.process.stdin.write(json.dumps({"code": code}).encode() + b"\n")
            run.process.stdin.flush()
        except BrokenPipeError:
            pass  # the interpreter died; reading says how
        line, ending = _read_line(run, deadline, 4 * self.limits.max_output_bytes + 1024)
        if line is not None:
            try:
                reply = json.loads(line)
                return CellResult(reply["stdout"], reply["stderr"], reply["error"], "exited", restarted)
            except (ValueError, KeyError, TypeError):
                ending = "broken"
        stopped = ending or run.result(b"", b"", None).stopped
        self.close()
        if stopped == "exited":
            stopped = "broken"  # the interpreter ended between cells: a cell closed or exited it
        return CellResult("", "", None, stopped, restarted)

    def close(self) -> None:
        """End the interpreter (killed and reaped); a later ``execute`` starts a fresh one."""
        if self._stack is not None:
            self._stack.close()
        self._stack, self._run = None, None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def _start(self) -> None:
        sandbox = self.sandbox
        self._stack = ExitStack()
        self._run = self._stack.enter_context(launched(
            sandbox.isolation, self.limits, SERVER, argv=(str(self.limits.max_output_bytes),),
            interpreter=sandbox.interpreter, stderr=subprocess.DEVNULL,
        ))
        self._started_once = True


def _read_line(run: Launch, deadline: float, limit: int) -> tuple[bytes | None, str | None]:
    """One line from the interpreter, or ``None`` and why not: ``timeout``, ``output_limit`` or ``None`` when it
    ended first."""
    fd = run.process.stdout.fileno()
    data = bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, "timeout"
            if not selector.select(left):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return None, None
            data += chunk
            if len(data) > limit:
                return None, "output_limit"
    line, _, rest = bytes(data).partition(b"\n")
    if rest:
        return None, "broken"  # a cell wrote to the real stdout past the server
    return line, None
