"""SSRL: the policy searches its own knowledge in one pass (think, search, the information it writes itself, answer),
trained by GRPO on a format reward and the exact match of its answer, with the information it wrote kept out of
the policy loss."""

from __future__ import annotations

from dataclasses import dataclass

import stackrl
from stackrl.answers import equivalent
from stackrl.plugin import training_only
from stackrl.rewards import reference_answers
from stackrl_ssrl.masking import information_mask
from stackrl_ssrl.rules import combined, exact_match, final_answer, format_score

# Ours (the authors' prompts live in their dataset, not their code): the self-search instructions before a question.
SELF_SEARCH_TEMPLATE = (
    "Answer the question below. First reason inside <think> and </think>. Whenever you lack a fact, write a "
    "search query on one line inside <search> and </search>, then write what a search engine would return for it "
    "inside <information> and </information>, and reason again inside <think> and </think>. Search as often as you "
    "need. Give the final answer, a few words without explanation, inside <answer> and </answer>.\n"
    "Question: {prompt}\n"
)
MATCHES = ("em", "equivalent")


@dataclass
class SSRLConfig:
    # The instructions each prompt is put in ({prompt}: the question); "{prompt}" leaves the prompts as they are.
    template: str = SELF_SEARCH_TEMPLATE
    # The reward (its component `ssrl`): outcome_weight * the answer's match + format_weight * the format score,
    # the authors' 0.9 and 0.1. With outcome_weight 0 the component is the format term alone, for a run whose
    # outcome reward is another component.
    outcome_weight: float = 0.9
    format_weight: float = 0.1
    # The format score: thinks / max_turn, capped at 1; 0 above upper_bound thinks (the authors' 2 and 8).
    max_turn: int = 2
    upper_bound: int = 8
    # How the last <answer> is compared with the reference: "em", SQuAD-normalised equality (the authors'), or
    # "equivalent", the host's normalisation and math equivalence (numbers: "em" drops a minus sign).
    match: str = "em"
    # The dataset column of the reference answers (a string, or a list of accepted answers).
    answer_column: str = "answer"
    # Keep the <information>...</information> blocks the policy writes out of the policy loss (the authors' runs
    # set enable_information_loss_mask).
    mask_information: bool = True
    # Mask blocks that span lines too (ours); false: only blocks on one line, as the authors' pattern finds them.
    mask_across_lines: bool = True

    def __post_init__(self):
        if "{prompt}" not in self.template:
            raise stackrl.ConfigError("ssrl.template: must contain {prompt}")
        for key in ("outcome_weight", "format_weight"):
            if getattr(self, key) < 0:
                raise stackrl.ConfigError(f"ssrl.{key}: must be non-negative, not {getattr(self, key)}")
        if self.outcome_weight == 0 and self.format_weight == 0:
            raise stackrl.ConfigError("ssrl.format_weight: outcome_weight and format_weight are both 0; the reward "
                                      "would be 0 everywhere")
        if self.max_turn < 1:
            raise stackrl.ConfigError(f"ssrl.max_turn: must be at least 1, not {self.max_turn}")
        if self.upper_bound < self.max_turn:
            raise stackrl.ConfigError(f"ssrl.upper_bound: must be at least max_turn ({self.max_turn}), "
                                      f"not {self.upper_bound}")
        if self.match not in MATCHES:
            raise stackrl.ConfigError(f"ssrl.match: must be one of {', '.join(MATCHES)}, not '{self.match}'")


class SSRL(stackrl.Plugin):
    """Self-Search RL: prompts in the self-search format, one sampled pass per row with its information blocks
    masked from the loss, and the reward 0.9 * exact match + 0.1 * format."""

    Config = SSRLConfig
    activity = "completions were well-formed self-searches (format score above 0)"

    def check_run(self, run):
        if self.config.outcome_weight > 0:
            run.need_column("ssrl.answer_column", self.config.answer_column, "the outcome term compares answers with it")
        if self.config.template != "{prompt}":
            run.check_template(self, "template")

    @stackrl.hookimpl
    def transform_prompts(self, prompts, ctx):
        if self.config.template == "{prompt}":
            return None
        return [self.framed(p) for p in prompts]

    def framed(self, prompt):
        """The prompt in the template: a text prompt whole, a chat prompt's last user message."""
        if isinstance(prompt, str):
            return self.config.template.format(prompt=prompt)
        messages = [dict(m) for m in prompt]
        last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        messages[last]["content"] = self.config.template.format(prompt=messages[last]["content"])
        return messages

    @stackrl.hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        if not self.config.mask_information:
            return None
        samples = ctx.generate(prompts)
        completions = [list(s.completion_ids) for s in samples]
        masks = [information_mask(ctx.tokenizer, ids, self.config.mask_across_lines) for ids in completions]
        tokens = sum(len(m) for m in masks)
        ctx.log("masked_tokens", (tokens - sum(map(sum, masks))) / max(1, tokens))
        ctx.log("masked_rows", sum(0 in m for m in masks) / max(1, len(masks)))
        return stackrl.Samples(completion_ids=completions, loss_mask=masks)

    @stackrl.hookimpl
    def reward(self, ctx):
        rollout, c = ctx.rollout, self.config
        forms = [format_score(t, c.max_turn, c.upper_bound) for t in rollout.completions]
        if c.outcome_weight > 0:
            references = reference_answers(rollout.columns, c.answer_column, plugin="ssrl",
                                           purpose="score the answers")
            outcomes = [None if ref is None else self.outcome(final_answer(t), ref)
                        for t, ref in zip(rollout.completions, references)]
        else:
            outcomes = [0.0] * len(forms)
        ctx.log("format", sum(forms) / max(1, len(forms)))
        scored = [o for o in outcomes if o is not None]
        if scored and c.outcome_weight > 0:
            ctx.log("outcome", sum(scored) / len(scored))
        ctx.acted(sum(f > 0 for f in forms), of=len(forms),
                  hint="no completion has the <think>...</think> ... <answer>...</answer> form; the policy must be "
                       "prompted with ssrl.template and able to follow it (the built-in models are not)")
        return [None if o is None else combined(o, f, c.outcome_weight, c.format_weight)
                for o, f in zip(outcomes, forms)]

    def outcome(self, answer: str | None, reference) -> float:
        if self.config.match == "em" or answer is None:
            return exact_match(answer, reference)
        references = [reference] if isinstance(reference, str) else list(reference)
        return float(any(equivalent(answer, str(r)) for r in references))
