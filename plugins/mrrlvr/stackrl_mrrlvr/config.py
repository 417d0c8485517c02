"""MR-RLVR's settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from stackrl import ConfigError
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE

from stackrl_mrrlvr.tasks import TASKS


@dataclass
class MrrlvrConfig:
    # The step after which stage 2 begins: the pool switches from the process tasks back to the problems, and the
    # process reward's weight becomes 0 (its default schedule {0: 1.0, switch_step: 0.0}).
    switch_step: int = 40
    tasks: list = field(default_factory=lambda: list(TASKS))  # the process tasks built from each solution
    # How a task shows the altered solution, formatted with {solution} (masked or shuffled) and {prompt} (the
    # row's prompt; in a chat run, its last user message). The default is the built-in task's reference layout,
    # which the built-in model reads; configs/recipes/mrrlvr.yaml has an instruction for a chat model.
    fill_template: str = REFERENCE_TEMPLATE
    reorder_template: str = REFERENCE_TEMPLATE
    mask: str = "[MASK]"  # what stands in for the masked result
    solution_column: str = "solution"  # the worked solutions the tasks are built from
    answer_column: str = "answer"  # left off the process rows: stage 1 is self-supervised
    seed: int = 0  # which step each fill masks and how each reorder shuffles

    def __post_init__(self):
        if self.switch_step < 1:
            raise ConfigError(f"mrrlvr.switch_step: stage 1 needs at least one step, not {self.switch_step}")
        unknown = [t for t in self.tasks if t not in TASKS]
        if not self.tasks or unknown:
            raise ConfigError(
                f"mrrlvr.tasks: a non-empty list of {', '.join(TASKS)}; got {list(self.tasks)}"
            )
        for key in ("fill_template", "reorder_template"):
            template = getattr(self, key)
            if "{solution}" not in template or "{prompt}" not in template:
                raise ConfigError(f"mrrlvr.{key}: must contain {{solution}} and {{prompt}}, got {template!r}")
            try:
                template.format(solution="", prompt="")
            except (KeyError, IndexError, ValueError):
                raise ConfigError(
                    f"mrrlvr.{key}: only {{solution}} and {{prompt}} may stand in braces (write {{{{ for a brace), "
                    f"got {template!r}"
                ) from None
        if not self.mask.strip():
            raise ConfigError("mrrlvr.mask: must be visible text, not empty")
