"""scanlib.numpy.linalg: jax.numpy.linalg's names that scanlib has, as views onto
scanlib.linalg's functions (`jnp.linalg.solve is sl.linalg.solve`) and matmul and tensordot.
jax.scipy.linalg's solve_triangular and cho_solve are not jax.numpy.linalg's, so they are not
here. Imports ops and linalg.
"""

from ..ops import matmul, tensordot
from ..linalg import cholesky, det, eigh, inv, matrix_power, norm, qr, slogdet, solve

__all__ = ["cholesky", "det", "eigh", "inv", "matmul", "matrix_power", "norm", "qr", "slogdet",
           "solve", "tensordot"]
