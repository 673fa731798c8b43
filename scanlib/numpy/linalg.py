"""scanlib.numpy.linalg: jax.numpy.linalg's names that scanlib has, as views onto
scanlib.linalg's functions (`jnp.linalg.solve is sl.linalg.solve`) and matmul and tensordot.
jax.scipy.linalg's solve_triangular and cho_solve are not jax.numpy.linalg's, so they are not
here. Imports ops and linalg.
"""

from ..linalg import (cholesky, det, diagonal, eigh, eigvalsh, inv, matrix_power,
                      matrix_transpose, multi_dot, norm, outer, qr, slogdet, solve, trace)
from ..ops import matmul, tensordot

__all__ = ["cholesky", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_power",
           "matrix_transpose", "multi_dot", "norm", "outer", "qr", "slogdet", "solve", "tensordot",
           "trace"]
