"""`scanlib.typing`: jax.typing's names for annotations, so that a ported program's
`def f(x: jax.typing.ArrayLike)` runs: ArrayLike (a Tensor, array, number or nested list) and
DTypeLike (a dtype as NumPy takes it).

>>> import scanlib as sl
>>> def double(x: sl.typing.ArrayLike, dtype: sl.typing.DTypeLike = None):
...     return 2 * sl.asarray(x, dtype=dtype)
>>> double([1.0, 2.0], "float32")
tensor([2., 4.], dtype=float32)

Imports tape.types.
"""

from .tape.types import ArrayLike, DTypeLike

__all__ = ["ArrayLike", "DTypeLike"]
