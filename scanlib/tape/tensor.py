"""The Tensor: an immutable array plus what backward needs (requires_grad, the Node that made
it) and, while a scan body or make_graph is being traced, the graph variable it stands for.

Arithmetic methods are attached by scanlib.ops (the layer above); type checkers read them from
tape/declared.py. This file imports only backends and tape.state.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from .. import backends
from .state import STATE


# NumPy 2.1's __dlpack__ takes DLPack 1.0's keywords and can flag memory read-only.
_NUMPY_DLPACK_1 = np.lib.NumpyVersion(np.__version__) >= "2.1.0"


def short_dtype(dtype) -> str:
    """float32 -> f32, int64 -> i64, bool -> bool: the names printed graphs use."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "bool"
    return {"f": "f", "i": "i", "u": "u", "c": "c"}.get(dtype.kind, dtype.kind) + str(
        8 * dtype.itemsize
    )


def type_str(shape, dtype) -> str:
    return f"{short_dtype(dtype)}[{','.join(map(str, shape))}]"


def is_differentiable_dtype(dtype) -> bool:
    return np.dtype(dtype).kind in "fc"


def _check_grad(x, g):
    """A .grad assigned by hand must look like the gradient backward would put there."""
    if not isinstance(g, Tensor):
        raise TypeError(f".grad must be a Tensor or None, got {type(g).__name__}; wrap an array "
                        "with scanlib.tensor(array) first.")
    if g.shape != x.shape or g.dtype != x.dtype or g.device != x.device:
        raise ValueError(
            f".grad must match the tensor it belongs to, but the tensor is "
            f"{type_str(x.shape, x.dtype)} on {x.device} and the assigned gradient is "
            f"{type_str(g.shape, g.dtype)} on {g.device}. Reshape, cast (.astype) or move "
            "(.to) the gradient first, or assign None to reset it.")


def _read_only(array):
    """A read-only view of a NumPy array. Made through a read-only buffer, so that its flag
    cannot be switched back on (a view's base would be the tensor's own writable memory)."""
    if not isinstance(array, np.ndarray):
        return array
    try:
        return np.asarray(memoryview(array).toreadonly())
    except (TypeError, ValueError, BufferError):  # dtypes the buffer protocol cannot carry
        view = array.view()
        view.flags.writeable = False
        return view


if TYPE_CHECKING:
    from .declared import TensorMethods
else:
    TensorMethods = object  # the methods are attached at run time by scanlib.ops


class Tensor(TensorMethods):
    """An immutable n-d array that can record the operations applied to it.

    Make one with `scanlib.tensor(data, requires_grad=True)`; after `loss.backward()` the
    gradient of each leaf that requires grad is in `.grad` (accumulated, as in PyTorch; set it
    to None to reset). An update makes a new leaf: `w = (w - lr * w.grad).requires_grad_()`
    under `no_grad()`, or use scanlib.optim.
    """

    # _scratch (set only where true): a leaf a grad/vjp made of data that needed no gradient,
    # its own input; nothing differentiates with respect to it once that call has returned.
    __slots__ = ("_value", "requires_grad", "_grad", "_node", "_index", "_trace", "_var",
                 "_weak", "_scratch", "__weakref__")
    # ndarray <op> Tensor must come back to Tensor's reflected operator.
    __array_priority__ = 1000

    def __init__(self, value, requires_grad=False, *, _node=None, _index=0, _trace=None,
                 _var=None):
        if type(value) is Tensor:  # the engine passes arrays; a user may pass a tensor
            raise TypeError("Tensor(t) of a tensor: make tensors with scanlib.tensor(data) "
                            "(a copy without history), or keep t itself to keep its gradient.")
        self._value = value
        self.requires_grad = requires_grad
        self._grad = None
        self._node = _node
        self._index = _index
        self._trace = _trace
        self._var = _var
        self._weak = False  # JAX's weak type: made from Python numbers (ops/primitive.py)

    # --- metadata -----------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._value.shape  # a tuple already, for NumPy and CuPy

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def size(self) -> int:
        return int(self._value.size)

    @property
    def device(self) -> str:
        return backends.device_of(self._value)

    @property
    def weak_type(self) -> bool:
        """Whether the tensor is weakly typed, as JAX's arrays made from Python numbers are
        (`jnp.array(0.5)`, `jnp.sqrt(2.0)`): beside a typed array its dtype yields, as a
        Python number's would (float32 data times it stays float32)."""
        return self._weak

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    # --- the torch-style loop: .grad and requires_grad_ ----------------------------------------
    @property
    def grad(self):
        """The gradient backward() accumulated here, or None. Assign None to reset it; an
        assigned Tensor must have this tensor's shape, dtype and device. backward() fills the
        .grad of leaves only; reading it on a tensor with history warns, as in torch."""
        if self._grad is None and self._node is not None and self.requires_grad:
            warnings.warn(
                "the .grad of a tensor that is not a leaf is read: backward() fills leaves' "
                ".grad only, so it is None. A parameter updated with `w -= lr * w.grad` (or "
                "`w = w - lr * w.grad`) became such a tensor, computed from the old w: tensors "
                "are immutable, so make the update under no_grad() and mark the result, "
                "`w = (w - lr * w.grad).requires_grad_()`, or use scanlib.optim's "
                "opt.step(grads, state, params).", UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            _check_grad(self, value)
        self._grad = value

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set requires_grad in place and return self, as torch's `requires_grad_`.

        Tensors are immutable, so a torch-style update makes a new leaf and marks it:

        >>> w = sl.tensor([1.0, 2.0], requires_grad=True)
        >>> (w * w).sum().backward()
        >>> with sl.no_grad():
        ...     w = (w - 0.1 * w.grad).requires_grad_()
        """
        if self._trace is not None:
            raise TypeError(
                "requires_grad_() on a traced tensor (inside a scan body, jit or make_graph): "
                "gradients inside a body follow its inputs. Mark the tensors passed to scan "
                "instead, or use scanlib.grad inside the body.")
        if requires_grad and not is_differentiable_dtype(self.dtype):
            raise TypeError(
                f"requires_grad_() needs a floating or complex tensor, but this one is "
                f"{type_str(self.shape, self.dtype)}; integer and bool tensors have no "
                "gradient. Cast it first: t.astype('float64').requires_grad_().")
        if not requires_grad and self._node is not None:
            raise RuntimeError(
                "requires_grad_(False) on a tensor computed by recorded ops (not a leaf) would "
                "cut it out of the graph its result came from; use t.detach() for a copy "
                "without gradient history.")
        self.requires_grad = bool(requires_grad)
        return self

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        # Without this, Python iterates through __getitem__ and a 0-d tensor looks empty:
        # tuple(tensor(0)) would be () and sum(axis=tensor(0)) would reduce nothing.
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # --- leaving the tape -----------------------------------------------------------------
    def _concrete(self, what: str):
        if self._trace is not None and self._trace.closed:
            from .graph import escaped_tracer_error  # graph imports this module
            raise escaped_tracer_error(self)
        if self._trace is not None:
            raise TypeError(
                f"{what} needs a concrete value, but this tensor "
                f"({type_str(self.shape, self.dtype)}) is traced (inside a scan body, jit "
                "or make_graph), where values are not known yet. "
                "Use scanlib.where(cond, a, b) instead of Python `if`, keep loop bounds static, "
                "and return values instead of converting them with float()/.item()/.numpy(). "
                "To index a NumPy array with a traced index, make the array a tensor first: "
                "scanlib.tensor(table)[i] or scanlib.take(table, i)."
            )
        return self._value

    def numpy(self) -> np.ndarray:
        """The data as a NumPy array (copied from the GPU for CUDA tensors). On the CPU it is
        a read-only view of the tensor's own memory, not a copy: tensors are immutable, as
        JAX arrays are, and that memory may be shared with the tape, a scan's saved values or
        another tensor. Copy it (`np.array(t)`) to write into it. Inside grad, vjp, jvp or a
        Jacobian, a value that depends on the inputs being differentiated refuses, as float()
        does (its gradient would be lost): use t.detach().numpy() for a constant."""
        return _read_only(backends.to_numpy(self._off_the_tape(".numpy()")))

    def _off_the_tape(self, what: str):
        """The data for a conversion that leaves the tape (`what`: "float()", ".item()",
        ".numpy()", "pickle", ...), refused for a value that depends on an input being
        differentiated: the result would carry no gradient, and what is computed from it
        would silently miss that part of the gradient."""
        value = self._concrete(what)
        if self.requires_grad and STATE.watched:
            from .backward import differentiated_by  # backward imports this module
            who = differentiated_by(self)
            if who is not None:
                raise TypeError(
                    f"{what} of a tensor ({type_str(self.shape, self.dtype)}) that depends on "
                    f"an input being differentiated by {who}: the result leaves the tape, so "
                    "it would carry no gradient, and what is computed from it would silently "
                    "miss that part of the gradient (JAX raises here too). To compute with "
                    "it, use scanlib's ops instead of Python's or NumPy's (scanlib.exp(t), not "
                    "math.exp(t)); if it is meant to be a constant, convert t.detach() (or "
                    "scanlib.stop_gradient(t)). Python control flow such as `if t > 0:` "
                    "works as it is.")
        return value

    def item(self):
        """The value of a one-element tensor as a Python scalar. Inside grad, vjp, jvp (and
        the Jacobians) a value that depends on the inputs being differentiated refuses, as it
        would lose its gradient: use t.detach().item() if it is meant as a constant. In a
        torch-style loop (requires_grad leaves, loss.backward()) `loss.item()` works."""
        return self._scalar(".item()").item()

    def _scalar(self, what: str):
        value = self._off_the_tape(what)
        if value.size != 1:
            raise ValueError(f"{what} needs a tensor with one element, got shape {self.shape}")
        return value

    def detach(self) -> "Tensor":
        """The same data, cut from the tape (requires_grad=False). Inside a traced scan body
        the cut is an equation of the graph (stop_gradient), as the loop would cut it; a jit
        call's own graph is never differentiated, so there the tape's cut is the whole cut."""
        if self._trace is not None and (self._trace.closed or not self._trace.whole_call):
            # (a tracer that escaped its trace: stop_gradient raises saying so)
            from .backward import OPS  # backward imports this module
            return OPS.stop_gradient(self)
        return Tensor(self._value, False, _trace=self._trace, _var=self._var)

    def __array__(self, dtype=None, copy=None):
        value = self._concrete("Conversion to a NumPy array")
        if self.requires_grad:
            # NumPy reads tensors this way wherever it meets one it cannot dispatch on (inside
            # a list: np.sum([t, u]), np.asarray(t)); the result would have no gradient.
            raise TypeError(
                f"NumPy is reading a tensor that requires grad ({type_str(self.shape, self.dtype)})"
                " as a plain array, which would drop its gradient without a word. Use scanlib's "
                "functions (scanlib.sum(scanlib.stack([t, u])) for np.sum([t, u])), or leave "
                "the tape on purpose with t.detach() (t.detach().numpy() copies a GPU tensor to "
                "the host).")
        if self.device != "cpu":
            raise TypeError(
                f"this tensor lives on {self.device}; NumPy cannot read GPU memory. "
                "Call .numpy() (which copies) or .to('cpu') first."
            )
        if copy:  # np.array(t): a fresh, writable array
            return np.array(value, dtype=dtype, copy=True)
        out = np.asarray(value, dtype=dtype)
        if copy is False and out is not value:
            raise ValueError(f"np.asarray(t, dtype={dtype!r}, copy=False): the cast needs a copy")
        return _read_only(out)

    # --- other libraries: DLPack, the CUDA array interface ----------------------------------
    def _exported(self, what: str):
        """The data, to hand to another library: refused for a tensor that requires grad, as
        np.asarray refuses it (the other library would compute without its gradient)."""
        value = self._concrete(what)
        if self.requires_grad:
            raise TypeError(
                f"{what}: this tensor requires grad ({type_str(self.shape, self.dtype)}), and "
                "the other library would read it as a plain array, dropping its gradient "
                "without a word. Export t.detach() to pass the values on purpose.")
        return value

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export (`np.from_dlpack(t)`, `torch.from_dlpack(t)`, `jax.dlpack` ...): the
        tensor's own memory, not a copy, which the consumer must not write into (tensors are
        immutable). A NumPy-backed tensor is exported read-only where the consumer supports
        that flag (DLPack 1.0) and as a copy to an older consumer. Refused for a tensor that
        requires grad: export t.detach()."""
        value = self._exported("DLPack export (__dlpack__)")
        if isinstance(value, np.generic):  # a NumPy scalar (sl.exp(1.0) holds one)
            value = np.asarray(value)
        options = {k: v for k, v in (("stream", stream), ("max_version", max_version),
                                     ("dl_device", dl_device), ("copy", copy)) if v is not None}
        if not isinstance(value, np.ndarray):
            return value.__dlpack__(**options)
        if not _NUMPY_DLPACK_1:  # NumPy 2.0 takes stream only and exports no read-only memory
            options = {"stream": stream} if stream is not None else {}
            why = "NumPy before 2.1 cannot export read-only memory; upgrade NumPy or"
        else:
            why = ("the consumer cannot be told that the tensor's memory is read-only (it "
                   "asked for DLPack before 1.0);")
        try:
            return _read_only(value).__dlpack__(**options)
        except BufferError:  # a consumer that cannot be told the memory is read-only
            if copy is False:
                raise BufferError(f"DLPack export with copy=False: {why} allow a copy or ask "
                                  "for max_version=(1, 0).") from None
            options.pop("copy", None)
            return value.copy().__dlpack__(**options)

    def __dlpack_device__(self):
        """(DLPack device type, device id) of the data: (1, 0) on the CPU, (2, N) on cuda:N."""
        value = self._value
        return (np.asarray(value) if isinstance(value, np.generic) else value).__dlpack_device__()

    @property
    def __cuda_array_interface__(self):
        """The CUDA array interface of a CuPy-backed tensor (for Numba, PyTorch, ...);
        absent (hasattr is False) on a NumPy-backed one. Refused for a tensor that requires
        grad: use t.detach()."""
        if not hasattr(self._value, "__cuda_array_interface__"):
            raise AttributeError(f"a tensor on {self.device} has no __cuda_array_interface__ "
                                 "(only a CuPy-backed tensor on a GPU has one)")
        return self._exported("__cuda_array_interface__").__cuda_array_interface__

    # --- pickle and copy ----------------------------------------------------------------------
    def __reduce__(self):
        """pickle: the value (NumPy or CuPy data, its dtype and shape) and, for a leaf,
        requires_grad. A tensor with history is pickled as its value, detached: the tape does
        not cross processes (torch would load it as a new leaf that requires grad, which
        reads as a parameter it is not). .grad is not pickled. Inside grad, vjp, jvp or a
        Jacobian, a value that depends on the inputs being differentiated refuses, as float()
        does."""
        value = self._off_the_tape("pickle")
        return _unpickle, (value, bool(self.requires_grad and self._node is None))

    def __copy__(self):
        return self  # immutable: the same tensor, its history included

    def __deepcopy__(self, memo):
        """A leaf: a new leaf with copies of its data and .grad. A tensor with history (or a
        traced one), and inside grad, vjp, jvp or a Jacobian any tensor that requires grad,
        is itself: the gradient must keep reaching the leaves it came from (JAX's copy of a
        traced value is differentiated through, as the identity)."""
        if self._node is not None or self._trace is not None or (
                self.requires_grad and STATE.watched):
            return self
        out = Tensor(self._value.copy(), self.requires_grad)
        if self._grad is not None:
            out._grad = Tensor(self._grad._value.copy())
        memo[id(self)] = out
        return out

    def __bool__(self):
        value = self._concrete("Python control flow (bool())")
        if value.size != 1:
            raise ValueError(
                f"the truth value of a tensor with shape {self.shape} is ambiguous; "
                "use .any() style reductions or scanlib.where"
            )
        return bool(value)

    def __float__(self):
        return float(self._scalar("float()").item())

    def __int__(self):
        return int(self._scalar("int()").item())

    def __complex__(self):
        return complex(self._scalar("complex()").item())

    def __index__(self):
        if np.dtype(self.dtype).kind not in "iub":
            raise TypeError(f"only integer tensors can be used as an index, got {self.dtype}")
        return int(self._scalar("Use as an index (__index__)").item())

    def __hash__(self):
        return id(self)

    def __repr__(self):
        if self._trace is not None:
            return f"Tracer<{type_str(self.shape, self.dtype)}>"
        body = np.array2string(backends.to_numpy(self._value), separator=", ", prefix="tensor(")
        extra = [f"dtype={self.dtype}"]
        if self.device != "cpu":
            extra.append(f"device='{self.device}'")
        if self.requires_grad:
            extra.append("requires_grad=True")
        return f"tensor({body}, {', '.join(extra)})"


def _unpickle(value, requires_grad):
    return Tensor(value, requires_grad)
