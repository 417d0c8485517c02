"""SSR for stackrl: the policy scores its own translations from 0 to 100, without references."""

from stackrl_ssr.plugin import SSR, SSRConfig

__all__ = ["SSR", "SSRConfig"]
