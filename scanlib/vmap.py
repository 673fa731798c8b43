"""`vmap(f, in_axes, out_axes)`: JAX's vectorising map (being written; see issue 12).

Imports backends, tape, ops, pytree, tracing and scan.
"""

from __future__ import annotations

__all__ = ["vmap"]


def vmap(f, in_axes=0, out_axes=0):
    """Vectorise f over a batch axis, like `jax.vmap` (not implemented yet).

    >>> import scanlib as sl
    """
    raise NotImplementedError("vmap is not implemented yet")
