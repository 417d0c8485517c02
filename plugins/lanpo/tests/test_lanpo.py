"""Tests of the `lanpo` plugin: the host's conformance suite, then the method's own."""

from stackrl.testing.conformance import PluginConformance


class TestConformance(PluginConformance):
    plugin_name = "lanpo"
    refused_settings = [({"reflect_share": 1.5}, r"must lie in \[0, 1\], not 1.5"),
                        ({"reflect_share": 0.6, "abstract_share": 0.6}, "the shares exceed 1"),
                        ({"reflection": "oracle"}, "must be one of retry, check, not 'oracle'"),
                        ({"abstraction": "all"}, "must be one of trajectory, policy, not 'all'"),
                        ({"related": 0}, "must be at least 1, not 0"),
                        ({"min_relevance": -0.1}, "must be non-negative"),
                        ({"reflection_template": "{prompt} again"}, "must contain {attempt}"),
                        ({"abstraction_template": "{prompt}"}, "must contain {lessons}"),
                        ({"summary_template": "summarise"}, "must contain {trials}"),
                        ({"experience": {"capacity": 0}}, "capacity must be at least 1, not 0")]
