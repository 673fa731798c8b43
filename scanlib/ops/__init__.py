"""Ops: primitives with their VJPs (elementwise, structural, linalg), the public functions
built on them, and Tensor's operators and NumPy protocols.

Imports backends and tape. Installs the four ops the tape needs into tape.backward.
"""

from ..tape import backward as _backward
from . import (arrays, assembly, elementwise, functions, gathers, indices, mathfuncs, matrices,
               methods, named, nanfunctions, nn, polynomials, predicates, reductions, setops,
               signal, special, statistics, vectors, editing)
from .arrays import *  # noqa: F403
from .functions import *  # noqa: F403
from .gathers import *  # noqa: F403
from .matrices import *  # noqa: F403
from .named import *  # noqa: F403
from .nn import *  # noqa: F403
from .reductions import *  # noqa: F403
from .special import *  # noqa: F403
from .statistics import *  # noqa: F403
from .nanfunctions import *  # noqa: F403
from .mathfuncs import *  # noqa: F403
from .assembly import *  # noqa: F403
from .indices import *  # noqa: F403
from .predicates import *  # noqa: F403
from .signal import *  # noqa: F403
from .setops import *  # noqa: F403
from .polynomials import *  # noqa: F403
from .vectors import *  # noqa: F403
from .editing import *  # noqa: F403
from .primitive import Primitive, bind

methods.install()
_backward.OPS.add = elementwise.add
_backward.OPS.sum_to = functions.sum_to
_backward.OPS.astype = lambda g, dtype: elementwise.astype(g, dtype=dtype)
_backward.OPS.real = elementwise.real
_backward.OPS.stop_gradient = elementwise.stop_gradient

# The public ops, module by module (decompositions are public as scanlib.linalg).
PUBLIC_MODULES = (functions, special, nn, arrays, reductions, gathers, matrices, named,
                  statistics, nanfunctions, mathfuncs, assembly, indices, predicates,
                  signal, setops, polynomials, vectors, editing)
__all__ = ["Primitive", "bind", "elementwise",
           *[name for module in PUBLIC_MODULES for name in module.__all__]]
