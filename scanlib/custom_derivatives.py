"""scanlib.custom_derivatives: jax.custom_derivatives's names that scanlib has (custom_vjp,
custom_jvp, closure_convert), views onto scanlib's own objects, so that `from jax import
custom_derivatives` ports by its import alone.

Imports custom and closure."""

from .closure import closure_convert
from .custom import custom_jvp, custom_vjp

__all__ = ["custom_vjp", "custom_jvp", "closure_convert"]
