"""InT: the intervention a failed rollout gets, the filter that keeps it, and the SFT pairs the phase trains on."""

from stackrl.testing.conformance import PluginConformance


class TestConformance(PluginConformance):
    plugin_name = "intrl"
    plugin_settings = {"intrl": {"every": 1, "proposer": "reference", "continuations": 1}}
    refused_settings = [
        ({"proposer": "teacher"}, "intrl.proposer: must be one of"),
        ({"reply_format": "json"}, "intrl.reply_format: must be one of"),
        ({"proposal_template": "{prompt}Check:\n"}, "intrl.proposal_template: must show the failed rollout"),
        ({"step_separator": ""}, "intrl.step_separator: must not be empty"),
        ({"every": 0}, "intrl.every: must be at least 1"),
        ({"continuations": -1}, "intrl.continuations: must be 0 or more"),
        ({"sft_learning_rate": 0.0}, "intrl.sft_learning_rate: must be positive"),
        ({"sft_batch_size": 0}, "intrl.sft_batch_size: must be at least 1 or null"),
        ({"metric": "intrl"}, "intrl.metric: must be a built-in outcome reward"),
    ]
