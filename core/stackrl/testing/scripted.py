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


class CharTokenizer:
    """One character a token (its code point), for scripted multi-turn tests; ``9`` is the end-of-sequence token."""

    eos_token_id = 9

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids if not (skip_special_tokens and i == self.eos_token_id))


class ScriptedPlayers:
    """A policy for environment-runner tests: ``play(model, context_text)`` writes each reply (the sampled model's
    name and the whole context it continues as text), one character a token, end-of-sequence ``9`` after it, cut to
    ``max_new_tokens``. ``asked`` keeps each ``generate`` call's model and contexts; :meth:`context` is a real
    sample-stage context over it, whose logs land in ``logged``."""

    eos_token_ids = [CharTokenizer.eos_token_id]
    sampling_temperature = 1.0

    def __init__(self, play):
        self.play = play
        self.tokenizer = CharTokenizer()
        self.asked: list[tuple[str, list[str]]] = []
        self.logged: dict[str, float] = {}

    def generate(self, prompts, model="policy", caller=None, **sampling):
        contexts = [p if isinstance(p, str) else self.tokenizer.decode(p) for p in prompts]
        self.asked.append((model, contexts))
        out = []
        for text in contexts:
            ids = self.tokenizer(self.play(model, text))["input_ids"] + self.eos_token_ids
            ids = ids[: sampling.get("max_new_tokens", len(ids))]
            out.append(Generation(self.tokenizer(text)["input_ids"], ids, self.tokenizer.decode(ids, True)))
        return out

    def snapshot(self, name: str):
        """Every snapshot the runner asks for exists: the scripted replies stand for each model."""
        return name

    def context(self, *, group_size: int, columns: dict | None = None, step: int = 0):
        from stackrl.context import SampleContext

        def log(name, value):
            self.logged[name] = self.logged.get(name, 0.0) + value

        return SampleContext(step=step, tokenizer=self.tokenizer, policy=self, _log=log, _plugin="env",
                             rollout_columns=dict(columns or {}), group_size=group_size)


class PaddedCharTokenizer(CharTokenizer):
    """:class:`CharTokenizer` with a pad token (``0``), for measuring loops that batch contexts left-padded."""

    pad_token_id = 0


class ScriptedModel:
    """A causal LM for measuring loops (``model.generate`` on left-padded batches, as :mod:`stackrl.blocks.env.imitation`
    calls it): writes ``reply(context text)`` and the end-of-sequence token after each context, one character a token,
    and keeps the contexts it was given (pads dropped) in ``seen``."""

    training = False

    def __init__(self, reply):
        self.reply, self.seen = reply, []

    def eval(self):
        pass

    def train(self, mode=True):
        pass

    def generate(self, input_ids, attention_mask, max_new_tokens, eos_token_id, pad_token_id, **sampling):
        import torch

        rows = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            context = [t for t, m in zip(ids, mask) if m]
            self.seen.append(PaddedCharTokenizer().decode(context))
            new = [ord(c) for c in self.reply(self.seen[-1])] + [eos_token_id]
            rows.append(ids + (new + [pad_token_id] * max_new_tokens)[:max_new_tokens])
        return torch.tensor(rows)
