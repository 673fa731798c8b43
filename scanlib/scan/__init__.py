"""scan: a JAX-style scan primitive whose VJP is a reversed scan.

api.py (checks, tracing, `scan`) -> primitive.py (the tape primitive and its VJP) ->
linearize.py (backward body, residual policies) and executor.py (the compiled loop: its
schedule.py says where each equation runs, codegen.py writes it as Python, batching.py
runs carry-independent work for many steps at once); cache.py reuses all of it across calls,
and plan.py prints it.
"""

from .api import scan
from .plan import ScanPlan, scan_plan

__all__ = ["scan", "scan_plan", "ScanPlan"]
