"""OPD-Evolver: retrieval and the reading plan, the with/without attribution, writing and eviction, the teacher's
memory and hindsight against a memory-free student, conformance and resume."""

from stackrl.testing.conformance import PluginConformance


class TestConformance(PluginConformance):
    plugin_name = "opdevolver"
    refused_settings = [({"candidates": 0}, "must be at least 1, not 0"),
                        ({"reading_rows": 0}, "must be at least 1, not 0"),
                        ({"utility_rate": 0.0}, r"must lie in \(0, 1\], not 0.0"),
                        ({"teacher_template": "{solution}\n\n{prompt}"}, "names no {memory}"),
                        ({"record_template": "{answer}"}, r"not \{answer\}")]
