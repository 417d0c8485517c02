"""Fixtures of the host's own tests (the test kit's fixtures come from the stackrl pytest plugin)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script


@pytest.fixture(scope="session")
def worker():
    """tests/distributed_worker.py as a module: ``launch`` a multi-process run, read its ``reports``, ``run_one``."""
    return load_script(Path(__file__).with_name("distributed_worker.py"))
