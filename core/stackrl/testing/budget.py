"""A time budget the test suite holds itself to: each plugin's fast tests together, and each fast test alone.

The ini options ``plugin_time_budget`` (seconds a plugin's tests under ``plugins/<name>/`` may take together) and
``test_time_ceiling`` (seconds any one test may take) turn it on; a test marked ``mechanism`` is not counted. A run
that passes either fails, and its summary names the plugin, its total and its slowest tests, or the test.
``plugin_time_allowances`` lists the plugins allowed more than the budget, one ``<plugin> <seconds>`` a line: the
suite's known debts, each still capped, so that a debt cannot grow unseen.

A test is charged its call and its set-up, less the set-up of the session-scoped fixtures that no test folder
defines (the test kit's: the built-in models, their tokenizers): those are built once per process and shared by
every test that process runs after, so their cost belongs to none of them. Teardown is not charged: a session
fixture's teardown lands on whichever test ran last. Under pytest-xdist every worker times its own tests and the
controller, which receives every report, adds them up.
"""

from __future__ import annotations

import textwrap
import time
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

SHARED_SETUP = "shared_setup_s"  # the user property carrying a test's uncharged set-up time to the controller
SLOWEST_SHOWN = 3


def pytest_addoption(parser):
    parser.addini("plugin_time_budget", "seconds a plugin's tests not marked mechanism may take together (0: none)",
                  default="0")
    parser.addini("test_time_ceiling", "seconds any one test not marked mechanism may take (0: none)", default="0")
    parser.addini("plugin_time_allowances", "'<plugin> <seconds>' lines: plugins allowed more than the budget",
                  type="linelist", default=[])


def pytest_configure(config):
    budget = TimeBudget(float(config.getini("plugin_time_budget")), float(config.getini("test_time_ceiling")),
                        counts=not hasattr(config, "workerinput"),
                        allowances=allowances(config.getini("plugin_time_allowances")))
    config.pluginmanager.register(budget, "stackrl-time-budget")


def plugin_of(nodeid: str) -> str | None:
    """The plugin whose folder holds the test ``nodeid``, or None for the host's tests."""
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "plugins" else None


def allowances(lines: list[str]) -> dict[str, float]:
    """``plugin_time_allowances``'s lines as {plugin: seconds}."""
    parsed = {}
    for line in lines:
        try:
            plugin, seconds = line.split()
            parsed[plugin] = float(seconds)
        except ValueError:
            raise pytest.UsageError(f"plugin_time_allowances: '{line}' is not '<plugin> <seconds>'") from None
    return parsed


@dataclass(eq=False)  # a plugin: pluggy keeps plugins in sets, by identity
class TimeBudget:
    plugin_budget: float
    test_ceiling: float
    counts: bool  # False in an xdist worker: the controller adds up
    allowances: dict[str, float] = field(default_factory=dict)  # plugin -> seconds, in place of the budget
    charged: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # nodeid -> seconds
    _shared_setup: float = 0.0
    _depth: int = 0  # fixtures being set up, nested: only the outermost shared one is timed

    # In the process that runs the tests (a worker, or the only process).

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        shared = fixturedef.scope == "session" and not fixturedef.baseid and self._depth == 0
        self._depth += 1
        start = time.perf_counter()
        try:
            return (yield)
        finally:
            self._depth -= 1
            if shared:
                self._shared_setup += time.perf_counter() - start

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if call.when == "setup":
            report.user_properties.append((SHARED_SETUP, self._shared_setup))
            self._shared_setup = 0.0
        return report

    # Where the reports meet (the xdist controller, or the only process).

    def pytest_runtest_logreport(self, report):
        if not self.counts or report.when == "teardown" or "mechanism" in report.keywords:
            return
        shared = dict(report.user_properties).get(SHARED_SETUP, 0.0) if report.when == "setup" else 0.0
        self.charged[report.nodeid] += max(report.duration - shared, 0.0)

    def totals(self) -> dict[str, float]:
        """Each plugin's charged seconds, largest first."""
        totals = defaultdict(float)
        for nodeid, seconds in self.charged.items():
            if (plugin := plugin_of(nodeid)) is not None:
                totals[plugin] += seconds
        return dict(sorted(totals.items(), key=lambda item: -item[1]))

    def overruns(self) -> list[str]:
        """A line for each plugin over the budget and each test over the ceiling."""
        lines = []
        if self.plugin_budget:
            for plugin, total in self.totals().items():
                limit = self.allowances.get(plugin, self.plugin_budget)
                if total > limit:
                    tests = sorted((s, n) for n, s in self.charged.items() if plugin_of(n) == plugin)[::-1]
                    slowest = ", ".join(f"{n.split('::', 1)[1]} {s:.1f}s" for s, n in tests[:SLOWEST_SHOWN])
                    kind = "allowance" if plugin in self.allowances else "budget"
                    lines.append(f"plugin {plugin}: {total:.1f}s over the {limit:g}s {kind} (slowest: {slowest})")
        if self.test_ceiling:
            for nodeid, seconds in sorted(self.charged.items(), key=lambda item: -item[1]):
                if seconds > self.test_ceiling:
                    lines.append(f"test {nodeid}: {seconds:.1f}s over the {self.test_ceiling:g}s ceiling")
        return lines

    def pytest_sessionfinish(self, session):
        if self.counts and self.overruns() and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        if not (self.plugin_budget or self.test_ceiling) or not self.charged:
            return
        if totals := self.totals():
            terminalreporter.write_sep("=", "seconds per plugin, tests not marked mechanism")
            table = "   ".join(f"{plugin} {total:.1f}" for plugin, total in totals.items())
            for line in textwrap.wrap(table, terminalreporter._tw.fullwidth, break_long_words=False):
                terminalreporter.write_line(line)
        for line in self.overruns():
            terminalreporter.write_line(f"TIME BUDGET: {line}", red=True, bold=True)
