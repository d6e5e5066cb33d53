"""``jax.experimental.roofline``: flops, memory and interconnect traffic of a function,
counted from its jaxpr (see ``roofline.py``; the per-primitive rules are in
``rooflines.py``)."""
from jaxkit.experimental.roofline import rooflines  # noqa: F401  (registers the rules)
from jaxkit.experimental.roofline.roofline import (RooflineResult, RooflineRuleContext,
                                                   RooflineShape, register_roofline,
                                                   register_standard_roofline, roofline,
                                                   roofline_and_grad)

__all__ = ["RooflineResult", "RooflineRuleContext", "RooflineShape", "register_roofline",
           "register_standard_roofline", "roofline", "roofline_and_grad"]
