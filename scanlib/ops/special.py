"""(being written)

Imports backends, tape and the ops below it.
"""

from __future__ import annotations

__all__: list[str] = []

# NumPy functions (np.f called on a Tensor, NEP 18) and ufuncs that run these ops; each
# callable takes NumPy's parameter names (numpy_interop refuses other keywords).
NUMPY_FUNCTIONS: dict = {}
NUMPY_UFUNCS: dict = {}
