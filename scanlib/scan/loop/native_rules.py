"""How the numba printer (native.py) writes each primitive: one rule per primitive, from the
equation and its inputs' code to the statements computing its outputs, in the subset of NumPy
that numba compiles. A 0-d value is a scalar inside the kernel (numba computes scalars, not 0-d
arrays), so rules say what they do with one. A primitive without a rule, or a form its rule
cannot prove it writes exactly (an index read from an array, a complex matrix), raises
Unsupported, and the body runs as NumPy. A scan or a while_loop in the body is written as its
loop (Scope, at the end; jit's fused kernel writes its whole graph with it too). Whatever a
rule writes, native.py still checks the dtype and rank numba infers for every value against
the graph's before the kernel runs. Float work on arrays is written as loops over scalars
(native_nests.py), which numba compiles far faster than its own NumPy functions.

Imports tape and ops (for the primitives' identities) and native_nests.py; numba only inside
native.py.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from ...ops import decompositions as dec
from ...ops import elementwise as ew
from ...ops import gathers, prng
from ...ops import linalg as la
from ...ops import mathfuncs as mf
from ...ops import reductions as red
from ...ops import special as sp
from ...ops import structural as st
from ...tape import Literal
from ...tape.graph import Eqn
from . import native_nests as nests


# Primitives whose result may be a view of an input: a carry (or an output) made by one is
# copied, since numba gives a variable one array type and a caller's memory is not ours.
VIEWS = ("getitem", "reshape", "transpose", "broadcast_to", "split", "unstack",
         "stop_gradient", "copy", "checkpoint_name", "scale_gradient")


class Unsupported(Exception):
    """This body (or this form of one of its primitives) has no numba translation."""


class Arg:
    """One input of an equation as the kernel reads it: its code, shape and dtype."""

    __slots__ = ("code", "shape", "dtype", "literal", "value", "fused", "exp", "elements")

    def __init__(self, code, v):
        self.fused = None  # a nests.Fused: computed in the reader's nest (Fusion)
        self.exp = None  # names of arrays exp(-|x|), log1p of it, where Fusion shares them
        self.elements = None  # a stack of scalars never made: its elements' Args (Fusion)
        self.literal = isinstance(v, Literal)
        self.value = v.value if self.literal else None
        self.code = literal_code(v.value, None) if self.literal else code
        self.shape = () if self.literal else tuple(v.shape)
        self.dtype = np.asarray(v.value).dtype if self.literal else v.dtype

    @property
    def scalar(self):
        return not self.shape


def literal_code(value, dtype):
    """A Python scalar as the typed constant NumPy would make of it next to `dtype` (its weak
    promotion: 0.5 beside float32 is a float32)."""
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    dt = np.result_type(dtype, value) if dtype is not None else np.result_type(value)
    if dt.kind == "c":
        c = complex(value)
        return f"np.{dt.name}(complex({_float_code(c.real)}, {_float_code(c.imag)}))"
    if dt.kind == "f":
        return f"np.{dt.name}({_float_code(float(value))})"
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if not info.min <= int(value) <= info.max:  # NumPy compares the exact value
            raise Unsupported(f"a literal {value!r} outside {dt}")
        return f"np.{dt.name}({int(value)})"
    if dt.kind == "b":
        return "True" if value else "False"
    raise Unsupported(f"a literal {value!r}")


def _float_code(x):
    if math.isnan(x):
        return "np.nan"
    if math.isinf(x):
        return "np.inf" if x > 0 else "-np.inf"
    return repr(x)


def dtype_code(dtype):
    dtype = np.dtype(dtype)
    return "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"


def index_code(index):
    """A static index tuple (ints, slices, None, Ellipsis) as indexing code."""
    parts = []
    for i in index:
        if i is None:
            parts.append("None")
        elif i is Ellipsis:
            parts.append("...")
        elif isinstance(i, slice):
            parts.append(":".join("" if p is None else str(int(p))
                                  for p in (i.start, i.stop, i.step)))
        elif isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
            parts.append(str(int(i)))
        else:
            raise Unsupported(f"an index read from an array inside the step ({i!r})")
    return ", ".join(parts) if parts else "..."


# --- the rules ----------------------------------------------------------------------------------
RULES = {}
SCOPED = set()  # primitives whose rule takes the scope too (a graph inside: its scans)
FUSIBLE = set()  # primitives whose rule writes elementwise nests (Fusion)


def rule(*prims, scoped=False, fusible=False):
    """Registers fn(eqn, args, outs) as the rule of prims, fn(eqn, args, outs, scope) where
    `scoped`: a primitive holding a graph whose scans the scope writes; fn(eqn, args, outs,
    fuse) where `fusible`: a rule that writes its work as an elementwise nest (when it does),
    and takes operands fused into it (Arg.fused) there."""
    def register(fn):
        for p in prims:
            RULES[p] = fn
            if scoped:
                SCOPED.add(p)
            if fusible:
                FUSIBLE.add(p)
        return fn
    return register


def operands(args, out_dtype):
    """The inputs' code, a literal typed as NumPy would type it beside the other operand."""
    other = next((a.dtype for a in args if not a.literal), out_dtype)
    return [literal_code(a.value, other) if a.literal else a.code for a in args]


_INFIX = {ew.add: "+", ew.sub: "-", ew.mul: "*", ew.div: "/"}
_NAMED_UFUNCS = {ew.equal: "equal", ew.not_equal: "not_equal", ew.less: "less",
                 ew.less_equal: "less_equal", ew.greater: "greater",
                 ew.greater_equal: "greater_equal", ew.logical_not: "logical_not",
                 ew.logical_and: "logical_and", ew.logical_or: "logical_or",
                 ew.isfinite: "isfinite", ew.sign: "sign", sp.floor_p: "floor",
                 sp.ceil_p: "ceil", sp.trunc_p: "trunc"}


# Where numba's ufunc differs from NumPy's: integer fmod with
# a negative operand, floor_divide and remainder at inf and at the integer minimum over -1,
# integers to negative powers (NumPy raises), sign of unsigned integers and of -0.0.
_DIFFERENT = {"fmod", "floor_divide", "remainder", "sign"}
_INTEGER_DIFFERENT = {"power"}
_TIES = {"maximum": ">", "minimum": "<"}  # written as NumPy picks at a tie (elementwise)


def elementwise(eqn, args, outs, fuse=False):
    """An elementwise primitive as an operator or a NumPy ufunc (numba compiles both, on
    scalars and arrays), or None when it has neither."""
    prim, out = eqn.prim, eqn.outvars[0]
    if eqn.params:
        return None
    name = _NAMED_UFUNCS.get(prim) or prim.ufunc or prim.name
    if name in _DIFFERENT or (name in _INTEGER_DIFFERENT and out.dtype.kind in "iub"):
        raise Unsupported(f"{prim.name} (numba's differs from NumPy's at some inputs)")
    if out.dtype.kind in "fc" and args and all(a.dtype.kind in "iu" for a in args):
        # int64 with uint64 is float64 in NumPy, computed in floats; numba wraps in int64
        raise Unsupported(f"{prim.name} of integers with a float result")
    if prim in _INFIX:
        def expr(c):
            return f"({c[0]} {_INFIX[prim]} {c[1]})"
    elif prim is ew.neg:
        def expr(c):
            return f"(-{c[0]})"
    else:
        name = _NAMED_UFUNCS.get(prim) or (prim.ufunc if prim.elementwise else None)
        if name is None:
            return None
        if name in _TIES and (nests.nestable(out, args) or not out.shape):
            # numba's scalar maximum returns its first operand at a tie, NumPy's the second
            # (maximum(0.0, -0.0) is -0.0); NaN wins in both
            def expr(c):
                return f"({c[0]} if ({c[0]} {_TIES[name]} {c[1]} or {c[0]} != {c[0]}) " \
                       f"else {c[1]})"
        else:
            def expr(c):
                return f"np.{name}({', '.join(c)})"
    return _elementwise_lines(outs[0], out, args, operands(args, out.dtype), expr, fuse)


@rule(ew.relu_p, fusible=True)
def _relu(eqn, args, outs, fuse=False):
    """relu as the maximum(x, 0) it computes (the same nest, NumPy's pick at a tie)."""
    as_maximum = Eqn(ew.maximum, [eqn.invars[0], Literal(0)], {}, eqn.outvars)
    return elementwise(as_maximum, [args[0], Arg(None, Literal(0))], outs, fuse)


def _elementwise_lines(name, out, args, code, expr, fuse=False):
    """`name = expr(code)`: on arrays of float work a loop nest (native_nests.py; with
    `fuse`, a nests.Fused), else one NumPy-in-numba call."""
    if nests.nestable(out, args):
        return nests.elementwise(name, out, args, code, expr, fuse)
    if not out.shape and out.dtype.kind in "iu" and out.dtype.itemsize < 8:
        # numba computes integer scalars in 64 bits (int32 + int32 is int64); the cast
        # wraps as NumPy's narrower integers do
        return [f"{name} = {dtype_code(out.dtype)}({expr(code)})"]
    return [f"{name} = {expr(code)}"]


@rule(ew.stop_gradient, ew.copy, ew.checkpoint_name_p, ew.scale_gradient_p)
def _identity(eqn, args, outs):
    return [f"{outs[0]} = {args[0].code}"]


LOGISTIC = (ew.sigmoid, ew.softplus_grad_p, ew.softplus_p)


@rule(*LOGISTIC, fusible=True)
def _logistic(eqn, args, outs, fuse=False):
    """sigmoid (softplus' derivative too) and softplus: on a float array a nest of
    native_kernels' scalar functions, from exp(-|x|) and its log1p where Fusion has them
    (`x.exp`), else the vectorized function."""
    x, out = args[0], eqn.outvars[0]
    name = "softplus" if eqn.prim is ew.softplus_p else "sigmoid"
    if x.dtype.kind != "f":
        raise Unsupported(f"{name} of {x.dtype}")
    if not nests.nestable(out, args):
        return [f"{outs[0]} = _{name}({x.code})"]
    one = literal_code(1.0, x.dtype)  # typed: float32 stays float32, as in NumPy
    if x.exp is None:
        scalar = f"_sigmoid1({{}}, {one})" if name == "sigmoid" else "_softplus1({})"
        return _elementwise_lines(outs[0], out, args, [x.code],
                                  lambda e: scalar.format(e[0]), fuse)
    shared = Arg(x.exp[name == "softplus"], eqn.invars[0])
    scalar = f"_sigmoid_from({{}}, {{}}, {one})" if name == "sigmoid" else "_softplus_from({}, {})"
    return _elementwise_lines(outs[0], out, [x, shared], [x.code, shared.code],
                              lambda e: scalar.format(*e), fuse)


@rule(mf.sinc_maclaurin_p)
def _sinc_maclaurin(eqn, args, outs):
    x = args[0]
    if x.dtype.kind != "f":
        raise Unsupported(f"sinc_maclaurin of {x.dtype}")
    c = mf.sinc_maclaurin_p.impl(np.zeros((), x.dtype), **eqn.params)
    zero, c = literal_code(0.0, x.dtype), literal_code(float(c), x.dtype)
    return [f"{outs[0]} = ({x.code} * {zero} + {c})"]


@rule(sp.rsqrt_p)
def _rsqrt(eqn, args, outs):
    return [f"{outs[0]} = np.reciprocal(np.sqrt({args[0].code}))"]


@rule(ew.where, fusible=True)
def _where(eqn, args, outs, fuse=False):
    out = eqn.outvars[0]
    c, a, b = args
    codes = [c.code] + [literal_code(x.value, out.dtype) if x.literal else x.code for x in (a, b)]
    t = dtype_code(out.dtype)
    if not out.shape:
        return [f"{outs[0]} = {t}({codes[1]}) if {codes[0]} else {t}({codes[2]})"]
    if c.dtype.kind == "b" and nests.nestable(out, [a, b]):
        return nests.elementwise(outs[0], out, args, codes,
                                 lambda e: f"{t}({e[1]}) if {e[0]} else {t}({e[2]})", fuse)
    return [f"{outs[0]} = np.where({', '.join(codes)})"]


@rule(ew.astype)
def _astype(eqn, args, outs):
    t = dtype_code(eqn.params["dtype"])
    x = args[0]
    if x.dtype.kind in "fc" and np.dtype(eqn.params["dtype"]).kind in "iu":
        # out of range (or NaN) NumPy's result is its own, and LLVM's differs (it saturates
        # vectorised casts, and may fold a scalar one away)
        raise Unsupported("a cast of a float to an integer")
    return [f"{outs[0]} = {t}({x.code})" if x.scalar else f"{outs[0]} = {x.code}.astype({t})"]


def _one_element(code, ndim):
    """The one element of an array of size 1 and `ndim` axes: read by index where the array
    is named (`x[0, 0]`); np.ravel's view, built and released at each call (an atomic count
    each way), cost half the adaptive ODE solver's kernel time."""
    if ndim and nests.is_name(code):
        return f"{code}[{', '.join(['0'] * ndim)}]"
    return f"np.ravel({code})[0]"


def _filled(name, out, code, fuse=False):
    """`name` = the scalar `code` as var `out` (0-d: the scalar itself; else np.full's)."""
    return nests.filled(name, out, code, fuse) if out.shape else [f"{name} = {code}"]


@rule(st.reshape_p, fusible=True)
def _reshape(eqn, args, outs, fuse=False):
    x, shape = args[0], tuple(eqn.params["shape"])
    if x.scalar:
        return _filled(outs[0], eqn.outvars[0], x.code, fuse)
    if not shape:
        return [f"{outs[0]} = {_one_element(x.code, len(x.shape))}"]
    if math.prod(shape) <= nests.SMALL:
        return nests.reshape(outs[0], eqn.outvars[0], x, x.code, fuse)
    return [f"{outs[0]} = np.ascontiguousarray({x.code}).reshape({shape})"]


@rule(st.broadcast_to_p, fusible=True)
def _broadcast_to(eqn, args, outs, fuse=False):
    x, shape = args[0], tuple(eqn.params["shape"])
    if x.scalar:
        return _filled(outs[0], eqn.outvars[0], x.code, fuse)
    if x.shape == shape:
        return [f"{outs[0]} = {x.code}"]
    if math.prod(shape) <= nests.SMALL:
        return nests.broadcast(outs[0], eqn.outvars[0], x, x.code, fuse)
    return [f"{outs[0]} = np.broadcast_to({x.code}, {shape})"]


@rule(st.transpose_p)
def _transpose(eqn, args, outs):
    x, axes = args[0], tuple(eqn.params["axes"])
    if x.scalar or axes == tuple(range(len(axes))):
        return [f"{outs[0]} = {x.code}"]
    if axes == tuple(range(len(axes)))[::-1]:  # .T: numba compiles it in a fraction
        return [f"{outs[0]} = {x.code}.T"]
    return [f"{outs[0]} = np.transpose({x.code}, {axes})"]


def _array_index(eqn, args, shape):
    """An index holding index arrays (x[i], x[:, i], x[i, 0], x[i, :, j], x[.., i, j] with
    arrays broadcast together), as the kernel reads it: `Gather`, the index split into a
    basic part the kernel indexes with (slices, None, ints and 0-d arrays, each bounds-checked
    as NumPy checks it: _row) and at most two arrays of one or more axes read by the helpers,
    with NumPy's placement of their broadcast axes (where the array and int items stand
    together, else first). Any other form raises Unsupported. The helpers check bounds
    (NumPy's IndexError then comes from the NumPy loop, which reruns)."""
    index, arrays = tuple(eqn.params["index"]), args[1:]
    if any(type(t) not in (slice, int, type(None), type(Ellipsis)) and not _is_slot(t)
           for t in index) or index.count(Ellipsis) > 1:
        raise Unsupported(f"an index {index!r} with an item other than ints, slices, None, "
                          "... and integer arrays")
    if not all(a.dtype.kind in "iu" for a in arrays):
        raise Unsupported("an index array that is not of integers")
    consumed = sum(1 for t in index if t is not None and t is not Ellipsis)
    if consumed > len(shape):
        raise Unsupported("an index with more items than axes")
    return Gather(index, arrays, shape, consumed)


def _is_slot(t):
    return type(t).__name__ == "Slot"


class Gather:
    """x[index] for an index with arrays, split as the kernel writes it: x[basic] (a view;
    `axes` its axes, each (template position, length, whether None made it)), transposed so
    the axes read at `arrays` (1-d or more) come first, read there by _take1 / _take2, the
    result reshaped to the arrays' broadcast shape `lead` and its axes moved behind the first
    `before` other axes."""

    def __init__(self, index, arrays, shape, consumed):
        basic, axes, picked, advanced, d = [], [], [], [], 0
        for pos, t in enumerate(index):
            if t is None:
                basic.append("None")
                axes.append((pos, 1, True))
            elif t is Ellipsis:
                for n in shape[d:d + len(shape) - consumed]:
                    basic.append(":")
                    axes.append((pos, n, False))
                d += len(shape) - consumed
            elif isinstance(t, slice):
                basic.append(index_code((t,)))
                axes.append((pos, len(range(*t.indices(shape[d]))), False))
                d += 1
            elif _is_slot(t) and arrays[t.i].shape:  # read by a helper: its axis kept here
                basic.append(":")
                picked.append((len(axes), arrays[t.i]))
                axes.append((pos, shape[d], False))
                advanced.append(pos)
                d += 1
            else:  # an int or a 0-d array: indexes here, its axis dropped
                if _is_slot(t) and arrays[t.i].dtype.kind != "i":  # _row adds in floats
                    raise Unsupported(f"a 0-d index of {arrays[t.i].dtype}")
                if _is_slot(t):
                    basic.append(f"_row({arrays[t.i].code}, {int(shape[d])})")
                elif -shape[d] <= t < shape[d]:
                    basic.append(str(t % shape[d]))
                else:
                    raise Unsupported(f"an index {t} out of range for an axis of {shape[d]}")
                advanced.append(pos)
                d += 1
        axes += [(len(index), n, False) for n in shape[d:]]
        if len(picked) > 2:
            raise Unsupported("an index with more than two index arrays of one or more axes")
        try:
            self.lead = tuple(np.broadcast_shapes(*[a.shape for _, a in picked]))
        except ValueError:
            raise Unsupported("index arrays whose shapes do not broadcast") from None
        self.basic = basic + [":"] * (len(shape) - d)
        self.axes, self.picked = axes, picked
        rest = [a for k, a in enumerate(axes) if k not in {k for k, _ in picked}]
        together = advanced == list(range(advanced[0], advanced[-1] + 1)) if advanced else True
        self.before = sum(1 for a in rest if a[0] < advanced[0]) if together and picked else 0
        self.rest = rest
        self.shape = (tuple(a[1] for a in rest[:self.before]) + self.lead
                      + tuple(a[1] for a in rest[self.before:]))

    def view(self, code, nones=True):
        """x[basic] (without its None axes unless `nones`): the axes the helpers index."""
        parts = [b for b in self.basic if nones or b != "None"]
        if all(p == ":" for p in parts):
            return code
        return f"{code}[{', '.join(parts)}]"

    def order(self, nones=True):
        """The transpose of view(nones) putting the helpers' axes first."""
        kept = [k for k, a in enumerate(self.axes) if nones or not a[2]]
        first = [k for k, _ in self.picked]
        perm = [kept.index(k) for k in first] + [kept.index(k) for k in kept if k not in first]
        return tuple(perm)

    def flat(self):
        """The index arrays' code, each broadcast to `lead` and flattened."""
        codes = []
        for _, a in self.picked:
            if tuple(a.shape) != self.lead:
                codes.append(f"np.ravel(np.broadcast_to({a.code}, {self.lead}))")
            else:
                codes.append(a.code if len(a.shape) == 1 else f"np.ravel({a.code})")
        return ", ".join(codes)

    def moved(self):
        """The transpose taking (lead, rest) to NumPy's order (lead after `before` axes)."""
        n, r = len(self.lead), len(self.rest)
        return (tuple(range(n, n + self.before)) + tuple(range(n))
                + tuple(range(n + self.before, n + r)))


def _moved(code, perm):
    return code if perm == tuple(range(len(perm))) else f"np.transpose({code}, {perm})"


def _check_layout(at, out):
    """The layout `at` works out must be the traced result's (else the form is not written)."""
    if at.shape != tuple(out.shape):
        raise Unsupported(f"an index whose result {list(out.shape)} is not the layout "
                          f"{list(at.shape)} worked out for it")


def _whole(i):
    return isinstance(i, slice) and (i.start, i.stop, i.step) == (None, None, None)


def _leading_whole_axes(index, ndim):
    """(k, the rest of the index): the axes an index passes over whole before its other
    items (k full slices, or a ... standing for them, as vmap and diagonal() write x[:, i]
    and x[..., i, j]); k is None where the index has no such form."""
    n = 0
    while n < len(index) and (_whole(index[n]) or index[n] is Ellipsis):
        n += 1
    head, rest = index[:n], index[n:]
    if head.count(Ellipsis) > 1:
        return None, rest
    k = ndim - len(rest) if Ellipsis in head else len(head)
    return (k if len(head) - (Ellipsis in head) <= k <= ndim else None), rest


def _scalar_index(eqn, args, shape):
    """For an index that is 0-d integer arrays only, after k axes taken whole (x[i],
    x[i, j], x[:, i] at a step's i): (k, the index code), each checked against its axis as
    NumPy checks it (_row: IndexError, and the NumPy code reruns); None for any other
    index."""
    arrays = args[1:]
    k, index = _leading_whole_axes(tuple(eqn.params["index"]), len(shape))
    if not (arrays and k is not None and all(type(i).__name__ == "Slot" for i in index)
            and [i.i for i in index] == list(range(len(arrays)))
            and k + len(arrays) <= len(shape)
            and all(a.dtype.kind == "i" and a.scalar and not a.literal for a in arrays)):
        return None
    return k, ", ".join([":"] * k + [f"_row({a.code}, {int(n)})"
                                     for a, n in zip(arrays, shape[k:])])


@rule(st.getitem_p)
def _getitem(eqn, args, outs):
    x, out = args[0], eqn.outvars[0]
    scalar = _scalar_index(eqn, args, x.shape) if len(args) > 1 else None
    if scalar is not None:
        return [f"{outs[0]} = {x.code}[{scalar[1]}]"]
    if len(args) > 1:
        at = _array_index(eqn, args, tuple(x.shape))
        _check_layout(at, out)
        code = at.view(x.code)
        if at.picked:
            rest = tuple(a[1] for a in at.rest)
            code = f"_take{len(at.picked)}({_moved(code, at.order())}, {at.flat()})"
            if len(at.lead) != 1:
                code = f"{code}.reshape({at.lead + rest})"
            code = _moved(code, at.moved())
        return [f"{outs[0]} = {code}"]
    index = tuple(eqn.params["index"])
    if x.scalar:  # x[()], x[...], x[None]: no element is selected, only axes added
        return _filled(outs[0], out, x.code)
    if not out.shape and (Ellipsis in index or None in index):
        raise Unsupported("an index giving a 0-d array through ... or None")
    return [f"{outs[0]} = {x.code}[{index_code(index)}]"]


@rule(st.scatter_add_p)
def _scatter_add(eqn, args, outs):
    g, out = args[0], eqn.outvars[0]
    index, shape = tuple(eqn.params["index"]), tuple(eqn.params["shape"])
    o = outs[0]
    zeros = [f"{o} = np.zeros({shape}, {dtype_code(out.dtype)})"] if not shape or \
        math.prod(shape) > nests.SMALL else nests.filled(o, out, literal_code(0, out.dtype))
    scalar = _scalar_index(eqn, args, shape) if len(args) > 1 else None
    if scalar is not None:
        k, code = scalar
        if tuple(g.shape) == shape[:k] + shape[k + len(args) - 1:]:  # no index repeats
            return [*zeros, *nests.store(f"{o}[{code}]", g.code, tuple(g.shape), o)]
    if len(args) > 1:  # the gather's steps undone in reverse order, into a view of out
        at = _array_index(eqn, args, shape)
        _check_layout(at, g)
        rest = tuple(a[1] for a in at.rest if not a[2])  # None's axes are not out's
        view = at.view(outs[0], nones=False)
        if not at.picked:  # each position written once: stored
            value = g.code
            if tuple(g.shape) != rest:
                value = (_one_element(g.code, len(g.shape)) if not rest
                         else f"np.ascontiguousarray({g.code}).reshape({rest})")
            return [*zeros, *nests.store(view, value, rest, outs[0])]
        back = tuple(int(k) for k in np.argsort(at.moved()))
        rows = (math.prod(at.lead),) + rest
        values = f"np.ascontiguousarray({_moved(g.code, back)}).reshape({rows})"
        return [*zeros, f"_scatter{len(at.picked)}({_moved(view, at.order(nones=False))}, "
                       f"{values}, {at.flat()})"]
    if not shape:  # the one element of g (x[None] and x[()] of a 0-d x)
        return [f"{o} = " + (g.code if g.scalar else _one_element(g.code, len(g.shape)))]
    # out[index] = g, with the axes that None adds to g taken out of both sides.
    kept = tuple(i for i in index if i is not None)
    target = np.empty(shape, bool)[kept].shape
    value = g.code
    if tuple(g.shape) != target:
        value = (_one_element(g.code, len(g.shape)) if not target
                 else f"np.ascontiguousarray({g.code}).reshape({target})")
    code = index_code(kept)  # numba indexes no array with a lone ...: the whole of it
    return [*zeros, *nests.store(o if code == "..." else f"{o}[{code}]", value, target, o)]


@rule(st.scatter_set_p)
def _scatter_set(eqn, args, outs):
    """x.at[index].set(v) with a static index: a copy of x with v written (v a scalar, or
    of the written part's shape up to axes of length 1); an index read from an array (where
    a position named twice needs NumPy's rule) is not written here."""
    x, v, out = args[0], args[1], eqn.outvars[0]
    if len(args) > 2:
        raise Unsupported("scatter_set at an index read from an array")
    if v.dtype != out.dtype and not v.literal:
        raise Unsupported(f"scatter_set of {v.dtype} into {out.dtype}")
    value = literal_code(v.value, out.dtype) if v.literal else v.code
    index = tuple(eqn.params["index"])
    if x.scalar:  # x.at[()].set(v): v itself
        return [f"{outs[0]} = " + (value if v.scalar else _one_element(value, len(v.shape)))]
    kept = tuple(i for i in index if i is not None)
    target = np.empty(x.shape, bool)[kept].shape
    if not v.scalar and tuple(v.shape) != target:
        if math.prod(v.shape) != math.prod(target):
            raise Unsupported("scatter_set of a value broadcast to the written part")
        value = (_one_element(value, len(v.shape)) if not target
                 else f"np.ascontiguousarray({value}).reshape({target})")
    return [f"{outs[0]} = {x.code}.copy()",
            *nests.store(f"{outs[0]}[{index_code(kept)}]", value, target, outs[0],
                         scalar=v.scalar)]


@rule(st.concatenate_p)
def _concatenate(eqn, args, outs):
    out = eqn.outvars[0]
    axis = int(eqn.params["axis"]) % len(out.shape)
    if math.prod(out.shape) <= nests.SMALL and all(
            not a.literal and a.dtype == out.dtype for a in args):
        return nests.concatenate(outs[0], out, args, [a.code for a in args], axis)
    return [f"{outs[0]} = np.concatenate(({', '.join(a.code for a in args)},), "
            f"axis={int(eqn.params['axis'])})"]


@rule(st.stack_p)
def _stack(eqn, args, outs):
    axis = int(eqn.params["axis"])
    if all(a.scalar for a in args):
        return [f"{outs[0]} = np.array(({', '.join(a.code for a in args)},))"]
    return [f"{outs[0]} = np.stack(({', '.join(a.code for a in args)},), axis={axis})"]


@rule(st.split_p)
def _split(eqn, args, outs):
    x, axis = args[0], int(eqn.params["axis"])
    lead, lines, start = ":, " * axis, [], 0
    for name, size in zip(outs, eqn.params["sizes"]):
        lines.append(f"{name} = {x.code}[{lead}{start}:{start + int(size)}]")
        start += int(size)
    return lines


@rule(st.unstack_p)
def _unstack(eqn, args, outs):
    x, axis = args[0], int(eqn.params["axis"])
    lead = ":, " * axis
    return [f"{name} = {x.code}[{lead}{i}]" for i, name in enumerate(outs)]


def _reduced_axes(eqn, x):
    axis = eqn.params["axis"]
    return tuple(range(len(x.shape))) if axis is None else tuple(sorted(axis))


_PAIRWISE_BLOCK = 128  # NumPy's pairwise summation block


@rule(st.sum_p)
def _sum(eqn, args, outs):
    x, out = args[0], eqn.outvars[0]
    axes = _reduced_axes(eqn, x)
    if x.scalar or not axes:
        return [f"{outs[0]} = {x.code}"]
    if (x.dtype.kind in "fc" and x.dtype.itemsize < (8 if x.dtype.kind == "f" else 16)
            and math.prod(x.shape[a] for a in axes) > _PAIRWISE_BLOCK):
        # numba adds one element at a time, NumPy pairwise in blocks of 128: in float32
        # the sequential error grows with the count (1e6 ones after 1e8: 1% off)
        raise Unsupported(f"a sum of more than {_PAIRWISE_BLOCK} {x.dtype} elements")
    if x.dtype.kind == "f" and out.dtype == x.dtype:
        return nests.reduction(outs[0], out, x, x.code, axes, "sum")
    if len(axes) == len(x.shape):
        return _filled(outs[0], out, f"np.sum({x.code})")
    code = x.code
    for a in reversed(axes):
        code = f"np.sum({code}, axis={a})"
    if eqn.params["keepdims"]:
        code = f"np.ascontiguousarray({code}).reshape({tuple(out.shape)})"
    return [f"{outs[0]} = {code}"]


@rule(st.max_p, st.min_p)
def _max_min(eqn, args, outs):
    x, out = args[0], eqn.outvars[0]
    which = "max" if eqn.prim is st.max_p else "min"
    axes = _reduced_axes(eqn, x)
    if x.scalar or not axes:
        return [f"{outs[0]} = {x.code}"]
    if any(x.shape[a] == 0 for a in axes):
        raise Unsupported(f"a {which} over an empty axis")
    if x.dtype.kind == "f" and out.dtype == x.dtype:
        return nests.reduction(outs[0], out, x, x.code, axes, which)
    kept = [a for a in range(len(x.shape)) if a not in axes]
    rows = int(np.prod([x.shape[a] for a in kept], dtype=np.int64))
    perm = tuple(kept) + axes
    flat = f"np.ascontiguousarray(np.transpose({x.code}, {perm})).reshape(({rows}, -1))"
    code = f"_rows_extreme({flat}, {which == 'max'})"
    if not out.shape:
        return [f"{outs[0]} = {code}[0]"]
    return [f"{outs[0]} = {code}.reshape({tuple(out.shape)})"]


@rule(red.all_p, red.any_p)
def _all_any(eqn, args, outs):
    """all / any over every axis (a 0-d bool: a scalar in the kernel); x is true where
    nonzero, NaN included, as in NumPy."""
    x, which = args[0], eqn.prim.name
    if eqn.params["keepdims"] and x.shape:
        raise Unsupported(f"{which} with keepdims")
    if x.dtype.kind not in "biuf":
        raise Unsupported(f"{which} of {x.dtype}")
    if x.scalar:
        return [f"{outs[0]} = " + _truth(x)]
    if len(_reduced_axes(eqn, x)) != len(x.shape):
        raise Unsupported(f"{which} over some of the axes")
    if x.elements is not None:  # all(stack([a, b])): a and b, without the array
        return [f"{outs[0]} = " + (" & " if which == "all" else " | ").join(
            _truth(e) for e in x.elements)]
    return [f"{outs[0]} = np.{which}({x.code})"]


def _truth(x):
    """A scalar's truth as NumPy's all/any read it: nonzero (NaN included)."""
    return x.code if x.dtype.kind == "b" else f"({x.code} != 0)"


def _stack_only_reduced(eqn, reader):
    """Whether eqn stacks scalars (not literals) into an array that only `reader`, an all or
    any over every axis, reads: the reduction can read the scalars themselves. Each is of the
    stack's dtype or bool, so the cast in stacking keeps its truth (a float64 1e-50 cast to
    float32 would not)."""
    out = eqn.outvars[0]
    return (eqn.prim is st.stack_p and reader is not None
            and reader.prim in (red.all_p, red.any_p) and not reader.params["keepdims"]
            and all(not isinstance(v, Literal) and not v.shape
                    and (v.dtype == out.dtype or np.dtype(v.dtype).kind == "b")
                    for v in eqn.invars))


def _real_float(args, who):
    for a in args:
        if a.dtype.kind != "f":
            raise Unsupported(f"{who} of {a.dtype} in the compiled loop")


def rows_times_matrix(eqn):
    """Whether a matmul is a stack of rows a [..., M, K] times one matrix b [K, N], of one
    dtype and more than nests.SMALL multiply-adds: one BLAS product of a's rows, reshaped
    (a GRU's [16, 1, 64] hidden state times its [64, 192] weights)."""
    if eqn.prim is not la.matmul_p or any(isinstance(v, Literal) for v in eqn.invars):
        return False
    a, b, out = eqn.invars[0], eqn.invars[1], eqn.outvars[0]
    return (len(a.shape) > 2 and len(b.shape) == 2 and a.dtype == b.dtype == out.dtype
            and a.dtype.kind == "f" and math.prod(out.shape) * a.shape[-1] > nests.SMALL)


@rule(la.matmul_p)
def _matmul(eqn, args, outs):
    _real_float(args, "matmul")
    a, b, out = args[0], args[1], eqn.outvars[0]
    if rows_times_matrix(eqn):
        rows = f"np.ascontiguousarray({a.code}).reshape(({math.prod(a.shape[:-1])}, " \
               f"{a.shape[-1]}))"
        return [f"{outs[0]} = ({rows} @ np.ascontiguousarray({b.code}))"
                f".reshape({tuple(out.shape)})"]
    nest = a.shape and b.shape and a.dtype == b.dtype == out.dtype
    batched = any(len(a.shape) > 2 for a in args)
    if nest and (batched or math.prod(out.shape) * a.shape[-1] <= nests.SMALL):
        return nests.matmul(outs[0], out, a, a.code, b, b.code)  # numba's @ has no batch axes
    if batched:
        raise Unsupported("a batched matmul of mixed dtypes")
    return [f"{outs[0]} = np.ascontiguousarray({args[0].code}) @ "
            f"np.ascontiguousarray({args[1].code})"]


@rule(la.vdot_p)
def _vdot(eqn, args, outs):
    _real_float(args, "vdot")
    x, y = args
    if x.scalar and y.scalar:
        return [f"{outs[0]} = {x.code} * {y.code}"]
    return [f"{outs[0]} = np.vdot(np.ravel({x.code}), np.ravel({y.code}))"]


def _matrices(eqn, args, who):
    """The batch shape of an equation on matrices a [..., n, n] (and right-hand sides
    [..., n, k]): their batch axes broadcast, as the impls' _batch_broadcast does; () for
    one matrix each. Unsupported for a vector, mixed dtypes, or an empty stack or matrix."""
    _real_float(args, who)
    if len({a.dtype for a in args}) > 1:
        raise Unsupported(f"{who} of mixed dtypes")
    if any(len(a.shape) < 2 for a in args):
        raise Unsupported(f"{who} of a vector")
    try:
        batch = tuple(np.broadcast_shapes(*(a.shape[:-2] for a in args)))
    except ValueError:
        raise Unsupported(f"{who} of batch axes that do not broadcast") from None
    out = eqn.outvars[0]
    if batch and (0 in out.shape or tuple(out.shape) != batch + tuple(args[-1].shape[-2:])):
        raise Unsupported(f"{who} of {[list(a.shape) for a in args]} to {list(out.shape)}")
    return batch


def _stack(a, batch):
    """The code of a [..., r, c] as a C-contiguous [B, r, c] stack, its batch axes broadcast
    to `batch` first."""
    full = batch + tuple(a.shape[-2:])
    code = a.code if tuple(a.shape) == full else f"np.broadcast_to({a.code}, {full})"
    return f"np.ascontiguousarray({code}).reshape({(math.prod(batch),) + full[-2:]})"


def _linalg_lines(eqn, args, outs, who, one, stack, extra=""):
    """One matrix (or one right-hand side): `one(codes)`; a batch of them: the kernel
    function `stack` over their [B, n, n] (and [B, n, k]) stacks, reshaped back to the
    graph's shape. `extra` is the code of further arguments."""
    batch = _matrices(eqn, args, who)
    if not batch:
        return [f"{outs[0]} = {one([a.code for a in args])}"]
    code = f"{stack}({', '.join(_stack(a, batch) for a in args)}{extra})"
    return [f"{outs[0]} = {code}.reshape({tuple(eqn.outvars[0].shape)})"]


@rule(dec.cholesky_p)
def _cholesky(eqn, args, outs):
    return _linalg_lines(eqn, args, outs, "cholesky",
                         lambda c: f"np.linalg.cholesky(np.ascontiguousarray({c[0]}))",
                         "_cholesky_stack")


@rule(dec.solve_p)
def _solve(eqn, args, outs):
    return _linalg_lines(eqn, args, outs, "solve", lambda c: f"_solve({c[0]}, {c[1]})",
                         "_solve_stack")


@rule(dec.triangular_solve_p)
def _triangular_solve(eqn, args, outs):
    flags = f", {bool(eqn.params['lower'])}, {bool(eqn.params['unit_diagonal'])}"
    return _linalg_lines(eqn, args, outs, "triangular_solve",
                         lambda c: f"_triangular_solve({c[0]}, {c[1]}{flags})",
                         "_triangular_solve_stack", flags)


# --- the PRNG (ops/prng.py's Threefry draws, categorical's argmax) and fixed_indices ------------
# native_prng.py's functions, which compute what the NumPy impls compute (integer arithmetic,
# and float bits assembled exactly as prng.flat_unit_floats does): equal bit for bit.
def _keys(key, lead):
    """A key argument [..., 2] as the functions read keys: [L, 2], C-contiguous, uint32."""
    if key.literal or key.dtype != np.uint32 or not key.shape or key.shape[-1] != 2:
        raise Unsupported(f"a PRNG key of {key.dtype}{list(key.shape)}")
    code = key.code
    if tuple(key.shape[:-1]) != tuple(lead):
        code = f"np.broadcast_to({code}, {tuple(lead) + (2,)})"
    return f"np.ascontiguousarray({code}).reshape(({math.prod(lead)}, 2))"


def _rows_shaped(code, shape):
    """An [L, n] result in the graph's shape (a scalar for a 0-d one)."""
    return f"{code}.reshape({tuple(shape)})" if shape else f"{code}[0, 0]"


@rule(prng.split_p)
def _random_split(eqn, args, outs):
    key, shape = args[0], tuple(eqn.params["shape"])
    lead = key.shape[:-1]
    return [f"{outs[0]} = _prng_split({_keys(key, lead)}, {math.prod(shape)})"
            f".reshape({lead + shape + (2,)})"]


@rule(prng.bits_p)
def _random_bits(eqn, args, outs):
    key, shape, width = args[0], tuple(eqn.params["shape"]), int(eqn.params["width"])
    lead = key.shape[:-1]
    code = f"_prng_bits{64 if width == 64 else 32}({_keys(key, lead)}, {math.prod(shape)})"
    if width in (8, 16):
        code = f"{code}.astype(np.uint{width})"
    elif width not in (32, 64):
        raise Unsupported(f"random_bits of width {width}")
    return [f"{outs[0]} = {_rows_shaped(code, lead + shape)}"]


@rule(prng.uniform_p)
def _random_uniform(eqn, args, outs):
    key, shape, dtype = args[0], tuple(eqn.params["shape"]), np.dtype(eqn.params["dtype"])
    if dtype not in (np.float32, np.float64):
        raise Unsupported(f"random_uniform of {dtype}")
    lead = key.shape[:-1]
    code = f"_prng_unit{dtype.itemsize * 8}({_keys(key, lead)}, {math.prod(shape)})"
    return [f"{outs[0]} = {_rows_shaped(code, lead + shape)}"]


@rule(prng.fold_in_p)
def _random_fold_in(eqn, args, outs):
    key, data = args
    if data.literal:
        try:  # what the impl's asarray(data).astype(uint32) makes of it
            word = int(np.asarray(data.value).astype(np.uint32))
        except (OverflowError, TypeError, ValueError):
            raise Unsupported(f"fold_in of {data.value!r}") from None
        lead, words = key.shape[:-1], f"np.full({math.prod(key.shape[:-1])}, np.uint32({word}))"
    else:
        if data.dtype.kind not in "iu":
            raise Unsupported(f"fold_in of {data.dtype} data")
        try:
            lead = tuple(np.broadcast_shapes(key.shape[:-1], data.shape))
        except ValueError:
            raise Unsupported("fold_in of data that does not broadcast with the keys") from None
        n = math.prod(lead)
        words = (f"np.full({n}, {data.code})" if data.scalar else
                 f"np.ascontiguousarray(np.broadcast_to({data.code}, {lead})).reshape({n})")
        words = f"{words}.astype(np.uint32)"
    return [f"{outs[0]} = _prng_fold_in({_keys(key, lead)}, {words}).reshape({lead + (2,)})"]


@rule(prng.shuffle_p)
def _random_shuffle(eqn, args, outs):
    key, shape = args[0], tuple(eqn.params["shape"])
    if len(shape) != 1:
        raise Unsupported(f"random_shuffle of shape {shape} (the rule permutes one axis)")
    lead, n = key.shape[:-1], shape[0]
    return [f"{outs[0]} = _prng_shuffle({_keys(key, lead)}, {n}, {prng.shuffle_rounds(n)})"
            f".reshape({lead + shape})"]


@rule(prng.argmax_p)
def _argmax(eqn, args, outs):
    x, out = args[0], eqn.outvars[0]
    if x.scalar or x.dtype.kind not in "fiu":
        raise Unsupported(f"argmax of {x.dtype}{list(x.shape)}")
    axis = int(eqn.params["axis"]) % len(x.shape)
    if x.shape[axis] == 0:
        raise Unsupported("an argmax over an empty axis")
    kept = tuple(a for a in range(len(x.shape)) if a != axis)
    code = x.code if kept + (axis,) == tuple(range(len(x.shape))) else \
        f"np.transpose({x.code}, {kept + (axis,)})"
    rows = math.prod(x.shape[a] for a in kept)
    code = f"_argmax_rows(np.ascontiguousarray({code}).reshape(({rows}, {x.shape[axis]})))"
    return [f"{outs[0]} = " + (f"{code}.reshape({tuple(out.shape)})" if out.shape
                              else f"{code}[0]")]


_INDEX_MODES = {"raise": 0, "clip": 1, "wrap": 2}


@rule(gathers.fixed_indices_p)
def _fixed_indices(eqn, args, outs):
    idx, out = args[0], eqn.outvars[0]
    size, mode = int(eqn.params["size"]), eqn.params["mode"]
    if (idx.literal or idx.scalar or idx.dtype.kind != "i" or out.dtype != idx.dtype
            or not 0 < size <= np.iinfo(idx.dtype).max or mode not in _INDEX_MODES):
        raise Unsupported(f"fixed_indices of {idx.dtype}{list(idx.shape)} (size {size}, "
                          f"mode {mode!r})")
    n = math.prod(idx.shape)
    return [f"{outs[0]} = _fixed_indices(np.ascontiguousarray({idx.code}).reshape({n}), "
            f"{size}, {_INDEX_MODES[mode]}).reshape({tuple(idx.shape)})"]


def statements(eqn, args, outs, scope=None, fuse=False):
    """The kernel statements computing one equation into the names `outs`; a nested scan
    needs the `scope` that names the values of its loop (without one it is Unsupported).
    With `fuse`, a fusible rule's nest comes back as a nests.Fused (Fusion)."""
    if _is_scan(eqn) or _is_while(eqn):
        if scope is None:
            raise Unsupported(f"{eqn.prim.name} (no numba rule)")
        return (scope.scan if _is_scan(eqn) else scope.while_loop)(eqn, args, outs)
    fn = RULES.get(eqn.prim)
    if fn is None:
        lines = elementwise(eqn, args, outs, fuse)
    elif eqn.prim in FUSIBLE:
        lines = fn(eqn, args, outs, fuse)
    else:
        lines = fn(eqn, args, outs, scope) if eqn.prim in SCOPED else fn(eqn, args, outs)
    if lines is None:
        raise Unsupported(f"{eqn.prim.name} (no numba rule)")
    return lines


_INDEX_MAPS = (st.broadcast_to_p, st.reshape_p)  # they take a source's reads of its shape


def _fusible(eqn):
    return not (_is_scan(eqn) or _is_while(eqn)) and len(eqn.outvars) == 1 and \
        (eqn.prim not in RULES or eqn.prim in FUSIBLE)


def logistic_chains(eqns):
    """(equation, chain) for each sigmoid and softplus of a float array in `eqns`: the chain
    its input x, the value x negates, the value that negates, ... (Fusion shares exp(-|x|)
    along it)."""
    negated = {e.outvars[0]: e.invars[0] for e in eqns
               if e.prim is ew.neg and not isinstance(e.invars[0], Literal)}
    for e in eqns:
        x = e.invars[0] if e.prim in LOGISTIC else None
        if x is None or isinstance(x, Literal) or x.dtype.kind != "f" or not x.shape:
            continue
        chain = [x]
        while chain[-1] in negated:
            chain.append(negated[chain[-1]])
        yield e, chain


class Fusion:
    """Writes one graph's equations (in order, through `statements`), each elementwise value
    that exactly one equation reads, an elementwise one of its shape, computed in that
    reader's nest instead of in an array of its own (nests.Fused). `eqns`: the graph's
    equations; `kept`: values read anywhere else (the graph's outputs, stored rows), never
    fused. Delaying the work to its reader is exact: every kernel name is assigned once in
    a step (a carry only at its end), and no statement writes into an array it did not
    make, so the operands still hold their values there. Work whose reader cannot take it
    (not a nest after all) is written as its own nest just before that reader; `flush` writes
    what no equation here read.

    A broadcast or a reshape takes work of another shape that only reads elements (another
    broadcast, reshape or fill: `reads_only`), its positions re-indexed, so that a chain of
    them is one read; anything else is fused only into a reader of its own shape.

    Elementwise work of more than nests.STORED_MIN elements that several equations read (or
    that is kept) is fused the same way, `stored` (nests.Fused): its first reader's nest
    computes it and writes its array, one pass instead of two; the others read the array.
    Until that nest is written (the reader's own work may be pending too, for its reader),
    `holder` says which pending work writes the array, and an equation reading the array has
    that work written before it."""

    def __init__(self, eqns, kept):
        uses = {}
        for e in eqns:
            for v in e.invars:
                if not isinstance(v, Literal):
                    uses[v] = uses.get(v, 0) + 1
        kept = set(kept)
        self.once = {v for v, k in uses.items() if k == 1 and v not in kept}
        self.reader = {v: e for e in eqns for v in e.invars if v in self.once}
        self.elements = {}  # a stack of scalars only reduced: var -> its elements' Args
        self.shared = {v for v, k in uses.items() if (k > 1 or v in kept)
                       and math.prod(v.shape) > nests.STORED_MIN}
        self.pending = {}  # var -> nests.Fused, in the order made
        self.holder = {}  # a stored var -> the pending var whose work writes its array
        self._logistic_sources(eqns)
        self.shared -= set(self.source.values())  # _share reads their arrays: written early

    def _logistic_sources(self, eqns):
        """sigmoid and softplus of a value and of its negations (a logistic regression's
        log-likelihood and its gradient: softplus(z), softplus(-z), sigmoid(z), sigmoid(-z))
        each compute exp(-|x|), the same for x and -x, and softplus its log1p: where two or
        more read one source, both are computed once, into arrays (`self.exp`), and each
        reads them (native_kernels' `_from` forms, the same arithmetic). The source: the
        first value of x's chain of negations that has an array of its own (not fused into
        its one reader), which the sharing reads."""
        self.source, count = {}, {}
        for e, chain in logistic_chains(eqns):
            held = [v for v in chain if v not in self.once]
            if held:
                self.source[e.invars[0]] = held[-1]
                count[held[-1]] = count.get(held[-1], 0) + 1
        self.source = {v: x for v, x in self.source.items() if count[x] > 1}
        self.exp = {}  # source -> (exp array's name, log1p array's name)
        self.code = {}  # var -> its code, as read by an equation written so far

    def __call__(self, eqn, args, outs, scope=None):
        lines = []
        for v in eqn.invars:  # arrays read here, written by pending work not read here
            held_by = None if isinstance(v, Literal) else self.holder.get(v)
            if held_by is not None and held_by not in eqn.invars:
                lines += self._written(self.pending.pop(held_by))
        for a, v in zip(args, eqn.invars):
            if not a.literal and a.fused is None and v not in self.pending:
                self.code.setdefault(v, a.code)
            if not a.literal and v in self.elements:
                a.elements = self.elements.pop(v)
        if _stack_only_reduced(eqn, self.reader.get(eqn.outvars[0])):
            for v in eqn.invars:  # the scalars in their names before the reduction reads them
                if v in self.pending:
                    lines += self._written(self.pending.pop(v))
            self.elements[eqn.outvars[0]] = args
            return lines
        if eqn.prim in LOGISTIC and eqn.invars[0] in self.source:
            x = self.source[eqn.invars[0]]
            lines += self._share(x, outs[0], eqn.prim is ew.softplus_p)
            args[0].exp = tuple(self.exp[x])
        takes = _fusible(eqn)
        for a, v in zip(args, eqn.invars):
            work = None if a.literal else self.pending.pop(v, None)
            if work is None:
                continue
            if takes and (tuple(v.shape) == tuple(eqn.outvars[0].shape) or
                          eqn.prim in _INDEX_MAPS and work.reads_only and not work.stored):
                a.fused = work
            else:
                lines += self._written(work)
        v = eqn.outvars[0] if takes else None
        fuse = takes and (v in self.once or v in self.shared)
        out = statements(eqn, args, outs, scope, fuse)
        if any(a.fused is not None and not a.fused.taken for a in args):
            for a in args:  # the rule wrote no nest: each fused operand apart, and again
                if a.fused is not None:
                    lines += self._written(a.fused)
                    a.fused = None
            out = statements(eqn, args, outs, scope, fuse)
        if isinstance(out, nests.Fused):
            if v in self.shared:
                out.stored = True
                out.held.append(v)
            for held in out.held:
                self.holder[held] = v
            self.pending[v] = out
            return lines
        for a in args:  # a nest written here: the stored work it took is in memory now
            if a.fused is not None:
                self._stored(a.fused)
        return lines + out

    def _stored(self, work):
        for held in work.held:
            self.holder.pop(held, None)

    def _written(self, work):
        """The lines of work written as its own nest (the arrays it stores are then written)."""
        self._stored(work)
        return work.lines()

    def _share(self, x, name, log1p):
        """The lines computing exp(-|x|) into an array, and (`log1p`) its log1p, where not yet
        written."""
        lines = []
        if x not in self.exp:
            self.exp[x] = [f"{name}_x", None]
            src = Arg(self.code[x], x)
            lines += nests.elementwise(f"{name}_x", x, [src], [src.code],
                                       lambda c: f"np.exp(-np.abs({c[0]}))")
        e = self.exp[x][0]
        if log1p and self.exp[x][1] is None:
            self.exp[x][1] = f"{name}_l"
            lines += nests.elementwise(f"{name}_l", x, [Arg(e, x)], [e],
                                       lambda c: f"np.log1p({c[0]})")
        return lines

    def flush(self):
        lines = [s for work in self.pending.values() for s in self._written(work)]
        self.pending.clear()
        return lines


# --- a scan inside the kernel: the loop that defines it -----------------------------------------
# (The scan primitive lives above this layer; it is known by its name and its params.)
# A scan loop run at most this often a kernel call may be a function of its own
# (Scope.loop_function): a call passes every array it reads, which costs at every step of
# an enclosing loop that runs it often.
FUNCTION_RUNS = 16
_SCAN_PARAMS = {"body", "length", "reverse", "num_carry", "num_xs", "interpret", "sum_carries",
                "compiler", "_lin"}


_WHILE_PARAMS = {"cond", "body", "num_carry", "num_cond_consts", "max_steps"}


def _is_scan(eqn):
    return eqn.prim.name == "scan" and "body" in eqn.params


def _is_while(eqn):
    return eqn.prim.name == "while_loop" and set(eqn.params) == _WHILE_PARAMS


class Scope:
    """Writes graphs and the scans in them as kernel statements, a scan as the loop that
    defines it (`for t in range(length)`, its carries kernel variables, each x read per step,
    each y written into an array made before the loop), its body's equations by the same
    rules, nested scans recursively. Names every value it makes (`prefix` keeps them apart
    from the caller's names) and records its dtype and rank in `expected`, which native.py
    compares with numba's typing. No schedule, batching or reordering: a gradient
    accumulator sums in the loop's order, as scan's Python loop does."""

    def __init__(self, prefix="", functions=None):
        self.prefix, self.expected, self._count = prefix, {}, 0
        # `functions`: None writes each scan's loop where the scan is; a list gets each
        # distinct scan loop that runs at most FUNCTION_RUNS times a call as a function of
        # its own (its source lines), called there (loop_function says why).
        self.functions, self._loops, self.loop_calls = functions, {}, 0
        self._runs = 1  # how often the code being written runs a call (None: unknown)

    @contextlib.contextmanager
    def _repeated(self, times):
        """Code written inside: it runs `times` (None: unknown) times as often."""
        runs = self._runs
        self._runs = None if runs is None or times is None else runs * times
        try:
            yield
        finally:
            self._runs = runs

    def new(self, v, kind="v"):
        """A fresh name for the value of var v (each is assigned in one place, but a carry,
        assigned before its loop and at the end of each step)."""
        name = f"{self.prefix}{kind}{self._count}"
        self._count += 1
        self.expected[name] = (np.dtype(v.dtype), len(v.shape))
        return name

    def step_aliases(self, carries, invars, indent):
        """(names, lines): each carry bound to a fresh name at the top of a step, for the
        body to read. numba rebuilds SSA form for a variable assigned in more than one
        place (a carry), and finds the value a use reads by walking up the dominator tree,
        recursively: a carry read after a few hundred nests exceeded Python's recursion
        limit ("maximum recursion depth exceeded"). A name assigned once needs no walk."""
        names = [self.new(v, "s") for v in invars]
        return names, [f"{indent}{n} = {c}" for n, c in zip(names, carries)]

    def graph(self, graph, in_codes, const_codes, indent):
        """(lines, the code of each output): graph's equations written at `indent`; a code
        is (a name, whether it is fresh: computed here, no view), or (a Literal, True)."""
        env = dict(zip(graph.invars, in_codes))
        env.update(zip(graph.constvars, const_codes))
        fresh, lines = set(), []
        write = Fusion(graph.eqns, graph.outvars)
        for eqn in graph.eqns:
            args = [Arg(None if isinstance(a, Literal) else env[a], a) for a in eqn.invars]
            outs = [self.new(v) for v in eqn.outvars]
            lines += [indent + s for s in write(eqn, args, outs, self)]
            if eqn.prim.name not in VIEWS:
                fresh.update(outs)
            env.update(zip(eqn.outvars, outs))
        lines += [indent + s for s in write.flush()]
        return lines, [(v, True) if isinstance(v, Literal) else (env[v], env[v] in fresh)
                       for v in graph.outvars]

    def scan(self, eqn, args, outs, indent="", in_place=False):
        """The statements of a scan equation: its outputs `outs` (carries, then ys); its loop
        in place, or (`functions`, not `in_place`) a call of a loop function."""
        p = eqn.params
        if set(p) - _SCAN_PARAMS:
            raise Unsupported(f"a scan with {sorted(set(p) - _SCAN_PARAMS)}")
        if p.get("interpret") or p.get("compiler") not in ("numba", "auto"):
            raise Unsupported("a nested scan that asked for "
                              + ("the interpreter" if p.get("interpret") else
                                 f"compiler={p.get('compiler', 'numpy')!r}"))
        body, T, nc, nx = p["body"], int(p["length"]), p["num_carry"], p["num_xs"]
        init, xs, consts = args[:nc], args[nc:nc + nx], args[nc + nx:]
        if any(a.literal for a in xs):
            raise Unsupported("a literal xs")
        if (self.functions is not None and not in_place and self._runs is not None
                and self._runs <= FUNCTION_RUNS
                and not any(a.fused or a.elements for a in args)):
            return self.loop_function(eqn, args, outs, indent)
        carries, ys = outs[:nc], outs[nc:]
        lines = [f"{indent}{name} = {owned(Literal(a.value) if a.literal else a.code, False, v)}"
                 for name, a, v in zip(carries, init, eqn.outvars)]
        lines += [f"{indent}{name} = np.empty({tuple(v.shape)}, "
                  f"{dtype_code(v.dtype)})" for name, v in zip(ys, eqn.outvars[nc:])]
        t = f"{self.prefix}t{self._count}"
        self._count += 1
        lines.append(f"{indent}for {t} in " + (f"range({T} - 1, -1, -1):" if p["reverse"]
                                               else f"range({T}):"))
        inner = indent + "    "
        x_names = [self.new(v, "x") for v in body.invars[nc:nc + nx]]
        lines += [f"{inner}{n} = {a.code}[{t}]" for n, a in zip(x_names, xs)]
        now, alias_lines = self.step_aliases(carries, body.invars[:nc], inner)
        with self._repeated(T):
            body_lines, results = self.graph(body, now + x_names, [a.code for a in consts],
                                             inner)
        lines += alias_lines
        lines += body_lines
        for name, (code, _), v in zip(ys, results[nc:], eqn.outvars[nc:]):
            value = literal_code(code.value, v.dtype) if isinstance(code, Literal) else code
            shape = () if isinstance(code, Literal) else tuple(v.shape[1:])
            lines += [inner + s for s in nests.store(f"{name}[{t}]", value, shape, name)]
        if nc:
            lines.append(f"{inner}{next_carries(carries, now, results, eqn.outvars)}")
        return lines

    def loop_function(self, eqn, args, outs, indent):
        """The scan as a call of a function holding its loop, one function for all the scans
        of the same body, length, direction, literals and argument types. numba's compile
        time grows faster than a function's length (a jacfwd's fused kernel of 2,625 lines,
        four JVP scans of one body, took 102 s; 619 lines 8 s), and it compiles a function
        once however often it is called. A scan nested in its body is a function too where
        it runs at most FUNCTION_RUNS times a call (the PPO update's epochs and minibatches:
        its kernel compiled in 77 s, not 107); one in a longer loop stays in place, where
        the call would cost at every step (the adaptive ODE solver's, in a while_loop:
        10-20 % slower calls)."""
        p = eqn.params
        key = (p["body"], int(p["length"]), bool(p["reverse"]), p["num_carry"], p["num_xs"],
               tuple(("lit", type(a.value).__name__, repr(a.value)) if a.literal else
                     (a.dtype.str, a.shape) for a in args))
        name = self._loops.get(key)
        if name is None:
            # named before its body is written: a loop nested in it takes the next name
            name = self._loops[key] = f"_{self.prefix}loop{len(self._loops)}"
            inner = [a if a.literal else Arg(self.new(v, "p"), v)
                     for a, v in zip(args, eqn.invars)]
            results = [self.new(v) for v in eqn.outvars]
            lines = self.scan(eqn, inner, results, "    ", in_place=True)
            self.functions.append([
                "@numba.njit(cache=CACHE, nogil=True, error_model='numpy')",
                f"def {name}({', '.join(a.code for a in inner if not a.literal)}):",
                *nests.double_buffer_carries([
                    *nests.hoist_buffers(lines),
                    f"    return ({''.join(r + ', ' for r in results)})"]),
                "", ""])
        self.loop_calls += 1
        call = f"{name}({', '.join(a.code for a in args if not a.literal)})"
        return [f"{indent}{''.join(o + ', ' for o in outs)}= {call}" if outs else indent + call]

    def while_loop(self, eqn, args, outs, indent=""):
        """The statements of a while_loop equation (its outputs: the carries, then the trip
        count): cond run before each step, as while_loop's own loop runs it. Past max_steps
        the kernel raises ValueError, and the NumPy code reruns the call and raises
        while_loop's error."""
        p = eqn.params
        cond, body, nc, nq = p["cond"], p["body"], p["num_carry"], p["num_cond_consts"]
        init, q, k = args[:nc], args[nc:nc + nq], args[nc + nq:]
        carries, n = outs[:nc], outs[nc]
        if eqn.outvars[nc].dtype != np.int64:
            raise Unsupported(f"a while_loop counting in {eqn.outvars[nc].dtype}")
        lines = [f"{indent}{name} = {owned(Literal(a.value) if a.literal else a.code, False, v)}"
                 for name, a, v in zip(carries, init, eqn.outvars)]
        lines += [f"{indent}{n} = np.int64(0)", f"{indent}while True:"]
        inner = indent + "    "
        with self._repeated(None):
            cond_lines, (test,) = self.graph(cond, carries, [a.code for a in q], inner)
        test = literal_code(test[0].value, None) if isinstance(test[0], Literal) else test[0]
        lines += cond_lines + [f"{inner}if not {test}:", f"{inner}    break"]
        if p["max_steps"] is not None:
            lines += [f"{inner}if {n} == {int(p['max_steps'])}:",
                      f"{inner}    raise ValueError('while_loop: past max_steps')"]
        now, alias_lines = self.step_aliases(carries, body.invars[:nc], inner)
        with self._repeated(None):
            body_lines, results = self.graph(body, now, [a.code for a in k], inner)
        # n, like the carries, read only up here and assigned only at the end of the step
        n_next = f"{n}_next"
        lines += [f"{inner}{n_next} = {n} + 1"] + alias_lines + body_lines
        if nc:
            lines.append(f"{inner}{next_carries(carries, now, results, eqn.outvars)}")
        return lines + [f"{inner}{n} = {n_next}"]


def next_carries(carries, now, results, outvars):
    """The statement that ends a step: each carry bound to its next value, owned. A carry the
    body passes through unchanged (its next value is its own value this step: a constant's
    tangent in a JVP scan, say) keeps its array, which nothing writes into, instead of a copy
    at every step."""
    nexts = [alias if code == alias else owned(code, fresh, v)
             for alias, (code, fresh), v in zip(now, results, outvars)]
    return f"{', '.join(carries)}, = {', '.join(nexts)},"


def owned(code, fresh, v):
    """A value's code (a name, or a Literal) as a carry's or an output's value of var v: a
    literal typed as v; an array copied unless it is fresh (computed here, not a view): numba
    gives a variable one array type, so a carry must be a contiguous array of its own from
    its first value on, and an output must not share the caller's memory."""
    if isinstance(code, Literal):
        return literal_code(code.value, v.dtype)
    return code if fresh or not v.shape else f"{code}.copy()"

