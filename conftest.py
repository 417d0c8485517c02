"""Set-up for every test of the checkout: the host's test plugins are found during tests, and only then; the suite
holds itself to its time budget (stackrl.testing.budget)."""

from pathlib import Path

from stackrl.testing.repository import use_fixture_plugins

pytest_plugins = ("pytester", "stackrl.testing.budget")


def pytest_configure(config):
    use_fixture_plugins(Path(__file__).parent)
