"""The loop compiler: a scan body becomes a LoopProgram (ir.py), the passes (passes.py) move
work out of the per-step loop, the code generator (../codegen.py) prints the result as
Python, and the program interpreter (interp.py) runs any stage of it for the tests.
"""

from .ir import LoopProgram, Section, format_loop, verify
from .passes import PASSES, compile_program, stages

__all__ = ["PASSES", "LoopProgram", "Section", "compile_program", "format_loop", "stages",
           "verify"]
