"""The suite's time budget (stackrl.testing.budget): a plugin's tests over it, or one test over the ceiling, fail
the run by name; mechanism tests and the set-up of shared session fixtures are not charged."""

import pytest

SLEEPS = """
import time

import pytest

def test_short():
    time.sleep(0.1)

def test_long():
    time.sleep({long})

@pytest.mark.mechanism
def test_mechanism():
    time.sleep(1.0)
"""


def limits(pytester, budget=0, ceiling=0, allowances=""):
    pytester.makeini(f"""
        [pytest]
        plugin_time_budget = {budget}
        test_time_ceiling = {ceiling}
        plugin_time_allowances = {allowances}
        markers = mechanism: slow
    """)


@pytest.fixture
def suite(pytester):
    """Two plugins' tests and a host test, under a 1 s budget and a 2 s ceiling."""
    limits(pytester, budget=1, ceiling=2)
    pytester.makepyfile(**{
        "plugins/slow/tests/test_slow.py": SLEEPS.format(long=1.0),
        "plugins/quick/tests/test_quick.py": SLEEPS.format(long=0.1),
        "tests/test_host.py": "def test_host():\n    pass\n",
    })
    return pytester


def test_a_plugin_over_its_budget_fails_the_run_naming_its_total_and_slowest_tests(suite):
    result = suite.runpytest("-p", "stackrl.testing.budget")
    result.assert_outcomes(passed=7)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*seconds per plugin, tests not marked mechanism*",
        "slow 1.*   quick 0.*",
        "TIME BUDGET: plugin slow: 1.*s over the 1s budget (slowest: test_long 1.*s, test_short 0.*s)",
    ])
    assert "plugin quick:" not in result.stdout.str()


def test_within_budget_the_run_passes(suite):
    limits(suite, budget=5, ceiling=5)
    result = suite.runpytest("-p", "stackrl.testing.budget")
    assert result.ret == pytest.ExitCode.OK
    assert "TIME BUDGET" not in result.stdout.str()


def test_an_allowance_lifts_one_plugins_limit_and_still_caps_it(suite):
    limits(suite, budget=0.5, ceiling=5, allowances="slow 5")
    result = suite.runpytest("-p", "stackrl.testing.budget")
    assert result.ret == pytest.ExitCode.OK
    limits(suite, budget=5, ceiling=5, allowances="slow 0.5")
    result = suite.runpytest("-p", "stackrl.testing.budget")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["TIME BUDGET: plugin slow: 1.*s over the 0.5s allowance (slowest: test_long 1.*s*"])
    assert "plugin quick:" not in result.stdout.str()


def test_a_test_over_the_ceiling_is_named(pytester):
    limits(pytester, ceiling=0.5)
    pytester.makepyfile(test_host="import time\n\ndef test_slow():\n    time.sleep(0.6)\n")
    result = pytester.runpytest("-p", "stackrl.testing.budget")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["TIME BUDGET: test test_host.py::test_slow: 0.*s over the 0.5s ceiling"])


def test_shared_session_fixtures_are_not_charged_but_a_plugins_own_are(pytester):
    limits(pytester, budget=0.5)
    pytester.makeconftest("""
        import time
        import pytest

        @pytest.fixture(scope="session")
        def shared_model():
            time.sleep(1.0)
    """)
    pytester.makepyfile(**{
        "plugins/a/tests/test_a.py": "def test_a(shared_model):\n    pass\n",
        "plugins/b/tests/conftest.py": (
            "import time\nimport pytest\n\n"
            "@pytest.fixture(scope='session')\ndef own_model():\n    time.sleep(0.6)\n"
        ),
        "plugins/b/tests/test_b.py": "def test_b(own_model):\n    pass\n",
    })
    result = pytester.runpytest("-p", "stackrl.testing.budget")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["TIME BUDGET: plugin b: 0.*s over the 0.5s budget*"])
    assert "plugin a:" not in result.stdout.str()


def test_under_xdist_the_controller_adds_up_the_workers_reports(suite):
    # Without the test kit's fixtures (-p no:stackrl), which these tests do not use: the workers start quicker.
    result = suite.runpytest_subprocess("-p", "stackrl.testing.budget", "-p", "no:stackrl", "-n", "2")
    result.assert_outcomes(passed=7)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["TIME BUDGET: plugin slow: 1.*s over the 1s budget*"])
