"""Dr. Zero's HRPO settings (the config section `drzero:`)."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl import ConfigError

KEYS = ("column", "steps", "skeleton")


@dataclass
class DrzeroConfig:
    # What makes two questions "structurally similar", the cluster whose rows share one baseline. The authors
    # cluster by the number of hops the proposer was asked for, a tag written into each row's data_source when the
    # question was made. "column": the value of the data column `column` (the built-in task's `category`, its steps
    # and digits: the tag the task writes, as the hop count is the authors'); "steps": the number of operations of
    # the question (What is (3 + 4) * 2? has 2), the hop count's counterpart read from the question; "skeleton":
    # the question's operators in order (+ *).
    key: str = "column"
    column: str = "category"  # the data column read where key is "column"
    # Divide each centred reward by its cluster's standard deviation (Bessel-corrected, plus epsilon), as the
    # authors' estimator does by default (verl's norm_adv_by_std_in_grpo: true); false keeps the centred reward.
    scale_by_std: bool = True
    epsilon: float = 1.0e-6  # added to the cluster's standard deviation, the authors' value

    def __post_init__(self):
        if self.key not in KEYS:
            raise ConfigError(f"drzero.key: must be one of {', '.join(KEYS)}, not {self.key!r}")
        if self.key == "column" and not self.column:
            raise ConfigError("drzero.column: must name a data column where drzero.key is 'column'")
        if not self.epsilon > 0:
            raise ConfigError(f"drzero.epsilon: must be above 0, not {self.epsilon}")
