"""HeRL: a failed response and its unmet rubric items become in-context guidance for a regeneration, which takes a
row of its group; the response earns a bonus for how much the guidance improved on it.

Per group whose samples all fall short (none scores 1 by ``metric``): its equally scored responses (all of them,
with a 0/1 metric), most rubric items met first, up to ``candidates``, are each checked against the rubric
(``stackrl_herl.rubric``) and regenerated once from the guidance (the question, the response, its check). Each
such response earns ``alpha * (guided score - own score)`` as this plugin's reward component. Up to ``replace``
guided regenerations (better than the group's best first) take the group's last rows, trained on the guidance they
were written after, their policy gradient weighted as the authors' off-policy rows are.
"""

from __future__ import annotations

import stackrl
from stackrl import Samples
from stackrl.blocks.roles import text_prompt
from stackrl.plugin import training_only
from stackrl.rewards import reference_answers
from stackrl_herl.bonus import chosen, guided_weight, improvement_bonus
from stackrl_herl.config import HerlConfig
from stackrl_herl.rubric import check_of, guidance, met_items

GUIDED = "herl_guided"  # column: whether the row is a guided regeneration put in place of a sample
CHECK = "herl_check"  # column: on each regenerated response, its rubric check (None elsewhere)
GUIDED_REPLY = "herl_guided_reply"  # column: on each regenerated response, its guided regeneration's text
BONUS = "herl_bonus"  # column: on each regenerated response, its improvement bonus (None elsewhere)


class Herl(stackrl.Plugin):
    Config = HerlConfig
    activity = "groups fell short and got guided regenerations of their responses"

    def check_run(self, run):
        run.need_column("herl.answer_column", self.config.answer_column, "by which samples and regenerations are scored")
        run.need_plain_text("herl.guidance_template", "the guidance extends the question as plain text")
        if self.config.replace >= run.group_size:
            raise stackrl.ConfigError(f"herl.replace: fewer than the group size (trainer.num_generations="
                                      f"{run.group_size}), so a group keeps a sample of its own; not {self.config.replace}")
        run.check_template(self, "guidance_template")

    def score(self, text: str, answer) -> float:
        return float(self.config.is_correct(text, answer))

    def regenerated(self, prompts, samples, scores, ctx) -> dict[int, list[tuple[int, str, object]]]:
        """Per group that fell short (``scores``: each sample's, ``None`` without an answer): ``[(row, check,
        guided Generation), ...]`` for its candidates, regenerated in one ``ctx.generate`` call."""
        size = ctx.group_size
        jobs = []  # (group, row, check, guidance prompt)
        unchecked = 0
        for group in range(len(samples) // size):
            rows = range(group * size, (group + 1) * size)
            if scores[rows[0]] is None:  # no answer: nothing to fall short of
                continue
            best = max(scores[i] for i in rows)
            if best >= 1.0:
                continue
            checked = [(i, check_of(samples[i].text, self.config.rubric)) for i in rows if scores[i] == best]
            unchecked += sum(check is None for _, check in checked)
            checked = sorted([(i, c) for i, c in checked if c is not None], key=lambda pair: -met_items(pair[1]))
            question = text_prompt(prompts[group * size], role="herl guidance")
            jobs += [(group, i, check, guidance(question, samples[i].text, check, self.config.guidance_template))
                     for i, check in checked[: self.config.candidates]]
        if unchecked:
            ctx.warn("unchecked_responses", unchecked)
        replies = ctx.generate([job[3] for job in jobs], temperature=self.config.temperature)
        out: dict[int, list] = {}
        for (group, row, check, _), reply in zip(jobs, replies):
            out.setdefault(group, []).append((row, check, reply))
        return out

    @stackrl.hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        samples = ctx.generate(prompts)
        answers = reference_answers(ctx.rollout_columns, self.config.answer_column, plugin=self.name,
                                    purpose="score samples and guided regenerations by")
        size, groups = ctx.group_size, len(prompts) // ctx.group_size
        completion_ids = [list(s.completion_ids) for s in samples]
        prompt_ids = [list(s.prompt_ids) for s in samples]
        guided, checks, replies = [False] * len(samples), [None] * len(samples), [None] * len(samples)
        # A row without an answer is not scored; the others earn 0 unless their response was regenerated.
        bonuses = [None if answer is None else 0.0 for answer in answers]
        scores = [None if answer is None else self.score(s.text, answer) for s, answer in zip(samples, answers)]
        regenerated = self.regenerated(prompts, samples, scores, ctx)
        right = []
        for group, jobs in regenerated.items():
            answer = answers[group * size]
            guided_scores = [self.score(reply.text, answer) for _, _, reply in jobs]
            right += guided_scores
            for (row, check, reply), score in zip(jobs, guided_scores):
                checks[row], replies[row] = check, reply.text
                bonuses[row] = improvement_bonus(scores[row], score, self.config.alpha)
            best = max(scores[group * size : (group + 1) * size])
            # The chosen regenerations take the group's last rows; a row taken loses its own bonus, as in the
            # authors' trainer, where the row replaced (drawn at random there) keeps none of its reward.
            for slot, k in enumerate(chosen(guided_scores, best, self.config.replace)):
                row = (group + 1) * size - 1 - slot
                reply = jobs[k][2]
                completion_ids[row] = list(reply.completion_ids)
                if self.config.train_on == "guided":
                    prompt_ids[row] = list(reply.prompt_ids)
                guided[row], checks[row], replies[row], bonuses[row] = True, None, None, 0.0
        ctx.log("guided_groups", len(regenerated) / max(1, groups))
        if right:
            ctx.log("guided_right", sum(right) / len(right))
        ctx.log("guided_rows", sum(guided) / len(samples))
        ctx.acted(len(regenerated), of=groups,
                  hint="every group had a sample scoring 1 by herl.metric, or no response of a failed group could be "
                       "checked by herl.rubric")
        return Samples(completion_ids=completion_ids, prompt_ids=prompt_ids,
                       columns={GUIDED: guided, CHECK: checks, GUIDED_REPLY: replies, BONUS: bonuses})

    @stackrl.hookimpl
    def reward(self, ctx):
        bonuses = ctx.rollout.columns.get(BONUS)
        if bonuses is None:  # evaluation: nothing regenerated
            return [None] * len(ctx.rollout)
        return list(bonuses)

    @stackrl.hookimpl
    def reshape_advantages(self, advantages, ctx):
        guided = ctx.rollout.columns.get(GUIDED)
        if guided is None:
            if ctx.training:  # another plugin generated the rollout (exclusive.generate_rollout): nothing guided
                ctx.acted(0, of=len(ctx.rollout) // ctx.rollout.group_size,
                          hint="another plugin generates the rollout (exclusive.generate_rollout)")
            return None
        weight = guided_weight(self.config.gamma)
        if not any(guided) or weight == 1.0:
            return None
        scale = advantages.new_tensor([weight if g else 1.0 for g in guided])
        return advantages * (scale if advantages.dim() == 1 else scale[:, None])
