"""scanlib.numpy.linalg: jax.numpy.linalg's names that scanlib has, as views onto
scanlib.linalg's functions (`jnp.linalg.solve is sl.linalg.solve`) and matmul and tensordot.
jax.scipy.linalg's solve_triangular and cho_solve are not jax.numpy.linalg's, so they are not
here. Imports ops and linalg.
"""

from ..linalg import (cholesky, cond, cross, det, diagonal, eig, eigh, eigvals, eigvalsh, inv,
                      lstsq, matrix_norm, matrix_power, matrix_rank, matrix_transpose, multi_dot,
                      norm, outer, pinv, qr, slogdet, solve, svd, svdvals, tensorinv, tensorsolve,
                      trace, vecdot, vector_norm)
from ..ops import matmul, tensordot

__all__ = ["cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh",
           "inv", "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank",
           "matrix_transpose", "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve",
           "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot",
           "vector_norm"]
