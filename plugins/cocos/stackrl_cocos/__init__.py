"""The stackrl plugin `cocos`."""

from stackrl_cocos.plugin import Cocos, CocosConfig

__all__ = ["Cocos", "CocosConfig"]
