"""jax's runtime names a ported program calls at its top level: `config`, `Array`,
`block_until_ready`, `device_put`/`device_get`, `devices`, `default_backend`, `eval_shape` and
`ShapeDtypeStruct`, `make_jaxpr`, `disable_jit`, `named_scope`/`named_call`, `clear_caches`,
`enable_x64`, `jacobian`. Each does here what it does in JAX, or says why it cannot.

Imports backends, tape, ops, pytree, tracing, scan, jit and transforms.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, Callable, Iterator

import numpy as np

from . import backends, pytree
from .jit import disable_jit
from .ops import as_tensor
from .scan import cache as _scan_cache
from .tape import Tensor
from .tracing import abstract_leaf, make_graph, trace_function
from .transforms import jacrev

__all__ = ["Array", "config", "block_until_ready", "device_put", "device_get", "devices",
           "default_backend", "eval_shape", "ShapeDtypeStruct", "make_jaxpr", "disable_jit",
           "named_scope", "named_call", "clear_caches", "enable_x64", "jacobian",
           "device_count", "local_device_count", "process_count", "process_index"]

Array = Tensor  # jax.Array: the array type, for isinstance and annotations
jacobian = jacrev  # jax.jacobian is jax.jacrev


class _Config:
    """`jax.config`: `update(name, value)` and `read(name)` for the settings a program sets at
    its top. scanlib's answers are fixed where JAX's are switches: 64-bit types are always on
    (float64 is the default float), the platform is where the data lives. A setting scanlib
    does not have raises, rather than being ignored."""

    _FIXED = {"jax_enable_x64": True, "jax_platform_name": "cpu", "jax_platforms": "cpu",
              "jax_debug_nans": False, "jax_debug_infs": False, "jax_disable_jit": False}
    # Settings with no meaning for NumPy's computation: any value is accepted.
    _NO_EFFECT = {"jax_default_matmul_precision", "jax_log_compiles",
                  "jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
                  "jax_threefry_partitionable", "jax_default_prng_impl"}
    _WHY = {
        "jax_enable_x64": "scanlib computes in float64 by default and has no 32-bit default "
                          "mode; pass dtype=jnp.float32 where float32 is wanted",
        "jax_platform_name": "scanlib computes where the data lives: put it on the GPU with "
                             "sl.tensor(x, device='cuda') or jax.device_put(x, 'cuda')",
        "jax_debug_nans": "scanlib does not check results for NaN; use "
                          "np.errstate(invalid='raise') around eager code, or sl.debug.print",
        "jax_debug_infs": "scanlib does not check results for inf",
        "jax_disable_jit": "use `with jax.disable_jit():` around the calls",
    }
    _WHY["jax_platforms"] = _WHY["jax_platform_name"]

    def __init__(self):
        self._values = dict(self._FIXED)

    def update(self, name: str, value: Any) -> None:
        if name in self._NO_EFFECT:
            self._values[name] = value
            return
        if name not in self._FIXED:
            raise AttributeError(
                f"jax.config.update({name!r}, ...): scanlib has no such setting. It reads "
                f"{sorted(self._FIXED)}, and accepts {sorted(self._NO_EFFECT)} without effect.")
        fixed = self._FIXED[name]
        if value != fixed and not (name in ("jax_platform_name", "jax_platforms")
                                   and str(value).lower() in ("cpu", "")):
            raise ValueError(f"jax.config.update({name!r}, {value!r}): scanlib's is fixed at "
                             f"{fixed!r}: {self._WHY[name]}.")

    def read(self, name: str) -> Any:
        if name not in self._values:
            raise AttributeError(f"jax.config.read({name!r}): scanlib has no such setting")
        return self._values[name]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("jax_"):
            return self.read(name)
        raise AttributeError(name)


config = _Config()


@contextlib.contextmanager
def enable_x64(new_val: bool = True) -> Iterator[None]:
    """`jax.enable_x64(True)`: scanlib's 64-bit types are always on; False raises.

    >>> with sl.enable_x64(True):
    ...     x = sl.ones(2)
    """
    config.update("jax_enable_x64", bool(new_val))
    yield


def block_until_ready(tree: Any) -> Any:
    """tree, once its arrays are computed: at once for NumPy; on a GPU, after the device has
    finished (for timing).

    >>> sl.block_until_ready({'h': sl.ones(2)})
    {'h': tensor([1., 1.], dtype=float64)}
    """
    for leaf in pytree.leaves(tree):
        value = leaf._value if isinstance(leaf, Tensor) else leaf
        if backends.is_array(value) and backends.device_of(value) != "cpu":
            backends.xp_of(value).cuda.get_current_stream().synchronize()
    return tree


def device_put(x: Any, device: str | None = None) -> Any:
    """Every array leaf of x as a Tensor on `device` ("cpu", "cuda", "cuda:1"; None: where it
    is). Tensors keep their gradient, as in JAX.

    >>> sl.device_put({'w': np.zeros(2)}, 'cpu')
    {'w': tensor([0., 0.], dtype=float64)}
    """
    def put(leaf):
        t = as_tensor(leaf)
        return t if device is None or t.device == backends.parse_device(device) else t.to(device)
    return pytree.tree_map(put, x)


def device_get(x: Any) -> Any:
    """Every Tensor leaf of x as a NumPy array on the host.

    >>> sl.device_get([sl.ones(2), 3.0])
    [array([1., 1.]), 3.0]
    """
    return pytree.tree_map(lambda leaf: leaf.numpy() if isinstance(leaf, Tensor) else leaf, x)


def default_backend() -> str:
    """"gpu" where CuPy has a usable GPU, else "cpu": where scanlib can compute (the data
    chooses, per array).

    >>> sl.default_backend() in ('cpu', 'gpu')
    True
    """
    return "gpu" if backends.cuda_available() else "cpu"


def devices(backend: str | None = None) -> list[str]:
    """The devices scanlib can put data on, as the strings `device=` takes.

    >>> sl.devices('cpu')
    ['cpu']
    """
    if backend in (None, "gpu", "cuda") and backends.cuda_available():
        gpus = backends.gpu_devices()
        return gpus if backend else gpus + ["cpu"]
    if backend in (None, "cpu"):
        return ["cpu"]
    raise RuntimeError(f"devices({backend!r}): no such backend here (CuPy with a GPU is "
                       f"{'' if backends.cuda_available() else 'not '}available)")


def device_count(backend: str | None = None) -> int:
    """How many devices the backend (the default one: default_backend()) has, as
    jax.device_count: 1 on the CPU, the GPUs CuPy sees on "gpu".

    >>> sl.device_count('cpu')
    1
    """
    return len(devices(default_backend() if backend is None else backend))


def local_device_count(backend: str | None = None) -> int:
    """device_count: one process sees every device here, as a single-host JAX does.

    >>> sl.local_device_count('cpu')
    1
    """
    return device_count(backend)


def process_count(backend: str | None = None) -> int:
    """1, as jax.process_count without jax.distributed: scanlib's MPI data parallelism
    (scanlib.distributed) has ranks of its own, which it does not report here.

    >>> sl.process_count()
    1
    """
    return 1


def process_index(backend: str | None = None) -> int:
    """0, as jax.process_index without jax.distributed (see process_count).

    >>> sl.process_index()
    0
    """
    return 0


@dataclasses.dataclass(frozen=True)
class ShapeDtypeStruct:
    """A shape and dtype standing for an array (what `eval_shape` returns, and takes).

    >>> sl.ShapeDtypeStruct((2, 3), 'float32').ndim
    2
    """

    shape: tuple
    dtype: np.dtype

    def __init__(self, shape, dtype):
        object.__setattr__(self, "shape", tuple(int(n) for n in shape))
        object.__setattr__(self, "dtype", np.dtype(dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def _aval(leaf, path):
    if isinstance(leaf, ShapeDtypeStruct):
        return leaf.shape, leaf.dtype
    return abstract_leaf(leaf, path)[:2]


def eval_shape(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes of fun(*args, **kwargs), as ShapeDtypeStructs in its output's
    pytree, found by tracing fun without computing it. Arguments may be arrays, Tensors or
    ShapeDtypeStructs.

    >>> sl.eval_shape(lambda x: {'h': x @ x.T}, sl.ShapeDtypeStruct((2, 3), 'float32'))
    {'h': ShapeDtypeStruct(shape=(2, 2), dtype=dtype('float32'))}
    """
    paths, leaves, treedef = pytree.flatten_with_paths((args, kwargs), "args")
    avals = [_aval(leaf, path) for path, leaf in zip(paths, leaves)]
    graph, out_tree, out_leaves = trace_function(
        lambda a: fun(*a[0], **a[1]), avals, treedef, name=getattr(fun, "__name__", "f"))
    outs = [ShapeDtypeStruct(*_aval(leaf, "output")) for leaf in out_leaves]
    return pytree.unflatten(out_tree, outs)


def make_jaxpr(fun: Callable[..., Any], static_argnums: int | tuple = ()) -> Callable[..., Any]:
    """`make_jaxpr(f)(*args)`: f's Graph, printable as straight-line code (scanlib's jaxpr);
    the same as `make_graph`.

    >>> print(sl.make_jaxpr(lambda x: sl.sin(x) * 2)(np.zeros(2)))
    def f(x: f64[2]):
        a: f64[2] = sin(x)
        b: f64[2] = mul(a, 2)
        return b
    """
    if static_argnums:
        raise TypeError("make_jaxpr: static_argnums is not supported; close over the static "
                        "values with functools.partial or a lambda")
    return make_graph(fun)


@contextlib.contextmanager
def named_scope(name: str) -> Iterator[None]:
    """`jax.named_scope(name)`: a name for profilers in JAX; scanlib records none.

    >>> with sl.named_scope('encoder'):
    ...     h = sl.tanh(sl.ones(2))
    """
    if not isinstance(name, str):
        raise TypeError(f"named_scope: name must be a string, got {type(name).__name__}")
    yield


def named_call(fun: Callable[..., Any], *, name: str | None = None) -> Callable[..., Any]:
    """`jax.named_call(f, name=)`: f itself (a name for profilers in JAX).

    >>> sl.named_call(lambda x: x + 1, name='inc')(1.0)
    2.0
    """
    return functools.wraps(fun)(lambda *a, **k: fun(*a, **k))


def clear_caches() -> None:
    """Forget the cached scan bodies and their compiled loops, as `jax.clear_caches()`.
    (Each jitted function keeps its own traces: `f.cache_clear()`.)

    >>> sl.clear_caches()
    """
    _scan_cache.clear()
