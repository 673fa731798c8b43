"""scanlib.nn.initializers: jax.nn.initializers' names. Each factory returns
`init(key, shape, dtype=float64)`, drawing from scanlib.random exactly as JAX's draws from
jax.random (so the same key gives JAX's numbers, to the precision docs/random.md gives for
the draw). Imports tape, ops and random.
"""

from __future__ import annotations

import math

import numpy as np

from .. import random
from ..ops import full, moveaxis, ones as _ones, zeros as _zeros
from ..tape import Tensor

__all__ = [
    "zeros", "ones", "constant", "uniform", "normal", "truncated_normal", "variance_scaling",
    "glorot_uniform", "glorot_normal", "xavier_uniform", "xavier_normal", "lecun_uniform",
    "lecun_normal", "he_uniform", "he_normal", "kaiming_uniform", "kaiming_normal",
    "orthogonal",
]


def _dtype(dtype):
    return np.dtype(np.float64 if dtype is None else dtype)


def _device(key):
    """Where the weights go: the key's device (weights drawn from a key live there too)."""
    return key.device if isinstance(key, Tensor) else None


def zeros(key, shape, dtype=None) -> Tensor:
    """Zeros of shape on the key's device (its values unused), as
    jax.nn.initializers.zeros.

    >>> b = sl.nn.initializers.zeros(sl.random.key(0), (3,))
    """
    return _zeros(tuple(shape), _dtype(dtype), device=_device(key))


def ones(key, shape, dtype=None) -> Tensor:
    """Ones of shape on the key's device (its values unused), as jax.nn.initializers.ones.

    >>> s = sl.nn.initializers.ones(sl.random.key(0), (3,))
    """
    return _ones(tuple(shape), _dtype(dtype), device=_device(key))


def constant(value, dtype=None):
    """An initializer filling with value (on the key's device), as
    jax.nn.initializers.constant.

    >>> b = sl.nn.initializers.constant(0.1)(sl.random.key(0), (3,))
    """
    def init(key, shape, dtype=dtype) -> Tensor:
        return full(tuple(shape), value, dtype=_dtype(dtype), device=_device(key))

    return init


def uniform(scale=1e-2, dtype=None):
    """An initializer drawing uniformly from [0, scale), as jax.nn.initializers.uniform.

    >>> w = sl.nn.initializers.uniform(0.1)(sl.random.key(0), (2, 3))
    """
    def init(key, shape, dtype=dtype) -> Tensor:
        dtype = _dtype(dtype)
        return random.uniform(key, shape, dtype) * float(dtype.type(scale))

    return init


def normal(stddev=1e-2, dtype=None):
    """An initializer drawing normals with standard deviation stddev, as
    jax.nn.initializers.normal.

    >>> w = sl.nn.initializers.normal(0.1)(sl.random.key(0), (2, 3))
    """
    def init(key, shape, dtype=dtype) -> Tensor:
        dtype = _dtype(dtype)
        return random.normal(key, shape, dtype) * float(dtype.type(stddev))

    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """An initializer drawing normals truncated to [lower, upper], times stddev, as
    jax.nn.initializers.truncated_normal.

    >>> w = sl.nn.initializers.truncated_normal(0.1)(sl.random.key(0), (2, 3))
    """
    def init(key, shape, dtype=dtype) -> Tensor:
        dtype = _dtype(dtype)
        draws = random.truncated_normal(key, lower, upper, shape, dtype)
        return draws * float(dtype.type(stddev))

    return init


def _fans(shape, in_axis, out_axis, batch_axis):
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"variance_scaling: cannot tell the input and output sizes of a "
                         f"{len(shape)}-dimensional weight with the default in_axis; use a "
                         "shape of at least 2 dimensions or pass in_axis")

    def size(axes):
        return shape[axes] if isinstance(axes, int) else math.prod(shape[a] for a in axes)

    receptive = math.prod(shape) / size(in_axis) / size(out_axis) / size(batch_axis)
    return size(in_axis) * receptive, size(out_axis) * receptive


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    """An initializer with variance scale / n, n the fan-in, fan-out, their mean
    ('fan_avg') or geometric mean ('fan_geo_avg'), drawn from a truncated normal (rescaled
    to that variance), a normal or a uniform, as jax.nn.initializers.variance_scaling.

    >>> w = sl.nn.initializers.variance_scaling(2.0, "fan_in", "normal")(
    ...     sl.random.key(0), (4, 3))
    """
    modes = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
    if mode not in modes:
        raise ValueError(f"variance_scaling: mode must be one of {modes}, got {mode!r}")
    distributions = ("truncated_normal", "normal", "uniform")
    if distribution not in distributions:
        raise ValueError(f"variance_scaling: distribution must be one of {distributions}, "
                         f"got {distribution!r}")

    def init(key, shape, dtype=dtype) -> Tensor:
        shape, dtype = tuple(shape), _dtype(dtype)
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
             "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
        variance = dtype.type(scale / n)
        if distribution == "truncated_normal":
            stddev = np.sqrt(variance) / dtype.type(0.8796256610342398)
            return random.truncated_normal(key, -2, 2, shape, dtype) * float(stddev)
        if distribution == "normal":
            return random.normal(key, shape, dtype) * float(np.sqrt(variance))
        return random.uniform(key, shape, dtype, -1.0) * float(
            np.sqrt(dtype.type(3) * variance))

    return init


def _preset(scale, mode, distribution, name):
    def factory(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis, out_axis, batch_axis,
                                dtype)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = (f"variance_scaling({scale}, {mode!r}, {distribution!r}), as "
                       f"jax.nn.initializers.{name}.\n\n    >>> w = sl.nn.initializers."
                       f"{name}()(sl.random.key(0), (4, 3))\n    ")
    return factory


glorot_uniform = xavier_uniform = _preset(1.0, "fan_avg", "uniform", "glorot_uniform")
glorot_normal = xavier_normal = _preset(1.0, "fan_avg", "truncated_normal", "glorot_normal")
lecun_uniform = _preset(1.0, "fan_in", "uniform", "lecun_uniform")
lecun_normal = _preset(1.0, "fan_in", "truncated_normal", "lecun_normal")
he_uniform = kaiming_uniform = _preset(2.0, "fan_in", "uniform", "he_uniform")
he_normal = kaiming_normal = _preset(2.0, "fan_in", "truncated_normal", "he_normal")


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer of (semi-)orthogonal matrices: the columns (along column_axis) of the
    flattened weight orthonormal, times scale, as jax.nn.initializers.orthogonal.

    >>> w = sl.nn.initializers.orthogonal()(sl.random.key(0), (4, 4))
    """
    def init(key, shape, dtype=dtype) -> Tensor:
        shape, dtype = tuple(shape), _dtype(dtype)
        if len(shape) < 2:
            raise ValueError(f"orthogonal: the initializer needs a shape of at least 2 "
                             f"dimensions, got {shape}")
        if 0 in shape:
            return _zeros(shape, dtype, device=_device(key))
        n_cols = shape[column_axis]
        n_rows = math.prod(shape) // n_cols
        q = random.orthogonal(key, n_rows, (), dtype, n_cols)
        q = q.reshape(tuple(np.delete(shape, column_axis)) + (n_cols,))
        return moveaxis(q, -1, column_axis) * float(dtype.type(scale))

    return init
