"""Ops: primitives with their VJPs (elementwise, structural, linalg), the public functions
built on them, and Tensor's operators and NumPy protocols.

Imports backends and tape. Installs the four ops the tape needs into tape.backward.
"""

from ..tape import backward as _backward
from . import elementwise, functions, methods
from .functions import *  # noqa: F403
from .functions import __all__ as _functions_all
from .primitive import Primitive, bind

methods.install()
_backward.OPS.add = elementwise.add
_backward.OPS.sum_to = functions.sum_to
_backward.OPS.astype = lambda g, dtype: elementwise.astype(g, dtype=dtype)
_backward.OPS.stop_gradient = elementwise.stop_gradient

__all__ = ["Primitive", "bind", "elementwise", *_functions_all]
