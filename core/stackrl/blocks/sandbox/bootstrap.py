"""The first code of every sandboxed run, inside the sandbox: it lowers the resource limits, then runs the program.

Its source is handed to the interpreter, ``python -c SOURCE LIMITS REPORT_FD PROGRAM [ARGS...]`` (no file of the
host need be visible inside the sandbox): ``LIMITS`` is ``NAME=SOFT:HARD`` pairs joined by commas (``NAME`` a
``resource.RLIMIT_*`` without its prefix), set before any of the program's code runs (lowered hard limits cannot be
raised again by an unprivileged process). The program runs as the module ``__main__`` from the run's folder. When
it ends by itself, this writes to ``REPORT_FD`` one line, ``<completed> <cpu seconds>``: ``completed`` is 1 only
when its code ran to its end (no uncaught exception, no ``sys.exit``), the parent's proof that a test's assertions
were all reached, which an exit status of 0 alone is not; the CPU time is the process's and its reaped children's,
which the parent cannot read through bubblewrap. A program killed or ended by ``os._exit`` writes nothing. An
uncaught exception prints its traceback without this file's frames and exits with status 1.

Standard library only, nothing of stackrl, and few imports (it starts every run): it runs on an interpreter started
with ``-S`` (no site-packages).
"""

import os
import resource
import sys


def report(fd: int, completed: bool) -> None:
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = sum(use.ru_utime + use.ru_stime for use in usage)
    os.write(fd, f"{int(completed)} {cpu:.6f}\n".encode())


def main() -> None:
    limits, fd, program = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    for item in limits.split(","):
        name, _, values = item.partition("=")
        soft, _, hard = values.partition(":")
        resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (int(soft), int(hard)))
    os.set_inheritable(fd, False)
    sys.argv = sys.argv[3:]
    sys.path[0] = os.path.dirname(program)  # the run's folder, as for `python program`
    module = type(sys)("__main__")
    module.__file__ = program
    sys.modules["__main__"] = module
    try:
        with open(program, "rb") as source:
            code = compile(source.read(), program, "exec")
        exec(code, module.__dict__)
    except SystemExit:
        report(fd, False)
        raise
    except BaseException as error:  # noqa: BLE001 - shown as the interpreter would, less this file's frames
        import traceback

        trace = error.__traceback__
        while trace is not None and trace.tb_frame.f_code.co_filename != program:
            trace = trace.tb_next
        traceback.print_exception(type(error), error, trace)
        report(fd, False)
        sys.exit(1)
    sys.stdout.flush()
    report(fd, True)


if __name__ == "__main__":
    main()
