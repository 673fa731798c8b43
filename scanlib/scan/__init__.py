"""scan: a JAX-style scan primitive whose VJP is a reversed scan.

api.py (checks, tracing, `scan`) -> primitive.py (the tape primitive and its VJP) ->
linearize.py (backward body, residual policies) and executor.py (the compiled loop) ->
batching.py (hoisting carry-independent work out of the loop); plan.py prints all of it.
"""

from .api import scan
from .plan import ScanPlan, scan_plan

__all__ = ["scan", "scan_plan", "ScanPlan"]
