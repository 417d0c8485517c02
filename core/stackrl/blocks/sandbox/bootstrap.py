"""The first code of every sandboxed run, inside the sandbox: it lowers the resource limits, then runs the program.

Its source is handed to the interpreter, ``python -c SOURCE LIMITS MARKER_FD PROGRAM [ARGS...]`` (no file of the
host need be visible inside the sandbox): ``LIMITS`` is a JSON object of ``RLIMIT_*``
names to ``[soft, hard]``, set before any of the program's code runs (lowered hard limits cannot be raised again
by an unprivileged process). The program runs as ``__main__`` from the run's folder. When it ends by itself, this writes to ``MARKER_FD`` one
line, ``<completed> <cpu seconds>``: ``completed`` is 1 only when its code ran to its end (no uncaught exception,
no ``sys.exit``), the parent's proof that a test's assertions were all reached, which an exit status of 0 alone is
not; the CPU time is the process's and its reaped children's, which the parent cannot read through bubblewrap. A
program killed or ended by ``os._exit`` writes nothing. An uncaught exception prints its traceback without this
file's frames and exits with status 1.

Standard library only, and nothing of stackrl: it runs on an interpreter started with ``-S`` (no site-packages).
"""

import json
import os
import resource
import runpy
import sys
import traceback


def report(marker: int, completed: bool) -> None:
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = sum(use.ru_utime + use.ru_stime for use in usage)
    os.write(marker, f"{int(completed)} {cpu:.6f}\n".encode())


def main() -> None:
    limits, marker, program = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    for name, (soft, hard) in limits.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    os.set_inheritable(marker, False)
    sys.argv = sys.argv[3:]
    sys.path[0] = os.path.dirname(os.path.abspath(program))  # the run's folder, as for `python program`
    try:
        runpy.run_path(program, run_name="__main__")
    except SystemExit:
        report(marker, False)
        raise
    except BaseException as error:  # noqa: BLE001 - shown as the interpreter would, less this file's frames
        trace = error.__traceback__
        while trace is not None and trace.tb_frame.f_code.co_filename != program:
            trace = trace.tb_next
        traceback.print_exception(type(error), error, trace)
        report(marker, False)
        sys.exit(1)
    sys.stdout.flush()
    report(marker, True)


if __name__ == "__main__":
    main()
