"""ReMix (arXiv 2507.06892): mix-policy GRPO, each group part fresh and part replayed from recent batches."""

from stackrl_remix.plugin import Remix, RemixConfig

__all__ = ["Remix", "RemixConfig"]
