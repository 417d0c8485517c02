"""Role Anchor ("Do Modules Stay in Their Lane? Role Drift in Compound LLM Systems", arXiv 2607.21627)."""

from stackrl_roleanchor.anchor import anchor_distance, centred_utility
from stackrl_roleanchor.config import RoleanchorConfig
from stackrl_roleanchor.plugin import Roleanchor, anchor_loss, neutral_prompts, role_anchor

__all__ = ["Roleanchor", "RoleanchorConfig", "anchor_distance", "anchor_loss", "centred_utility", "neutral_prompts", "role_anchor"]
