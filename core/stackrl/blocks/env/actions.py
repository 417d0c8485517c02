"""Reading the action from a turn the policy wrote: a plain-text grammar for text-only models, or a chat
template's tool-call format.

``move`` reads ``move: 4`` (a game's action, the text after the colon up to the line's end); ``tag`` reads
``<calc>23*7</calc>`` as a call of the tool ``calc`` with one argument; ``tool_call`` reads the JSON
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` that chat templates with tools (Qwen's, Hermes') teach;
``text`` takes the whole turn. Any other value is a regular expression with one group, the action. The first match
in the turn is the action.
"""

from __future__ import annotations

import json
import re

from stackrl.blocks.env.protocol import ToolCall
from stackrl.errors import ConfigError

GRAMMARS = ("move", "tag", "tool_call", "text")
_MOVE = re.compile(r"move:[ \t]*([^\n]*?)[ \t]*(?:\n|$)")
_TAG = re.compile(r"<(\w+)>(.*?)</\1>", re.DOTALL)
_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


def check_grammar(grammar: str, *, key: str) -> None:
    """Refuse a grammar that is neither a named one nor a regular expression with one group."""
    if grammar in GRAMMARS:
        return
    try:
        groups = re.compile(grammar).groups
    except re.error as e:
        raise ConfigError(f"{key}: '{grammar}' is not one of {', '.join(GRAMMARS)} nor a regular expression ({e})") from None
    if groups != 1:
        raise ConfigError(f"{key}: the regular expression '{grammar}' has {groups} groups; the action is its one group")


def parse_action(grammar: str, text: str) -> str | ToolCall | None:
    """The action a turn states (a game's action text, or a tool call), or ``None`` where it states none."""
    if grammar == "text":
        return text.strip() or None
    if grammar == "move":
        found = _MOVE.search(text)
        return found.group(1) if found and found.group(1) else None
    if grammar == "tag":
        found = _TAG.search(text)
        return ToolCall(found.group(1), (found.group(2).strip(),)) if found else None
    if grammar == "tool_call":
        found = _TOOL_CALL.search(text)
        if not found:
            return None
        try:
            call = json.loads(found.group(1))
        except json.JSONDecodeError:
            return None
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return None
        arguments = call.get("arguments") or {}
        return ToolCall(call["name"], (), arguments) if isinstance(arguments, dict) else None
    found = re.search(grammar, text)
    return found.group(1) if found else None
