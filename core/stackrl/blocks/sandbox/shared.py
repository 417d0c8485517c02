"""One process's measurement, shared with every process: what a reward read from run times needs.

The reward stage runs on every process with the same rollout, and everything a sandboxed run gives is the same on
each but its times (``ExecResult.cpu_s``, ``wall_s``). A reward computed from times on each process would differ
between them, and the processes would train on different rewards. :func:`measured_once` computes on the main
process alone and broadcasts the result (accelerate's ``broadcast_object_list``); an error there is raised on every
process, so that none waits for a broadcast that never comes. With one process it is a plain call.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from stackrl.errors import StackrlError

T = TypeVar("T")


def measured_once(compute: Callable[[], T], *, what: str = "measurement") -> T:
    """``compute()`` run on the main process only, its result (any picklable value) handed to every process.

    Every process must call it at the same point (it is a collective operation when there are several). An
    exception on the main process is raised there as it came, once the others have its message: each of them
    raises a :class:`stackrl.StackrlError` with it (prefixed by ``what`` unless it is a ``StackrlError``)."""
    from accelerate import PartialState

    state = PartialState()
    if state.num_processes == 1:
        return compute()
    from accelerate.utils import broadcast_object_list

    outcome: tuple = (None, None)
    failure: Exception | None = None
    if state.is_main_process:
        try:
            outcome = (compute(), None)
        except Exception as exc:  # noqa: BLE001 - whatever stops the main process must stop every process
            failure = exc
            outcome = (None, str(exc) if isinstance(exc, StackrlError) else f"{what}: {type(exc).__name__}: {exc}")
    value, error = broadcast_object_list([outcome], from_process=0)[0]
    if failure is not None:
        raise failure
    if error is not None:
        raise StackrlError(error)
    return value
