"""The stackrl plugin `saas`."""

from stackrl_saas.plugin import Saas, SaasConfig

__all__ = ["Saas", "SaasConfig"]
