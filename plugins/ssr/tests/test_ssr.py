"""ssr: the conformance suite (its judgement's rules: tests/test_judges.py; the mechanism: test_mechanism.py)."""

from stackrl.testing.conformance import PluginConformance


class TestConformance(PluginConformance):
    plugin_name = "ssr"
    plugin_settings = {"ssr": {"max_new_tokens": 8}}
