"""Fixtures of the host's own tests (the test kit's fixtures come from the stackrl pytest plugin)."""

import importlib.util
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def worker():
    """tests/distributed_worker.py as a module: ``launch`` a multi-process run, read its ``reports``, ``run_one``."""
    path = Path(__file__).with_name("distributed_worker.py")
    spec = importlib.util.spec_from_file_location("stackrl_tests_distributed_worker", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
