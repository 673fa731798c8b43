"""scanlib: differentiable recurrences without torch or JAX.

A define-by-run Tensor and tape autograd engine over NumPy (CPU) and CuPy (GPU), and on it a
JAX-style `scan` whose VJP is itself a scan. Layers import one way:
backends <- tape <- ops <- (tracing, autodiff, linalg, random, optim) <- scan <-
(transforms, jit, ...) <- this public API.
"""

from . import checkpoint_policies, linalg, optim, random, testing
from .autodiff import grad, value_and_grad, vjp
from .remat import checkpoint, checkpoint_name, remat
from .backends import cuda_available
from .ops import *  # noqa: F403
from .ops import __all__ as _ops_all
from .autodiff import stop_gradient  # noqa: F401 - of a pytree (ops' takes one tensor)
from .tape import Graph, Tensor, enable_grad, no_grad
from .scan import NumbaFallbackWarning, ScanPlan, scan, scan_plan, set_loop_compiler
from . import associative, control, transforms
from .associative import *  # noqa: F403
from .control import *  # noqa: F403
from .transforms import *  # noqa: F403
from .vmap import vmap
from .custom import custom_jvp, custom_vjp
from .closure import closure_convert
from .tracing import make_graph
from .jit import JitFallbackWarning, jit
from . import numpy  # noqa: F401 - scanlib.numpy, jax.numpy's names (not in __all__)
from . import lax  # jax.lax's names: `from scanlib import lax`
from . import (ad_checkpoint, custom_derivatives, debug, experimental, flatten_util, nn, scipy,
               tree, tree_util)
from . import typing
from .callbacks import pure_callback
from .runtime import *  # noqa: F403 - jax's top-level runtime names (config, Array, ...)
from . import runtime

__version__ = "0.1.0"

__all__ = [
    *[n for n in _ops_all if n not in ("Primitive", "bind", "elementwise", "sum_to", "getitem")],
    "Tensor", "Graph", "no_grad", "enable_grad", "grad", "value_and_grad", "vjp",
    "make_graph", "checkpoint", "remat", "checkpoint_name", "checkpoint_policies", "testing",
    "linalg", "random", "optim", "lax",
    "cuda_available", "scan", "scan_plan", "ScanPlan", "set_loop_compiler",
    "NumbaFallbackWarning", "JitFallbackWarning", "jit",
    *transforms.__all__, *associative.__all__, *control.__all__, "vmap",
    "custom_vjp", "custom_jvp", "closure_convert", "custom_derivatives", "ad_checkpoint",
    "tree_util", "tree",
    "flatten_util", "scipy", "debug", "nn", "experimental", "pure_callback",
    *runtime.__all__,
    "typing",
]
