"""The stackrl plugin `cscsql`: CSC-SQL's execution-grouped self-consistency and merge reviser."""

from stackrl_cscsql.consistency import Group, candidates, execution_groups, voted
from stackrl_cscsql.plugin import Cscsql, CscsqlConfig
from stackrl_cscsql.revision import reviser_prompt

__all__ = ["Cscsql", "CscsqlConfig", "Group", "candidates", "execution_groups", "reviser_prompt", "voted"]
