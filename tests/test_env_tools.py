"""Tool schemas in chat prompts: ``ctx.generate(..., tools=...)`` and the environment runner show a TRL-style
environment's tools to a chat model as JSON schemas through its chat template (transformers' ``get_json_schema``, as
TRL's own tool loop does), on a tiny model whose local chat template renders tools; text prompts and templates that
render no tools are unchanged, and the ``tool_call`` grammar reads the replies."""

from __future__ import annotations

import json

import pytest

from stackrl import ConfigError
from stackrl.blocks.env import END_COLUMN, MOVES_COLUMN, RETURN_COLUMN, EnvSettings, Runner
from stackrl.context import SampleContext
from stackrl.policy import PolicyAccess, tool_schemas
from stackrl.run import build_trainer
from stackrl.testing.scripted import ScriptedPlayers

# A ChatML template that renders tools as Qwen's and Hermes' do: a system block listing each schema as JSON.
TOOLS_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n<tools>\n{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}\n</tools>\n"
    "Call a tool as <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call><|im_end|>\n{%- endif %}"
    "{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{%- endif %}"
)


class Lookup:
    """A user's TRL-style environment: reset(**row), a documented tool, get_reward()."""

    def reset(self, **row):
        self.key, self.found = row.get("key", "k7"), False
        return f"find {self.key}"

    def lookup(self, key: str) -> int:
        """Look a key up in the table.

        Args:
            key: the key to look up
        """
        self.found = key == self.key
        return 42 if self.found else 0

    def get_reward(self) -> float:
        return 1.0 if self.found else 0.0


class Undocumented(Lookup):
    def lookup(self, key):
        return 42


LOOKUP_SCHEMA = {"type": "function", "function": {
    "name": "lookup", "description": "Look a key up in the table.",
    "parameters": {"type": "object", "properties": {"key": {"type": "string", "description": "the key to look up"}},
                   "required": ["key"]},
    "return": {"type": "integer"}}}


def test_a_tool_s_schema_is_made_from_its_signature_and_docstring():
    assert tool_schemas([Lookup().lookup]) == [LOOKUP_SCHEMA]
    assert tool_schemas([LOOKUP_SCHEMA]) == [LOOKUP_SCHEMA]  # a schema is taken as it is
    with pytest.raises(Exception, match="tool 'lookup': no JSON schema"):
        tool_schemas([Undocumented().lookup])


# -- the runner, with a scripted policy ------------------------------------------------------------------------------

class ChatPlayers(ScriptedPlayers):
    """Scripted players that read chat prompts as their messages' text and keep each call's ``tools``."""

    def __init__(self, play, chat_template="{{ messages }}"):
        super().__init__(play)
        self.tokenizer.chat_template = chat_template
        self.tools: list = []

    def generate(self, prompts, model="policy", caller=None, tools=None, **sampling):
        self.tools.append(tools)
        prompts = ["".join(m["content"] for m in p) if isinstance(p, list) and p and isinstance(p[0], dict) else p
                   for p in prompts]
        return super().generate(prompts, model=model, caller=caller, **sampling)


CALL = '<tool_call>{"name": "lookup", "arguments": {"key": "k7"}}</tool_call>'
CHAT = [{"role": "user", "content": "q"}]


def play(settings: dict, prompt=CHAT, **players):
    players = ChatPlayers(lambda model, text: CALL if "42" not in text else "The answer is 42", **players)
    samples = Runner(EnvSettings(**{"environment": f"{__name__}:Lookup", "actions": "tool_call", "turn_tokens": 80,
                                    **settings})).run([prompt], players.context(group_size=1))
    return players, samples


def test_the_runner_shows_the_tools_schemas_on_a_chat_prompt_s_first_turn_and_reads_tool_calls():
    players, samples = play({})
    assert players.tools == [[LOOKUP_SCHEMA], None]  # the first turn renders the prompt; later turns continue tokens
    assert samples.columns[MOVES_COLUMN][0] == [[0, ["lookup", [], {"key": "k7"}]]]
    assert samples.columns[RETURN_COLUMN] == [1.0] and samples.columns[END_COLUMN] == ["done"]


@pytest.mark.parametrize("settings,prompt,template", [
    ({}, "q", "{{ messages }}"),  # a text prompt: nothing to render tools into
    ({}, CHAT, None),  # no chat template
    ({"tool_schemas": False}, CHAT, "{{ messages }}"),  # turned off
])
def test_no_tools_are_passed_where_there_is_no_chat_to_show_them_in(settings, prompt, template):
    players, samples = play(settings, prompt, chat_template=template)
    assert players.tools == [None, None] and samples.columns[RETURN_COLUMN] == [1.0]


def test_a_tool_without_a_schema_is_counted_or_refused():
    players, samples = play({"environment": f"{__name__}:Undocumented"})
    assert players.tools == [None, None] and players.logged["warnings/env/tool_schemas_missing"] == 1
    with pytest.raises(ConfigError, match="env.tool_schemas: tool 'lookup': no JSON schema"):
        Runner(EnvSettings(environment=f"{__name__}:Undocumented", actions="tool_call", tool_schemas=True))


def test_the_built_in_calculator_s_tool_has_a_schema():
    runner = Runner(EnvSettings(environment="calculator"))
    assert [s["function"]["name"] for s in runner.schemas] == ["calc"] and runner.schema_problem is None


# -- ctx.generate on a tiny chat model -------------------------------------------------------------------------------

@pytest.fixture
def trainer(make_config):
    return build_trainer(make_config())


def test_ctx_generate_renders_the_schemas_through_a_chat_template_that_shows_tools(trainer):
    policy = PolicyAccess(trainer, sharded=False)
    decode = trainer.processing_class.decode
    before = [policy.generate([p], max_new_tokens=2)[0].prompt_ids for p in (CHAT, "q")]
    plain = [policy.generate([p], max_new_tokens=2, tools=[Lookup().lookup])[0].prompt_ids for p in (CHAT, "q")]
    assert plain == before  # the built-in model's template renders no tools: its prompts are unchanged
    trainer.processing_class.chat_template = TOOLS_TEMPLATE
    shown = policy.generate([CHAT], max_new_tokens=2, tools=[Lookup().lookup])[0]
    assert json.dumps(LOOKUP_SCHEMA) in decode(shown.prompt_ids)
    assert decode(shown.prompt_ids).endswith("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n")
    assert "<tools>" not in decode(policy.generate([CHAT], max_new_tokens=2)[0].prompt_ids)
    text = policy.generate(["q"], max_new_tokens=2, tools=[LOOKUP_SCHEMA])[0]
    assert text.prompt_ids == before[1]  # a text prompt is generated from as it is
    ctx = SampleContext(step=0, tokenizer=trainer.processing_class, policy=policy, _log=lambda n, v: None,
                        _plugin="env", rollout_columns={"key": ["k7"]}, group_size=1)
    samples = Runner(EnvSettings(environment=f"{__name__}:Lookup", actions="tool_call", max_turns=1)).run([CHAT], ctx)
    assert json.dumps(LOOKUP_SCHEMA) in decode(samples.prompt_ids[0])  # the runner's prompt, rendered by the model's template
