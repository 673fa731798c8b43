"""scanlib.ad_checkpoint: jax.ad_checkpoint's names that scanlib has (checkpoint, remat,
checkpoint_name, checkpoint_policies), views onto scanlib's own objects, so that
`from jax.ad_checkpoint import checkpoint_name` ports by its import alone.

Imports remat and checkpoint_policies."""

from . import checkpoint_policies
from .remat import checkpoint, checkpoint_name, remat

__all__ = ["checkpoint", "remat", "checkpoint_name", "checkpoint_policies"]
