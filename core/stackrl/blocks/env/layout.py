"""The runner's token layout, as one function a pretraining script calls too.

A row of an episode is one seat's view: the prompt (the dataset's prompt, then the seat's first observation in the
observation template), and a completion of the seat's actions (trained) with each later observation between them
(injected: attended to, never trained). An action's end-of-sequence token is held back while an observation follows
it (:class:`stackrl.blocks.turns.Trajectory`), so the completion holds one end-of-sequence token at most, at its end,
and TRL's padding and completion mask stay right where pad is eos. An observation longer than the configured limit
is cut to its first tokens.

A script that teaches a model to play (imitating random legal moves) lays its episodes out with
:func:`episode_layout`, or plays them through the runner itself with a scripted policy (rows exactly as training
will see them), and trains each action after the exact tokens before it with :func:`turn_examples`, the action
followed by its end-of-sequence token: what the runner's ``ctx.generate`` continues and stops on.
"""

from __future__ import annotations

from collections.abc import Sequence

from stackrl.blocks.turns import Segment, Trajectory

ACTION = "action"  # the kind of the runner's generated segments


def tokens(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def observation_ids(tokenizer, template: str, observation: str, limit: int | None) -> tuple[list[int], bool]:
    """The tokens that show an observation (``template`` around its first ``limit`` tokens) and whether it was cut."""
    prefix, _, suffix = template.partition("{observation}")
    ids = tokens(tokenizer, observation)
    cut = limit is not None and len(ids) > limit
    return tokens(tokenizer, prefix) + (ids[:limit] if cut else ids) + tokens(tokenizer, suffix), cut


def shown_observation(tokenizer, template: str, observation: str, limit: int | None) -> tuple[str, bool]:
    """The first observation as text in the prompt: the template around it, cut as :func:`observation_ids` cuts."""
    ids = tokens(tokenizer, observation)
    cut = limit is not None and len(ids) > limit
    text = tokenizer.decode(ids[:limit]) if cut else observation
    return template.replace("{observation}", text), cut


def with_observation(prompt, shown: str):
    """The prompt followed by the first observation: after its text, or at the end of its last chat message."""
    if isinstance(prompt, str):
        return prompt + shown
    return [*prompt[:-1], {**prompt[-1], "content": prompt[-1]["content"] + shown}]


def episode_layout(
    tokenizer, prompt_ids: Sequence[int], turns: Sequence[tuple[str, str | None]], eos_token_id: int,
    *, template: str = "\n{observation}\n", limit: int | None = None,
) -> Trajectory:
    """One seat's row of an episode: ``turns`` are its actions, each with the observation it saw next (``None``
    after its last), laid out as the runner lays them out."""
    trajectory = Trajectory(prompt_ids)
    for action, observation in turns:
        trajectory.add(ACTION, tokens(tokenizer, action) + [eos_token_id], action, [eos_token_id])
        if observation is not None:
            trajectory.inject(observation_ids(tokenizer, template, observation, limit)[0])
    return trajectory


def turn_examples(
    prompt_ids: Sequence[int], completion_ids: Sequence[int], segments: Sequence[Segment], eos_token_id: int
) -> list[tuple[list[int], list[int]]]:
    """(context, action and end-of-sequence) token pairs, one per action of a row, for imitation training: a
    rollout row's (its prompt ids, completion ids and ``segments`` column) or ``episode_layout(...).packed()``'s."""
    pairs = []
    for segment in segments:
        action = list(completion_ids[segment.start : segment.end])
        if not action or action[-1] != eos_token_id:
            action.append(eos_token_id)
        pairs.append((list(prompt_ids) + list(completion_ids[: segment.start]), action))
    return pairs
