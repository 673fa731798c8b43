"""scanlib.numpy.fft (`jnp.fft`): jax.numpy.fft's functions with JAX's meanings, differentiable
in reverse and forward mode (JAX's rules) and batched under vmap; float32 data gives
complex64, float64 data complex128.

The transforms live in ops/fft.py. Imports ops.
"""

from ..ops.fft import (fft, fft2, fftfreq, fftn, fftshift, hfft, ifft, ifft2, ifftn, ifftshift,
                       ihfft, irfft, irfft2, irfftn, rfft, rfft2, rfftfreq, rfftn)

__all__ = ["fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifft2", "ifftn",
           "ifftshift", "ihfft", "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq",
           "rfftn"]
