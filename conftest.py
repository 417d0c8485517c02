"""Set-up for every test of the checkout: the host's test plugins are found during tests, and only then."""

from pathlib import Path

from stackrl.testing.repository import use_fixture_plugins

pytest_plugins = ("pytester",)


def pytest_configure(config):
    use_fixture_plugins(Path(__file__).parent)
