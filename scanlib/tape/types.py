"""Names used in annotations: PyTree, ArrayLike, DTypeLike, Device, Axis, Shape. The
annotations that use them are strings (`from __future__ import annotations`), so modules import
this one only for type checkers. Imports nothing of scanlib at run time (tape.tensor for type
checkers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union

import numpy as np

if TYPE_CHECKING:
    from .tensor import Tensor

PyTree = Any
"""Nested tuples, lists, dicts and None, whose leaves are Tensors, arrays or numbers."""

ArrayLike = Union["Tensor", np.ndarray, np.generic, bool, int, float, complex, list, tuple]
"""What an op accepts as an input: a Tensor, a NumPy/CuPy array, a number or a nested list."""

DTypeLike = Any
"""A dtype as NumPy takes it: np.float32, "float32", np.dtype(...)."""

Device = str
"""'cpu' or 'cuda' (or 'cuda:N')."""

Axis = Union[int, Sequence[int], None]
"""An axis or several: an int, a tuple of ints, or None for all of them."""

Shape = Union[int, Sequence[int]]
"""A shape: a tuple of ints (an int for one axis)."""
