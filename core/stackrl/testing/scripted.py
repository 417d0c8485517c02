"""Scripted problem writing, for plumbing tests of self-instruction (:mod:`stackrl.blocks.selfinstruct`) on a real run,
and a scripted policy for hook tests (:class:`ScriptedPolicy`).

What a model writes varies with its weights; a test that counts what each rule rejects replaces only the call
that writes the problems: the plugin's ``instruct.generate``. Rollouts, rewards, judging, the pool and the trainer
stay real. (``stackrl/arith-skills`` writes the built-in task's questions itself: serl's and selfjudge's tests run
their loops on it too.)
"""

from __future__ import annotations

from stackrl.policy import Generation


class ScriptedWriter:
    """Answers the requests of the round after step ``s`` with ``texts[s]`` (one text per request, in turn), and
    with nothing at a step it has no text for; keeps each round's requests in ``requests``."""

    def __init__(self, texts: dict):
        self.texts = {int(step): list(answers) for step, answers in texts.items()}
        self.requests: dict[int, list] = {}

    def __call__(self, ctx, prompts, **sampling):
        answers = self.texts.get(ctx.step, [""])
        self.requests[ctx.step] = list(prompts)
        return [Generation([], [], answers[i % len(answers)]) for i in range(len(prompts))]


def script_problems(trainer, plugin: str, texts: dict) -> ScriptedWriter:
    """Make ``plugin``'s self-instruction in ``trainer`` write ``texts`` (see :class:`ScriptedWriter`)."""
    writer = ScriptedWriter(texts)
    trainer.plugins.plugins[plugin].instruct.generate = writer
    return writer


class ScriptedPolicy:
    """A policy for hook tests that answers each prompt with its scripted texts in turn (``replies``: prompt to
    texts, cycled); ``asked`` keeps each ``generate`` call's prompts and sampling settings."""

    eos_token_ids = [9]

    def __init__(self, replies: dict):
        import itertools

        self.replies = {prompt: itertools.cycle(texts) for prompt, texts in replies.items()}
        self.asked: list[tuple[list, dict]] = []

    def generate(self, prompts, model="policy", caller=None, **sampling):
        self.asked.append((list(prompts), sampling))
        return [Generation([1], [2], next(self.replies[p])) for p in prompts]
