"""jax.experimental's names that research code imports: `ode.odeint`.

Imports its modules.
"""

from . import ode

__all__ = ["ode"]
