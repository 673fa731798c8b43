"""scan: a JAX-style scan primitive whose VJP is a reversed scan.

api.py (checks, tracing, `scan`) -> primitive.py (the tape primitive and its VJP) ->
linearize.py (backward body; residuals.py, what it saves) and executor.py (runs the
compiled loop: the loop compiler in loop/ turns the body into a LoopProgram, its passes say
where each equation runs and where each value lives, and loop/emit.py prints it as Python);
interpret.py is the reference interpreter (`scan(..., interpret=True)`); cache.py reuses all
of it across calls, and plan.py prints it. loop/native.py is a second printer of the same
programs, the step loop as a numba kernel (`compiler="numba"`).
"""

from .api import scan, set_loop_compiler
from .executor import NumbaFallbackWarning
from .plan import ScanPlan, scan_plan

__all__ = ["scan", "scan_plan", "ScanPlan", "set_loop_compiler", "NumbaFallbackWarning"]
