"""InT: the intervention a failed rollout gets (cut before its first wrong step, that step written right), the
filter that keeps it (a continuation reaches the answer), and the phase that fine-tunes on the kept pairs."""

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from stackrl.plots import METRICS_FILE
from stackrl.run import build_trainer
from stackrl.tasks.roles import judge_reply
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.heldout import WRITTEN_PROBLEMS, written_rollout
from stackrl_intrl.interventions import from_reference, read_tagged, target

RIGHT = WRITTEN_PROBLEMS["(4 * 2) + 3"]  # "4 * 2 = 8\n8 + 3 = 11\nThe answer is 11."
SLIPPED = "4 * 2 = 8\n8 + 3 = 12\nThe answer is 12."  # first wrong at step 1
EARLY = "4 * 2 = 9\n9 + 3 = 12\nThe answer is 12."  # first wrong at step 0, carried on


class TestConformance(PluginConformance):
    plugin_name = "intrl"
    plugin_settings = {"intrl": {"every": 1, "proposer": "reference", "continuations": 1, "max_continuation_tokens": 8}}
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


def carry_on(text: str) -> str:
    """A policy that carries an attempt of (4 * 2) + 3 on to the answer from right steps, and from a wrong step
    takes its result as the answer."""
    written = text.split("?\n", 1)[1]
    if RIGHT.startswith(written):
        return RIGHT[len(written):]
    last = re.findall(r"= (-?\d+)$", written)[-1]
    return f"\nThe answer is {last}."


class Policy:
    """A scripted policy: its check of an attempt is ``check(attempt)``; it continues a prefix with :func:`carry_on`."""

    def __init__(self, tokenizer, check):
        self.tokenizer, self.check, self.proposals, self.continued = tokenizer, check, [], []

    def generate(self, prompts, **sampling):
        out = []
        for prompt in prompts:
            if isinstance(prompt, str):  # a proposal prompt: question, attempt, "Check:"
                self.proposals.append(prompt)
                attempt = prompt.split("?\n", 1)[1].rsplit("\nCheck:\n", 1)[0]
                out.append(SimpleNamespace(text=self.check(attempt)))
            else:  # prompt ids + prefix + intervention
                text = self.tokenizer.decode(prompt)
                self.continued.append(text)
                out.append(SimpleNamespace(text=carry_on(text)))
        return out


def collect(tokenizer, completions, check=judge_reply, **settings):
    """Run the plugin's post_step on a rollout of the written problem (4 * 2) + 3; the plugin, the policy, the
    activity reported and whether a phase ran."""
    plugin = make_plugin("intrl", every=100, **settings)
    policy = Policy(tokenizer, check)
    acted, logged = [], {}
    rollout = written_rollout(tokenizer, ["(4 * 2) + 3"] * len(completions), completions, group_size=len(completions))
    ctx = SimpleNamespace(step=1, rollout=rollout, tokenizer=tokenizer, generate=policy.generate,
                          log=logged.__setitem__, acted=lambda n, of, hint=None: acted.append((n, of)))
    plugin.post_step(ctx)
    return plugin, policy, acted, [tokenizer.decode(t) for _, t in plugin.buffer.pairs]


@pytest.fixture
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_the_target_is_the_prefix_before_the_first_wrong_step_then_that_step_written_right(tokenizer):
    for proposer in ("reference", "policy"):
        plugin, policy, acted, targets = collect(tokenizer, [RIGHT, SLIPPED, EARLY], proposer=proposer)
        # nothing after the intervention: not the rest of the attempt, not eos
        assert targets == ["4 * 2 = 8\n8 + 3 = 11", "4 * 2 = 8"], proposer
        assert acted == [(2, 2)]  # two failed rollouts, both kept; the right one is no candidate
        assert all(p == plugin.buffer.pairs[0][0] for p, _ in plugin.buffer.pairs)  # the rollout's own prompt ids
    assert policy.proposals[0] == "What is (4 * 2) + 3?\n" + SLIPPED + "\nCheck:\n"  # the judge format


def test_the_policy_continues_from_the_prefix_and_the_intervention_as_often_as_set(tokenizer):
    _, policy, _, _ = collect(tokenizer, [SLIPPED], continuations=3)
    assert policy.continued == ["What is (4 * 2) + 3?\n4 * 2 = 8\n8 + 3 = 11"] * 3


def test_an_intervention_no_continuation_carries_to_the_answer_is_dropped_unless_the_filter_is_off(tokenizer):
    miscounted = lambda attempt: "4 * 2 = 8 | 8 yes\n8 + 3 = 10 | 12 no\nVerdict: wrong"  # noqa: E731
    _, _, acted, targets = collect(tokenizer, [SLIPPED], check=miscounted)
    assert targets == [] and acted == [(0, 1)]
    _, _, acted, targets = collect(tokenizer, [SLIPPED], check=miscounted, continuations=0)
    assert targets == ["4 * 2 = 8\n8 + 3 = 10"] and acted == [(1, 1)]


def test_a_check_that_writes_the_wrong_step_again_or_finds_no_error_gives_no_intervention(tokenizer):
    copied = lambda attempt: "4 * 2 = 8 | 8 yes\n8 + 3 = 12 | 12 no\nVerdict: wrong"  # noqa: E731
    for check in (copied, lambda attempt: "4 * 2 = 8 | 8 yes\nVerdict: correct", lambda attempt: "4 * 2"):
        plugin, policy, acted, _ = collect(tokenizer, [SLIPPED], check=check, continuations=0)
        assert plugin.buffer.pairs == [] and acted == [(0, 1)] and policy.continued == []


def test_a_repeated_failure_adds_its_pair_once(tokenizer):
    _, _, acted, targets = collect(tokenizer, [SLIPPED, SLIPPED])
    assert targets == ["4 * 2 = 8\n8 + 3 = 11"] and acted == [(2, 2)]


def test_the_reference_rule_replaces_the_first_step_that_differs_from_the_solution():
    steps = ["4 * 2 = 8", "8 + 3 = 12", "The answer is 12."]
    assert from_reference(steps, RIGHT, "\n") == (1, "8 + 3 = 11")
    assert target(steps, (1, "8 + 3 = 11"), "\n") == "4 * 2 = 8\n8 + 3 = 11"
    assert from_reference(["4 * 2 = 8"], RIGHT, "\n") is None  # follows the solution as far as it goes


def test_the_authors_tagged_reply_names_the_step_to_replace_from_one():
    steps = ["Let x = 2.", "Then x + 1 = 4.", "So 4."]
    reply = 'log... <intervention>{"content": "x = 1", "location": 9}</intervention> then ' \
            '<intervention>{"content": "Then x + 1 = 3.", "location": 2}</intervention>'
    assert read_tagged(reply, steps) == (1, "Then x + 1 = 3.")  # the last block
    assert read_tagged('<intervention>{"content": "x", "location": 4}</intervention>', steps) is None
    assert read_tagged('<intervention>{"content": "", "location": 1}</intervention>', steps) is None
    assert read_tagged("<intervention>not a dict</intervention>", steps) is None
    assert read_tagged("no block", steps) is None


def test_every_few_steps_the_policy_is_fine_tuned_on_the_pairs_collected_since_the_last_phase(make_config):
    """The tiny random model fails every problem; the reference rule gives each failure the solution's first steps.
    Each phase trains on exactly the pairs collected since the one before, then the buffer empties."""
    config = make_config(["intrl"], intrl={"proposer": "reference", "continuations": 0, "every": 1},
                         trainer={"max_steps": 2})
    phases = []

    def watched(plugin, name, contexts, completion_ids, **options):
        phases.append((name, [trainer.processing_class.decode(c) for c in completion_ids], options))
        return phase(plugin, name, contexts, completion_ids, **options)

    trainer = build_trainer(config)
    phase, trainer._supervised_phase = trainer._supervised_phase, watched
    trainer.train()
    assert [name for name, _, _ in phases] == ["int", "int"]
    for _, targets, options in phases:
        assert targets and options["learning_rate"] == 1e-4 and options["epochs"] == 2
    records = [json.loads(line) for line in (Path(trainer.args.output_dir) / METRICS_FILE).read_text().splitlines()]
    kept = [r["intrl/kept"] for r in records if "intrl/kept" in r]
    pairs = [r["phase/int/pairs"] for r in records if "phase/int/pairs" in r]
    assert len(kept) == 2 and pairs == [len(phases[0][1]), len(phases[1][1])] and sum(pairs) <= sum(kept)
    assert trainer.plugins.plugins["intrl"].buffer.pairs == []


def test_the_buffer_survives_a_resume(tokenizer):
    plugin, _, _, _ = collect(tokenizer, [SLIPPED])
    again = make_plugin("intrl")
    again.load_state_dict(json.loads(json.dumps(plugin.state_dict())))
    assert again.buffer.pairs == plugin.buffer.pairs
