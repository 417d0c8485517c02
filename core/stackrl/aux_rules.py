"""Rules: Python functions a plugin registers under a name, to be an auxiliary model of backend ``rule``.

A rule has the interface of a judge that writes: given a batch of prompts (text, chat messages or token ids, as
``ctx.generate`` takes them), it returns one reply text per prompt, which a :class:`stackrl.blocks.judges.Judge`
parses as it parses a model's judgement (``"yes"``, ``"Verdict: correct"``, ``"85"``). ``None`` is a failed reply.
A plugin registers its rules when its module is imported (the config imports the plugins it names before checking
``aux_models``), and ``aux_models.<name>.rule`` names one.
"""

from __future__ import annotations

from typing import Callable

from stackrl.errors import StackrlError

Rule = Callable[[list], list]

RULES: dict[str, Rule] = {}


def register_rule(name: str, rule: Rule) -> Rule:
    """Register ``rule`` under ``name``; the same function again (a module imported anew) replaces it, another
    function is refused."""
    known = RULES.get(name, rule)
    if (known.__module__, known.__qualname__) != (rule.__module__, rule.__qualname__):
        raise StackrlError(f"register_rule(): '{name}' is registered already, by {RULES[name].__module__}")
    RULES[name] = rule
    return rule
