"""The loop compiler: a scan body becomes a LoopProgram (ir.py); the passes (passes.py, the
memory plan in memory.py) move work out of the per-step loop and place every value; emit.py
prints the result as Python; interp.py runs any stage of it for the tests. batch.py looks up
the primitives' batching rules. docs/internals.md walks through it with an example.
"""

from .ir import LoopProgram, Section, format_loop, verify
from .passes import PASSES, compile_program, stages

__all__ = ["PASSES", "LoopProgram", "Section", "compile_program", "format_loop", "stages",
           "verify"]
