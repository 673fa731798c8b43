"""Loop nests: how the numba rules write elementwise work, reductions and row stores on
arrays of static shape, as explicit `for` loops over scalars instead of NumPy calls.

Why: numba compiles each NumPy array function it meets (a broadcasting ufunc, `np.where`, a
sum over an axis, `a[t] = b`) as a generic implementation of its own, typed and optimised
anew in every process that has not cached the kernel. For a 20-line HMM step that was 40 s of
a first call, while the same step as loops over scalars compiles in a few seconds and runs
faster (no temporary arrays, no broadcasting machinery). Shapes are known when a kernel is
written, so the loops are plain `range`s.

What a nest computes is what the NumPy call computes, element by element, with the same
scalar function: numba's array ufuncs are its scalar ufuncs looped, a sum or a matmul adds
in the order of the elements from the zero NumPy's sum starts from (+0.0 on NumPy 2, read at
import), and max/min let NaN win as NumPy's do. (Which zero a max of +0.0s and -0.0s gives
is NumPy's SIMD lanes' choice, which differs between CPUs; a nest takes the first.) Each
element is computed into a named scalar, `<name>_e`, which native.py checks has the graph's
dtype (numba would otherwise cast it silently on the store). Only float (and complex and
bool) work is written this way: numba computes narrow integers in int64.

Imports nothing of scanlib's; numba only inside the kernels it writes.
"""

from __future__ import annotations

import collections
import math
import re

import numpy as np

ELEMENT = "_e"  # the suffix of a nest's element scalar (native.py checks its dtype)
# Elements of work read more than once, above which it is computed in its first reader's nest
# and stored there (Fused.stored): a pass over memory saved ([4, 1024, 32] arrays of a layer
# norm: 360 -> 130 us). Below it the array stays in the L1 cache, and the merged nests of an
# HMM's, a CTC's and a Holt-Winters' steps measured 2 % slower.
STORED_MIN = 4096
# The zero NumPy's sum of -0.0s gives, which is the zero its sums start from.
_ZERO = "-0.0" if np.signbit(np.add.reduce(np.array([-0.0, -0.0]))) else "0.0"
_NAME = re.compile(r"[A-Za-z_]\w*\Z")
_POSITION = re.compile(r"\b_i(\d+)\b")


def nestable(out, args):
    """Whether elementwise work giving var `out` from `args` (native_rules.Arg) is written
    as a nest: an array result, float, complex or bool, every array operand of the result's
    dtype (float, complex) or of one float dtype or bool (a comparison or logic). numba's
    array ufuncs loop its scalar ones, so the nest computes what they compute."""
    if not out.shape or out.dtype.kind not in "fcb":
        return False
    arrays = [a for a in args if not a.literal]
    if out.dtype.kind in "fc":
        return all(a.dtype == out.dtype for a in arrays)
    kinds = {a.dtype for a in arrays}
    return len(kinds) <= 1 and all(k.kind in "fb" for k in kinds)


def is_name(code):
    """Whether code is a plain name (not an expression)."""
    return bool(_NAME.match(code))


def _bound(name, args, codes):
    """(lines binding operand codes that are not plain names, the names to index)."""
    lines, names = [], []
    for k, (a, code) in enumerate(zip(args, codes)):
        if a.shape and not _NAME.match(code):
            lines.append(f"{name}_a{k} = {code}")
            code = f"{name}_a{k}"
        names.append(code)
    return lines, names


def element(code, shape, out_shape, index="_i"):
    """The element of an operand of `shape` at the nest's position over `out_shape`
    (NumPy's broadcasting: trailing axes align, a length-1 axis is read at 0)."""
    if not shape:
        return code
    return f"{code}[{', '.join(_broadcast_index(shape, out_shape, index))}]"


def _broadcast_index(shape, out_shape, index="_i"):
    lead = len(out_shape) - len(shape)
    return ["0" if n == 1 and out_shape[lead + j] != 1 else f"{index}{lead + j}"
            for j, n in enumerate(shape)]


def loops(shape, body, index="_i", axes=None):
    """`body` (lines) inside one `for` per axis of shape (`axes`: their numbers)."""
    axes = range(len(shape)) if axes is None else axes
    lines, indent = [], ""
    for a, n in zip(axes, shape):
        lines.append(f"{indent}for {index}{a} in range({int(n)}):")
        indent += "    "
    return lines + [indent + b for b in body]


def _position(ndim, index="_i"):
    return ", ".join(f"{index}{a}" for a in range(ndim))


def elementwise(name, out, args, codes, expr, fuse=False):
    """Lines computing var `out` into `name`: `expr(element codes)` at every position; with
    `fuse`, that work as a Fused, for the nest of the operation that reads it. An operand
    whose `fused` is set is such work: computed here, element by element, not read."""
    shape = tuple(out.shape)
    before, body, elems, held = [], [], [], []
    for k, (a, code) in enumerate(zip(args, codes)):
        fused = getattr(a, "fused", None)
        if fused is not None:
            before += fused.before
            body += fused.body if fused.shape == shape else \
                fused.at(_broadcast_index(fused.shape, shape))
            if fused.stored:  # read elsewhere too: its array is written here, in this nest
                before.append(fused.allocation())
                body.append(f"{fused.name}[{_position(len(shape))}] = {fused.element}")
            elems.append(fused.element)
            held += fused.held
            fused.taken = True
            continue
        if a.shape and not _NAME.match(code):
            before.append(f"{name}_a{k} = {code}")
            code = f"{name}_a{k}"
        elems.append(element(code, tuple(a.shape), shape))
    body.append(f"{name}{ELEMENT} = {expr(elems)}")
    work = Fused(name, out, before, body, held)
    return work if fuse else work.lines()


class Fused:
    """Elementwise work written into the nest of the one operation that reads it, an
    operation of its shape, instead of into an array of its own: `before` the nest (its
    operands bound to names), `body` inside it (ending in `element`). Each element is the same
    scalar arithmetic on the same operands as its own nest computes, in one loop instead of
    two, without the array between them (on a step of a few thousand elements, each such
    array cost about a microsecond). Work that other operations read as well is `stored`:
    its reader's nest also writes its array, so that the two are one pass over memory
    instead of two. `held`: the keys of the stored work inside (the caller's, Fusion's vars),
    whose arrays are written where this work's nest is. `lines()` writes it as its own nest,
    for a reader that cannot take it."""

    def __init__(self, name, out, before, body, held=(), reads_only=False):
        self.name, self.shape, self.dtype = name, tuple(out.shape), out.dtype
        self.before, self.body = before, body
        self.element = f"{name}{ELEMENT}"
        self.taken = False  # set by the reader's nest
        self.stored, self.held = False, list(held)
        # Only reads elements (a broadcast, a fill, a reshape of unit axes): a broadcast or
        # reshape of another shape may take it, its body re-indexed (`at`): no work repeated.
        self.reads_only = reads_only

    def at(self, index):
        """The body with each of this work's positions `_i<k>` read at `index[k]`."""
        return [_POSITION.sub(lambda m: index[int(m.group(1))], line) for line in self.body]

    def allocation(self):
        return f"{self.name} = np.empty({self.shape}, {_dtype(self.dtype)})"

    def lines(self):
        at = _position(len(self.shape))
        return self.before + [self.allocation()] \
            + loops(self.shape, self.body + [f"{self.name}[{at}] = {self.element}"])


def reduction(name, out, x, code, axes, which):
    """Lines computing `which` ("sum", "max" or "min") of float array x over `axes`
    (sorted) into `name`, var `out` (keepdims or not, by its rank)."""
    lines, (code,) = _bound(name, [x], [code])
    shape, acc = tuple(x.shape), f"{name}{ELEMENT}"
    kept = [a for a in range(len(shape)) if a not in axes]
    read = f"{code}[{', '.join(('_j' if a in axes else '_i') + str(a) for a in range(len(shape)))}]"
    if which == "sum":
        start = [f"{acc} = {_dtype(x.dtype)}({_ZERO})"]
        step = [f"{acc} += {read}"]
    else:
        first = f"{code}[{', '.join(('0' if a in axes else f'_i{a}') for a in range(len(shape)))}]"
        start = [f"{acc} = {first}"]
        cmp = ">" if which == "max" else "<"
        step = [f"{name}_x = {read}", f"if {name}_x {cmp} {acc} or {name}_x != {name}_x:",
                f"    {acc} = {name}_x"]
    inner = loops([shape[a] for a in axes], step, "_j", axes)
    if not out.shape:
        return lines + start + inner + [f"{name} = {acc}"]
    at = ", ".join("0" if a in axes else f"_i{a}" for a in range(len(shape))) \
        if len(out.shape) == len(shape) else ", ".join(f"_i{a}" for a in kept)
    lines.append(f"{name} = np.empty({tuple(out.shape)}, {_dtype(out.dtype)})")
    return lines + loops([shape[a] for a in kept], start + inner + [f"{name}[{at}] = {acc}"],
                         "_i", kept)


def store(target, code, shape, tag, scalar=False):
    """Lines writing array `code` of static `shape` (or the scalar `code` to every element)
    into the row `target` (`Y0[t]`, a view of that shape), element by element; `tag` makes
    the row's name unique."""
    row, lines = f"_row{tag}", []
    if not shape or math.prod(shape) == 0:
        return [f"{target} = {code}"]
    if not _NAME.match(code):
        lines.append(f"_value{tag} = {code}")
        code = f"_value{tag}"
    at = _position(len(shape))
    value = code if scalar else f"{code}[{at}]"
    return lines + [f"{row} = {target}"] + loops(shape, [f"{row}[{at}] = {value}"])


def _dtype(dtype):
    dtype = np.dtype(dtype)
    return "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"


SMALL = 4096  # elements: a reshape or broadcast copied by a nest (views above it)


def broadcast(name, out, x, code, fuse=False):
    """Lines computing var `out` as `np.broadcast_to(x, out.shape)`, a fresh array; with
    `fuse`, as a Fused: its reader's nest reads x's elements (no array between them)."""
    work = elementwise(name, out, [x], [code], lambda e: e[0], True)
    work.reads_only = True  # (x's own work, if it is fused here, only reads too: Fusion)
    return work if fuse else work.lines()


def filled(name, out, code, fuse=False):
    """Lines making `name` (var `out`, an array) with every element the scalar `code`, as
    np.full does: up to SMALL elements as a nest (an array a step makes this way, and reads
    by elements, is allocated once: hoist_buffers), its element `<name>_e` typed and checked
    like any; with `fuse`, as a Fused, that element read in its reader's nest."""
    shape = tuple(out.shape)
    if math.prod(shape) > SMALL:
        return [f"{name} = np.full({shape}, {code})"]
    if fuse:
        return Fused(name, out, [], [f"{name}{ELEMENT} = {code}"], reads_only=True)
    return [f"{name}{ELEMENT} = {code}", f"{name} = np.empty({shape}, {_dtype(out.dtype)})"] \
        + loops(shape, [f"{name}[{_position(len(shape))}] = {name}{ELEMENT}"])


def concatenate(name, out, args, codes, axis):
    """Lines computing var `out` as the concatenation of `args` (arrays of out's dtype) along
    `axis`, each copied element by element into its part of a fresh array."""
    lines, codes = _bound(name, args, codes)
    shape, offset = tuple(out.shape), 0
    lines.append(f"{name} = np.empty({shape}, {_dtype(out.dtype)})")
    for a, code in zip(args, codes):
        part = tuple(a.shape)
        at = ", ".join(f"_i{j} + {offset}" if j == axis and offset else f"_i{j}"
                       for j in range(len(part)))
        if math.prod(part):
            lines += loops(part, [f"{name}[{at}] = {code}[{_position(len(part))}]"])
        offset += part[axis]
    return lines


def reshape(name, out, x, code, fuse=False):
    """Lines computing var `out` as x in C order with out's shape, a fresh array. Where the
    reshape only adds or drops axes of length 1, each element is read at its own index
    (no flat position to divide), and with `fuse` that read is a Fused, for its reader."""
    lines, (code,) = _bound(name, [x], [code])
    shape, src = tuple(out.shape), tuple(x.shape)
    axes = [a for a, n in enumerate(shape) if n != 1]
    if [n for n in src if n != 1] == [shape[a] for a in axes]:
        at = iter(axes)
        ix = ["0" if n == 1 else f"_i{next(at)}" for n in src]
        fused = getattr(x, "fused", None)
        if fused is None:
            work = Fused(name, out, lines, [f"{name}{ELEMENT} = {code}[{', '.join(ix)}]"],
                         reads_only=True)
        else:  # the source's own reads, at the positions this reshape reads
            fused.taken = True
            work = Fused(name, out, fused.before, fused.at(ix) +
                         [f"{name}{ELEMENT} = {fused.element}"], fused.held, reads_only=True)
        return work if fuse else work.lines()
    flat = " + ".join(f"_i{a} * {math.prod(src[a + 1:])}" for a in range(len(src)))
    at = ", ".join(f"({name}_k // {math.prod(shape[a + 1:])}) % {n}"
                   for a, n in enumerate(shape))
    lines.append(f"{name} = np.empty({shape}, {_dtype(out.dtype)})")
    return lines + loops(src, [f"{name}_k = {flat}",
                               f"{name}[{at}] = {code}[{_position(len(src))}]"])


def matmul(name, out, a, acode, b, bcode):
    """Lines computing var `out` as `a @ b` (NumPy's matmul: 1-d operands, broadcast batch
    axes), each element a sum over k in order, as a nest's sum starts."""
    lines, (acode, bcode) = _bound(name, [a, b], [acode, bcode])
    A = tuple(a.shape) if len(a.shape) > 1 else (1,) + tuple(a.shape)
    B = tuple(b.shape) if len(b.shape) > 1 else tuple(b.shape) + (1,)
    batch = tuple(out.shape[:len(out.shape) - (len(a.shape) > 1) - (len(b.shape) > 1)])

    def batch_index(shape):
        lead = len(batch) - len(shape)
        return ["0" if n == 1 and batch[lead + j] != 1 else f"_i{lead + j}"
                for j, n in enumerate(shape)]

    m = ["_im"] if len(a.shape) > 1 else []
    n = ["_in"] if len(b.shape) > 1 else []
    read_a = f"{acode}[{', '.join(batch_index(A[:-2]) + m + ['_k'])}]"
    read_b = f"{bcode}[{', '.join(batch_index(B[:-2]) + ['_k'] + n)}]"
    acc = f"{name}{ELEMENT}"
    body = [f"{acc} = {_dtype(out.dtype)}({_ZERO})", f"for _k in range({A[-1]}):",
            f"    {acc} += {read_a} * {read_b}"]
    if not out.shape:
        return lines + body + [f"{name} = {acc}"]
    at = ", ".join([f"_i{j}" for j in range(len(batch))] + m + n)
    lines.append(f"{name} = np.empty({tuple(out.shape)}, {_dtype(out.dtype)})")
    nest = body + [f"{name}[{at}] = {acc}"]
    if n:
        nest = [f"for _in in range({B[-1]}):"] + ["    " + s for s in nest]
    if m:
        nest = [f"for _im in range({A[-2]}):"] + ["    " + s for s in nest]
    return lines + loops(batch, nest)


_EMPTY = re.compile(r"(\s*)([A-Za-z_]\w*) = np\.empty\((\([0-9, ]*\)), (np\.\w+)\)\Z")


HOIST_MAX = 1024  # elements: larger arrays cost more to fill than to allocate


def hoist_buffers(lines, indent="    "):
    """The kernel's lines with each small array a nest allocates inside a loop (`name =
    np.empty(shape, dtype)`) made once at the top instead of at every step, where nothing
    can tell: the name is assigned nowhere else and every other use reads or writes one
    element (an index per axis, no slice, no None) or takes a view (basic indexing, `.T`)
    named once and used element by element (read, or written: a pad's or a scatter's zeros,
    then a slice), so no alias, carry or output ever holds the array past the step that
    writes it, and each step writes it before reading it (as the NumPy loop allocates it
    anew). A contiguous reshape (`np.ascontiguousarray(a).reshape(...)`, the emitter's flat
    read) counts as a view. A step of small arrays spent most of its time in these
    allocations (15-20 ns each: a jitted Kalman jacrev's backward step made eight, 17 of its
    72 us). Arrays allocated once anyway stay where they are: made at the top, large ones
    would all be alive at once (an HMM's fused kernel, 14 of 1 MB, ran 35 % slower), where
    each is freed after its last use and its memory reused."""
    text = "\n".join(lines)
    found = {}  # name -> its rank, for each allocation that may move
    for line in lines:
        m = _EMPTY.match(line)
        dims = [int(n) for n in m.group(3).strip("()").split(",") if n.strip()] if m else []
        if dims and len(m.group(1)) > len(indent) and math.prod(dims) <= HOIST_MAX:
            found[m.group(2)] = len(dims)
    if not found:
        return lines
    rank = dict(found)  # and each view's, taken of one of them (of a view of one...)
    views, at = _views(text, rank)
    # One pass over the text for all of them (a pass per name was quadratic: seconds for
    # the ODE solver's kernel, whose source the numba tier writes at every eager call).
    assigned = _assignments(text)
    held = {n for n, r in rank.items() if r is None or assigned.get(n) != 1}
    for m in _IDENTIFIER.finditer(text):
        name = m.group()
        if name not in rank or name in held or text.startswith(" = ", m.end()) or \
                at.get(m.end()) in views.get(name, ()):
            continue  # its allocation or definition (assigned once), or a view taken of it
        if not (_element_use(text, m.end(), rank[name]) or _raveled_element(text, m)):
            held.add(name)
    movable = {n for n in found if not _holds(n, views, held)}
    hoisted, keep = [], []
    for line in lines:
        m = _EMPTY.match(line)
        if m and m.group(2) in movable:
            hoisted.append(f"{indent}{m.group(2)} = np.empty({m.group(3)}, {m.group(4)})")
        else:
            keep.append(line)
    return hoisted + keep


def double_buffer_carries(lines):
    """The kernel's lines with each step loop's next carries written into two arrays made
    before the loop, one for even steps and one for odd, instead of a new array at every
    step (an allocation and a free: a jitted Kalman jacfwd's steps made four, 10-20 % of its
    kernel). Only where nothing can tell: a `for t in range(...)` loop whose last line sets
    its carries (a fused kernel's `v0, v1, = v4, v7,`, a per-scan kernel's `c0, c1 = v4_0,
    v7_0`; each call makes its own two arrays), and a value `v` among them allocated at the
    top of the step (`v = np.empty(...)`, small, assigned nowhere else) and otherwise used
    only by elements, inside the loop. The step reads its carry (last step's array) while writing
    the other; the array written was the carry two steps back, which no name holds any more
    (every other use was one element, residuals and ys are copied out)."""
    text = "\n".join(lines)
    assigned = _assignments(text)
    out, before = list(lines), {}  # the loop's line -> the buffers made before it
    for i, line in enumerate(lines):
        loop = _STEP_LOOP.match(line)
        if not loop:
            continue
        inner = loop.group(1) + "    "
        end = i + 1
        while end < len(lines) and (not lines[end].strip() or lines[end].startswith(inner)):
            end += 1
        update = _CARRY_UPDATE.match(lines[end - 1]) if end > i + 1 else None
        if not update:
            continue
        indent, names = (update.group(1), update.group(3)) if update.group(1) is not None \
            else (update.group(4), update.group(6))
        if indent != inner:
            continue
        body = "\n".join(lines[i + 1:end - 1])
        outside = "\n".join(lines[:i] + lines[end:])
        # in the update's order, not a set's: the source is the kernel's cache key, and a
        # set of strings iterates in another order in every process (hash randomisation)
        for name in dict.fromkeys(n.strip() for n in names.split(",") if n.strip()):
            made = [(j, m) for j in range(i + 1, end - 1) for m in [_EMPTY.match(lines[j])]
                    if m and m.group(1) == inner and m.group(2) == name]
            if not made or assigned.get(name) != 1 or re.search(rf"\b{name}\b", outside):
                continue
            alloc, m = made[0]
            dims = [int(n) for n in m.group(3).strip("()").split(",") if n.strip()]
            if not dims or math.prod(dims) > HOIST_MAX or not all(
                    _element_use(body, u.end(), len(dims))
                    for u in re.finditer(rf"\b{name}\b", body)
                    if not body.startswith(" = np.empty", u.end())):
                continue
            even, odd = f"{name}_even", f"{name}_odd"
            out[alloc] = f"{inner}{name} = {even} if {loop.group(2)} % 2 == 0 else {odd}"
            before.setdefault(i, []).extend(
                f"{loop.group(1)}{b} = np.empty({m.group(3)}, {m.group(4)})" for b in (even, odd))
    if not before:
        return lines
    return [made for i, line in enumerate(out) for made in (*before.get(i, ()), line)]


# A fused kernel's step loop (`for t3 in ...`, carries `v0, v1, = v7, v9,`) or a per-scan
# kernel's (`for t in ...`, carries `c0, c1 = v7_0, v9_0`: named c<i>, so that a last line
# `v = w` is never taken for them)
_STEP_LOOP = re.compile(r"(\s*)for (t\d*) in range\(.*\):\Z")
_CARRY_UPDATE = re.compile(r"(\s*)((?:[A-Za-z_]\w*, )*[A-Za-z_]\w*,) = "
                           r"((?:[A-Za-z_]\w*, )*[A-Za-z_]\w*,)\Z"
                           r"|(\s*)((?:c\d+, )*c\d+) = ((?:[A-Za-z_]\w*, )*[A-Za-z_]\w*)\Z")


def _assignments(text):
    """How often each name is assigned (`name = ...` at the start of a line)."""
    return collections.Counter(m.group(1) for m in _ASSIGNED.finditer(text))


_ASSIGNED = re.compile(r"^\s*([A-Za-z_]\w*) = ", re.M)
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_VIEW = re.compile(r"^\s*([A-Za-z_]\w*) = ([A-Za-z_]\w*)((?:\.T|\[[^\[\]()]*\])+)$", re.M)
_RESHAPED = re.compile(r"^\s*([A-Za-z_]\w*) = np\.ascontiguousarray\(([A-Za-z_]\w*)\)"
                       r"\.reshape\((\([0-9, ]*\))\)$", re.M)
_INDEX = re.compile(r"\.T|\[([^\[\]]*)\]")
_SLICE = re.compile(r"-?\w*:-?\w*(:-?\w*)?\Z")


def _views(text, rank):
    """(views, at): the views taken of each array in `rank` and of its views (name -> their
    names), each view's rank added to `rank`; `at`: where each view's source is named (the
    end of that mention) -> the view."""
    defined = {}
    for m in _VIEW.finditer(text):
        defined.setdefault(m.group(2), []).append((m.group(1), m.group(3), m.end(2)))
    for m in _RESHAPED.finditer(text):  # a view where the array is contiguous (made here)
        defined.setdefault(m.group(2), []).append((m.group(1), m.group(3), m.end(2)))
    views, at, todo = {}, {}, [n for n in rank if n in defined]
    while todo:
        source = todo.pop()
        for name, suffix, end in defined[source]:
            r = _view_rank(suffix, rank[source])
            if r == 0:
                continue  # one element read: not a view (an element use, checked as one)
            if name in rank:  # a name viewing two arrays, or an allocation: not a plain view
                rank[source] = None
                continue
            views.setdefault(source, []).append(name)
            at[end] = name
            rank[name] = r
            if name in defined:
                todo.append(name)
    return views, at


def _view_rank(suffix, rank):
    """The rank of `x<suffix>` for x of `rank` dimensions, the suffix basic indexing (an
    integer or a name per axis, slices, None) and `.T`s, or a reshape's shape (`(2, 3)`:
    _RESHAPED's); None for anything else."""
    if suffix.startswith("("):
        return None if rank is None else len([d for d in suffix[1:-1].split(",") if d.strip()])
    for m in _INDEX.finditer(suffix):
        if rank is None or m.group() == ".T":
            continue
        parts = [p.strip() for p in m.group(1).split(",")]
        if parts[-1] == "" and len(parts) > 1:
            parts.pop()  # x[0,]
        drop = sum(bool(re.fullmatch(r"-?\w+", p)) and p != "None" for p in parts)
        keep = sum(bool(_SLICE.match(p)) for p in parts)
        new = parts.count("None")
        if drop + keep + new != len(parts) or drop + keep > rank:
            return None
        rank = rank - drop + new
    return rank


def _holds(name, views, held):
    """Whether an array, or a view of it (of a view...), is held past one element's use."""
    return name in held or any(_holds(v, views, held) for v in views.get(name, ()))


def _raveled_element(text, m):
    """Whether the mention `m` is `np.ravel(name)[i]`, one element of a flattened array."""
    if not text.startswith("np.ravel(", m.start() - 9) or not text.startswith(")", m.end()):
        return False
    return _element_use(text, m.end() + 1, 1)


def _element_use(text, end, rank):
    """Whether the mention of a name ending at `end` is name[i, j, ...] with `rank` indices,
    none of them a slice, None or an Ellipsis."""
    if not text.startswith("[", end):
        return False
    parts, depth, start = [], 0, end + 1
    for i in range(end, len(text)):
        c = text[i]
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
            if depth == 0:
                parts.append(text[start:i])
                break
        elif c == "," and depth == 1:
            parts.append(text[start:i])
            start = i + 1
    else:
        return False
    parts = [p.strip() for p in parts]
    return len(parts) == rank and not any(":" in p or p in ("None", "...", "") for p in parts)
