"""A long run's worth of sandboxed programs leaves no zombie and no process behind."""

import uuid

from stackrl.blocks.sandbox import pool
from stackrl.sandbox_section import SandboxSection
from stackrl.testing.processes import left_running, zombie_children


def test_no_zombie_after_a_thousand_runs():
    """A thousand short programs on the pool, a tenth of them leaving a child behind and one in twenty stopped at
    its timeout: every run is reaped, and no process of them is left."""
    token = uuid.uuid4().hex
    programs = []
    for i in range(1000):
        if i % 10 == 3:
            programs.append("import os, time\nif os.fork() == 0:\n    time.sleep(60)\n")
        elif i % 20 == 7:
            programs.append("while True:\n    pass\n")
        else:
            programs.append(f"print({i})")
    sandbox = pool.shared(SandboxSection(workers=2, timeout_s=0.2))
    results = sandbox.run_many(programs, argv=(token,))
    assert sum(result.stopped == "timeout" for result in results) == 50
    assert all(result.ok and result.stdout == f"{i}\n" for i, result in enumerate(results) if i % 10 != 3 and i % 20 != 7)
    assert zombie_children() == []
    assert left_running(token) == []
