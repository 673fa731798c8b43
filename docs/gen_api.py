"""Generate docs/api.md from scanlib.__all__, and refresh the printed output in
docs/tutorial.md and docs/internals.md, by running every example; and write
scanlib/__init__.pyi, the stub that editors and type checkers read for `import scanlib`.

    python docs/gen_api.py           # rewrite docs/api.md and the outputs in docs/tutorial.md
    python docs/gen_api.py --check   # exit 1 if a file is out of date (a test runs this)

It also re-runs the README's ten-line example, writes its printed output into the comment on
its last line, and writes the example's printed scan plan between the README's plan markers.

For each public name the one-line description is the first line of its own docstring, and
the example is the `>>>` example of that docstring; names whose docstring has none (or that
have no docstring of their own, such as primitives) take theirs from FALLBACK below. Every
example is executed and its real output written, so the reference cannot drift silently.
"""

from __future__ import annotations

import contextlib
import doctest
import enum
import inspect
import io
import os
import re
import sys
import textwrap
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import scanlib as sl

# name -> (signature or None, one-line description or None, example source or None).
# None means "take it from the docstring".
FALLBACK = {
    "Array": ("Array", "jax.Array: the array type, scanlib.Tensor itself (for isinstance).",
              "isinstance(sl.ones(2), sl.Array)"),
    "config": ("config.update(name, value)", ("jax.config: update and read the settings a "
               "program sets at its top. 64-bit types are always on; a setting scanlib "
               "cannot honour raises, naming what to write instead."),
               "sl.config.update('jax_enable_x64', True)\nsl.config.jax_enable_x64"),
    "jacobian": ("jacobian(f, argnums=0)", "jax.jacobian: jacrev itself.",
                 "sl.jacobian(lambda x: x ** 2)(sl.tensor([1.0, 3.0]))"),
    "tree_util.PyTreeDef": ("PyTreeDef", "The type of a treedef (optree's PyTreeSpec), as "
                           "jax.tree_util.PyTreeDef.",
                           "isinstance(sl.tree_util.tree_structure((1.0, [2.0])), "
                           "sl.tree_util.PyTreeDef)"),
    "tree_util.KeyPath": ("KeyPath", "The type of a key path (a tuple of key entries), as "
                          "jax.tree_util.KeyPath, for annotations.",
                          "path, _ = sl.tree_util.tree_flatten_with_path({'a': 1.0})[0][0]\n"
                          "isinstance(path, sl.tree_util.KeyPath)"),
    "tree_util.KeyEntry": ("KeyEntry", "The type of one step of a key path (SequenceKey, "
                           "DictKey, GetAttrKey, FlattenedIndexKey), as "
                           "jax.tree_util.KeyEntry, for annotations.",
                           "sl.tree_util.KeyEntry"),
    "lax.add": ("add(x, y)", "x + y elementwise (lax.add).", "sl.lax.add(sl.ones(2), 2.0)"),
    "lax.sub": ("sub(x, y)", "x - y elementwise (lax.sub).", "sl.lax.sub(sl.ones(2), 2.0)"),
    "lax.mul": ("mul(x, y)", "x * y elementwise (lax.mul).", "sl.lax.mul(sl.ones(2), 2.0)"),
    "lax.neg": ("neg(x)", "-x elementwise (lax.neg).", "sl.lax.neg(sl.ones(2))"),
    "tensor": (None, None, ("sl.tensor([[1, 2], [3, 4]], dtype='float32')\n"
               "sl.tensor([1.0, 2.0], requires_grad=True)")),
    "as_tensor": (None, None, "sl.as_tensor(np.arange(3))"),
    "zeros": (None, "A Tensor of zeros (float64 unless dtype is given).",
              "sl.zeros((2, 3), dtype='float32')"),
    "ones": (None, "A Tensor of ones.", "sl.ones(3)"),
    "full": (None, "A Tensor filled with fill_value.", "sl.full((2, 2), 7.0)"),
    "arange": (None, "Evenly spaced values, as numpy.arange.", "sl.arange(0, 1, 0.25)"),
    "zeros_like": (None, "Zeros with x's shape, dtype and device.",
                   "sl.zeros_like(sl.tensor([1.0, 2.0]))"),
    "ones_like": (None, "Ones with x's shape, dtype and device.",
                  "sl.ones_like(sl.tensor([[1, 2]]))"),
    "exp": ("exp(x)", "Elementwise e**x; its VJP reuses the output.",
            "sl.exp(sl.tensor([0.0, 1.0]))"),
    "log": ("log(x)", "Elementwise natural logarithm.", "sl.log(sl.tensor([1.0, np.e]))"),
    "log1p": ("log1p(x)", "Elementwise log(1 + x), accurate for small x.",
              "sl.log1p(sl.tensor([0.0, 1e-10]))"),
    "sqrt": ("sqrt(x)", "Elementwise square root.", "sl.sqrt(sl.tensor([4.0, 9.0]))"),
    "sin": ("sin(x)", "Elementwise sine.", "sl.sin(sl.tensor([0.0, np.pi / 2]))"),
    "cos": ("cos(x)", "Elementwise cosine.", "sl.cos(sl.tensor([0.0, np.pi]))"),
    "tanh": ("tanh(x)", "Elementwise hyperbolic tangent; its VJP reuses the output.",
             "sl.grad(lambda x: sl.tanh(x).sum())(sl.tensor([0.0, 1.0]))"),
    "sigmoid": ("sigmoid(x)", ("Elementwise logistic function 1 / (1 + exp(-x)), stable for "
                "large |x|."), "sl.sigmoid(sl.tensor([-100.0, 0.0, 100.0]))"),
    "scipy.special.expit": ("expit(x)", ("The logistic function 1 / (1 + exp(-x)), as "
                            "jax.scipy.special.expit: scanlib.sigmoid itself."),
                            "sl.scipy.special.expit(sl.tensor([-100.0, 0.0, 100.0]))"),
    "relu": (None, None, "sl.relu(sl.tensor([-1.0, 0.0, 2.0]))"),
    "softplus": (None, None, "sl.softplus(sl.tensor([-1000.0, 0.0, 1000.0]))"),
    "abs": ("abs(x)", "Elementwise absolute value.", "sl.abs(sl.tensor([-2.0, 3.0]))"),
    "maximum": ("maximum(x, y)", "Elementwise maximum; ties split the gradient evenly.",
                "sl.maximum(sl.tensor([1.0, 5.0]), 3.0)"),
    "minimum": ("minimum(x, y)", "Elementwise minimum; ties split the gradient evenly.",
                "sl.minimum(sl.tensor([1.0, 5.0]), 3.0)"),
    "where": (None, None, "sl.where(sl.tensor([True, False]), sl.tensor([1.0, 2.0]), 0.0)"),
    "clip": (None, None, "sl.clip(sl.tensor([-2.0, 0.5, 2.0]), -1.0, 1.0)"),
    "sum": (None, "Sum over axis (all axes when None), as numpy.sum.",
            "sl.sum(sl.tensor([[1.0, 2.0], [3.0, 4.0]]), axis=0)"),
    "mean": (None, "Mean over axis (all axes when None), as numpy.mean.",
             "sl.mean(sl.tensor([[1.0, 2.0], [3.0, 4.0]]), axis=1)"),
    "max": (None, "Maximum over axis; ties share the gradient evenly.",
            "sl.max(sl.tensor([[1.0, 5.0], [3.0, 4.0]]), axis=1)"),
    "min": (None, "Minimum over axis; ties share the gradient evenly.",
            "sl.min(sl.tensor([[1.0, 5.0], [3.0, 4.0]]), axis=1)"),
    "logsumexp": (None, None, "sl.logsumexp(sl.tensor([1000.0, 1000.0]))"),
    "softmax": (None, None, "sl.softmax(sl.tensor([0.0, np.log(3.0)]))"),
    "matmul": (None, None, "sl.matmul(sl.ones((2, 3)), sl.ones(3))"),
    "einsum": (None, None, "sl.einsum('ij,j->i', sl.ones((2, 3)), sl.arange(3.0))"),
    "vdot": (None, None, "sl.vdot(sl.ones((2, 3)), sl.arange(6.0))"),
    "stack": (None, "Join same-shaped tensors along a new axis.",
              "sl.stack([sl.zeros(2), sl.ones(2)], axis=1)"),
    "concatenate": (None, "Join tensors along an existing axis.",
                    "sl.concatenate([sl.zeros(2), sl.ones(1)])"),
    "reshape": (None, "The same data in a new shape (one axis may be -1).",
                "sl.reshape(sl.arange(6.0), (2, -1))"),
    "transpose": (None, "Permute axes (reverse them when none are given).",
                  "sl.transpose(sl.zeros((2, 3, 4)), (2, 0, 1)).shape"),
    "swapaxes": (None, "Exchange two axes.", "sl.swapaxes(sl.zeros((2, 3)), 0, 1).shape"),
    "expand_dims": (None, "Insert an axis of size 1 at position axis.",
                    "sl.expand_dims(sl.zeros(3), 0).shape"),
    "squeeze": (None, "Remove axes of size 1 (all of them, or those named).",
                "sl.squeeze(sl.zeros((1, 3, 1))).shape"),
    "broadcast_to": (None, ("Broadcast to a shape, as numpy.broadcast_to; the gradient is "
                     "summed back."), "sl.broadcast_to(sl.tensor([1.0, 2.0]), (2, 2))"),
    "stop_gradient": ("stop_gradient(x)", ("x's value, through which no gradient flows; of a "
                      "pytree (dict, list, tuple, nested), of every leaf (Tensor, array and "
                      "number leaves become Tensors, others stay as they are)."),
                      ("sl.grad(lambda x: (x * sl.stop_gradient(x)).sum())(sl.tensor([3.0]))\n"
                       "sl.stop_gradient({'w': sl.tensor([1.0], requires_grad=True), "
                       "'name': 'layer1'})")),
    "sign": ("sign(x)", "Elementwise sign (-1, 0 or 1); not differentiable.",
             "sl.sign(sl.tensor([-2.0, 0.0, 5.0]))"),
    "real": ("real(x)", "The real part (x itself for real x); gradients in JAX's convention.",
             "sl.real(sl.tensor([1 + 2j, 3.0]))"),
    "imag": ("imag(x)", "The imaginary part (zeros for real x).",
             "sl.imag(sl.tensor([1 + 2j, 3.0]))"),
    "conj": ("conj(x)", "The complex conjugate (x itself for real x).",
             "sl.conj(sl.tensor([1 + 2j]))"),
    "conjugate": ("conjugate(x)", "The complex conjugate; the same as conj.",
                  "sl.conjugate(sl.tensor([1 - 1j]))"),
    "angle": ("angle(x)", "The argument of a complex number, in radians.",
              "sl.angle(sl.tensor([1j, -1.0]))"),
    "Tensor": (None, None,
               ("x = sl.tensor([1.0, 2.0], requires_grad=True)\n"
               "loss = (x * x).sum()\n"
               "loss.backward()\n"
               "x.grad")),
    "Graph": (None, ("A traced function: invars, equations in execution order, outvars and "
              "the closed-over constants; printing it shows straight-line code."),
              "print(sl.make_graph(lambda x: sl.exp(x) + 1.0)(sl.zeros(2)))"),
    "no_grad": (None, None,
                ("x = sl.tensor([1.0], requires_grad=True)\n"
                "with sl.no_grad():\n"
                "    y = x * 2\n"
                "y.requires_grad")),
    "enable_grad": ("enable_grad(enabled=True)",
                    "Context manager that turns recording back on (or off) inside no_grad.",
                    ("x = sl.tensor([1.0], requires_grad=True)\n"
                    "with sl.no_grad(), sl.enable_grad():\n"
                    "    y = x * 2\n"
                    "y.requires_grad")),
    "grad": (None, None, None),
    "value_and_grad": (None, None,
                       "sl.value_and_grad(lambda w: (w ** 2).sum())(sl.tensor([1.0, 2.0]))"),
    "vjp": (None, None, None),
    "make_graph": (None, None, None),
    "testing": (("scanlib.testing.check_grads(f, args, order=1, *, eps=1e-6, rtol=1e-5, "
                "atol=1e-7, seed=0)"),
                ("Gradient checks: `check_grads` compares f's VJP (and with order=2 the VJP of "
                "the VJP) with central finite differences in a random direction, in float64; "
                "it raises AssertionError on a mismatch."),
                ("sl.testing.check_grads(lambda x: sl.tanh(x) * x, (np.linspace(-1, 1, 5),), "
                "order=2)")),
    "cuda_available": (None, None,
                       "isinstance(sl.cuda_available(), bool)  # True or False, by machine"),
    "scan": (None, None, None),
    "scan_plan": (None, None, None),
    "ScanPlan": (None, None,
                 ("W = sl.tensor([[0.5]], requires_grad=True)\n"
                 "plan = sl.scan_plan(lambda h, x: (sl.tanh(h @ W + x),) * 2, sl.zeros((1, 1)),"
                 " sl.zeros((5, 1, 1)))\n"
                 "print(plan)")),
}


# --- running examples like a Python prompt ---------------------------------------------------
def new_namespace() -> dict:
    ns = {"sl": sl, "np": np, "scanlib": sl}
    exec("import scanlib as sl\nimport numpy as np", ns)  # noqa: S102 (running examples is the job)
    return ns


def run_chunk(source: str, ns: dict) -> str:
    """Execute one statement as the interactive prompt would (echoing expression values)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = compile(source, "<example>", "single")
        old_hook = sys.displayhook
        sys.displayhook = lambda v: None if v is None else print(repr(v))
        try:
            exec(code, ns)  # noqa: S102
        finally:
            sys.displayhook = old_hook
    return out.getvalue()


def split_statements(source: str) -> list[str]:
    """Top-level statements of a snippet (a block such as `with ...:` stays whole)."""
    chunks, current = [], []
    for line in source.splitlines():
        if current and line and not line[0].isspace() and not line.startswith((")", "]", "}")):
            chunks.append("\n".join(current))
            current = []
        current.append(line)
    if current:
        chunks.append("\n".join(current))
    return chunks


def as_doctest(source: str, ns: dict) -> str:
    lines = []
    for chunk in split_statements(source):
        first, *rest = chunk.splitlines()
        lines.append(">>> " + first)
        lines.extend("... " + r for r in rest)
        if rest and rest[-1].startswith(" "):
            lines.append("...")
        out = run_chunk(chunk + ("\n" if rest else ""), ns)
        lines.extend(_doctest_safe(out).rstrip("\n").splitlines() if out.strip() else [])
    return "\n".join(lines)


def _doctest_safe(out: str) -> str:
    # doctest reads a blank line as the end of the expected output.
    return "\n".join(line if line.strip() else "<BLANKLINE>" for line in out.splitlines())


def docstring_example(doc: str) -> str | None:
    examples = doctest.DocTestParser().get_examples(doc)
    lines = [ex.source.rstrip("\n") for ex in examples if not ex.source.startswith("import ")]
    return "\n".join(lines) or None


# --- the API reference ----------------------------------------------------------------------
def own_doc(obj) -> str | None:
    """obj's own docstring (not one inherited from its class, as primitives have)."""
    doc = getattr(obj, "__doc__", None)
    if doc is None or (not inspect.isclass(obj) and not inspect.ismodule(obj)
                       and not callable(getattr(obj, "__wrapped__", None))
                       and doc is type(obj).__doc__):
        return None
    return inspect.cleandoc(doc)


def signature(name, obj) -> str:
    if isinstance(obj, type) and issubclass(obj, enum.Enum):  # its call's keywords vary by Python
        return f"{name}(value)"
    try:
        text = f"{name}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        return name
    text = re.sub(r"<class '(?:[\w]+\.)*(\w+)'>", r"\1", text)  # dtype=<class 'numpy.float64'>
    return re.sub(r"'([\w.\[\], |]+)'", r"\1", text)  # string annotations: -> 'Tensor'


def anchors(names) -> dict:
    """GitHub's heading anchors: lower-case, with -1, -2 ... for repeats (tensor, Tensor)."""
    seen, out = {}, {}
    for n in names:
        base = n.lower()
        k = seen.get(base, 0)
        out[n] = base if k == 0 else f"{base}-{k}"
        seen[base] = k + 1
    return out


def api_markdown(old: str = "") -> str:
    lines = [
        "# API reference",
        "",
        ("Every public name in `scanlib.__all__`, in that order, with a one-line description "
        "and an example whose output was produced by running it (`import scanlib as sl`, "
        "`import numpy as np`). Generated by `python docs/gen_api.py` from the docstrings; "
        "a test checks that it is up to date."),
        "",
        ("Editors and type checkers (mypy, pyright) see these signatures, Tensor's operators "
         "and methods included; from a clone, install with `pip install -e . --config-settings "
         "editable_mode=compat` for them to find scanlib, as setuptools' default editable "
         "install is an import hook that static tools cannot follow."),
        "",
    ]
    links = anchors(sl.__all__)
    index = ", ".join(f"[`{n}`](#{links[n]})" for n in sl.__all__)
    lines += [index, "", ("Further down: [scanlib.numpy]"
                          "(#scanlibnumpy-import-scanlibnumpy-as-jnp), [scanlib.distributed]"
                          f"(#{DISTRIBUTED_ANCHOR}), [Tensor's methods and properties]"
                          "(#tensor-methods-and-properties) and the [pytree helpers](#pytree)."),
              ""]
    for name in sl.__all__:
        obj = getattr(sl, name)
        if name in SUBMODULES:
            lines += submodule_markdown(name, obj)
            continue
        lines += entry_markdown(name, obj, "##")
        if name in FULL_DOC:
            lines += full_doc_markdown(name, obj)
    lines += numpy_markdown() + distributed_markdown(old) + tensor_markdown() + pytree_markdown()
    for title, text, example in GUIDES:
        lines += [f"## {title}", "", text, "", "```python", as_doctest(example, new_namespace()),
                  "```", ""]
    lines += LOGGING.splitlines()
    return "\n".join(lines).rstrip("\n") + "\n"


# Sections on what a Tensor does with other libraries, after the names: (title, text, example).
GUIDES = [
    ("Tensors and other libraries: DLPack, the CUDA array interface, pickle",
     "A Tensor speaks DLPack both ways. `np.from_dlpack(t)`, `torch.from_dlpack(t)` or "
     "`jax.dlpack.from_dlpack(t)` read its memory without a copy through `t.__dlpack__()` and "
     "`t.__dlpack_device__()` (a NumPy-backed tensor is exported read-only where the consumer "
     "supports DLPack 1.0, as a copy otherwise: tensors are immutable). "
     "`sl.from_dlpack(x)` makes a Tensor of any object with `__dlpack__` (NumPy, CuPy, torch, "
     "JAX arrays): NumPy-backed for CPU memory, CuPy-backed for CUDA memory, sharing the "
     "memory unless `copy=True`. A CuPy-backed tensor also has `__cuda_array_interface__` "
     "(a NumPy-backed one has none, so `hasattr` is False). A tensor that requires grad "
     "refuses every export, as `np.asarray` refuses it: the other library would drop its "
     "gradient; export `t.detach()`. `pickle` (and `copy.deepcopy`) keep a tensor's value, "
     "dtype, shape and kind of device (NumPy or CuPy data); a leaf keeps `requires_grad`, and "
     "a tensor with history is pickled as its value, detached (the tape does not cross "
     "processes); `.grad` is not pickled. `copy.deepcopy` of a tensor with history returns "
     "the tensor itself, so that its gradient still reaches its leaves.",
     "import pickle\n"
     "t = sl.tensor([1.0, 2.0])\n"
     "np.from_dlpack(t), t.__dlpack_device__(), hasattr(t, '__cuda_array_interface__')\n"
     "sl.from_dlpack(np.arange(3.0))\n"
     "w = sl.tensor([1.0, 2.0], requires_grad=True)\n"
     "pickle.loads(pickle.dumps(w * 2)), pickle.loads(pickle.dumps(w))"),
]


# Not a name in __all__: the standard logging module's logger, described here by hand.
LOGGING = """## Logging: the `scanlib` logger

scanlib reports slow or surprising work on the standard `logging` module's `scanlib` logger,
which prints nothing unless the application configures logging (warnings aside, which go
through the `warnings` module as well):

- `scanlib.numba`, INFO: each numba compile when it starts (which scan body, or which jitted
  function as one fused kernel, and its argument types) and when it ends (its seconds, and
  the cache directory, or that it was loaded from numba's disk cache). On an empty cache a
  body takes seconds to compile (bench/NOTES.md has measured times). Under the default,
  `compiler="auto"`, also: a kernel sent to the background process and when it is ready,
  each body's choice between its kernel and the NumPy loop (with both times), and a body
  numba does not compile (why; no warning).
- `scanlib.jit`, INFO: each trace of a jitted function (its signature, how long, how many
  traces it holds).
- WARNING, once per cause and also as a warning: a jitted function running f eagerly, or
  tracing f again for each new value of a Python-number argument (`JitFallbackWarning`); a
  scan that asked for `compiler="numba"` running the NumPy loop (`NumbaFallbackWarning`).

```python
import logging

logging.basicConfig(level=logging.INFO)  # every logger, scanlib's included
# or scanlib's alone, on a handler of your own:
logging.getLogger("scanlib").setLevel(logging.INFO)
logging.getLogger("scanlib").addHandler(logging.StreamHandler())
```

A jitted function counts its calls: `jitted.cache_info()` is `CacheInfo(hits, misses, eager,
maxsize, currsize)`, as `functools.lru_cache`'s (misses: traces made; eager: calls that ran f
itself), and `jitted.cache_clear()` drops its traces.
"""


# Public submodules: a section each, with a ### entry for every name in their __all__.
SUBMODULES = ("linalg", "random", "optim", "lax", "custom_derivatives", "ad_checkpoint",
              "tree_util", "tree", "flatten_util", "scipy", "debug", "nn", "experimental",
              "distributed")


def submodule_markdown(name, module, level="##"):
    """A module's section: an entry for each of its own names; the names that are scanlib's
    own objects (a JAX-shaped view such as lax.tanh) are listed, pointing to them; a module
    inside it (scipy.special) gets a heading of its own, with its names' entries under it,
    named in full (### scipy.special.gammaln)."""
    doc = own_doc(module) or ""
    lines = [f"{level} {name}", "", doc.split("\n\n")[0].replace("\n", " "), ""]
    same = [sub for sub in module.__all__
            if any(getattr(sl, n, None) is getattr(module, sub) for n in sl.__all__)]
    if same:
        lines += ["The same objects as scanlib's: "
                  + ", ".join(f"`{name}.{sub}` (`sl.{_top_name(module, sub)}`)" for sub in same)
                  + ".", ""]
    for sub in module.__all__:
        obj = getattr(module, sub)
        if sub in same:
            continue
        if inspect.ismodule(obj):
            lines += submodule_markdown(f"{name}.{sub}", obj, "###")
        else:
            lines += entry_markdown(f"{name}.{sub}", obj, "###")
    return lines


def _top_name(module, sub):
    obj = getattr(module, sub)
    return sub if getattr(sl, sub, None) is obj else next(
        n for n in sl.__all__ if getattr(sl, n, None) is obj)


def entry_markdown(name, obj, level):
    """One name's heading, signature, description and run example."""
    sig, desc, example = FALLBACK.get(name, (None, None, None))
    doc = own_doc(obj)
    if desc is None:
        if not doc:
            raise SystemExit(f"gen_api: scanlib.{name} has no docstring and no FALLBACK "
                             "description; add one.")
        desc = doc.split("\n\n")[0].replace("\n", " ")
    if example is None and doc:
        example = docstring_example(doc)
    if example is None:
        raise SystemExit(f"gen_api: scanlib.{name} has no example; add one to its "
                         "docstring or to FALLBACK.")
    sig = sig or signature(name, obj)
    block = as_doctest(example, new_namespace())
    return [f"{level} {name}", "", f"`{sig}`", "", desc, "", "```python", block, "```", ""]


# --- Tensor's methods and properties, the pytree helpers ---------------------------------------
# (member, description or None for the first paragraph of its own docstring).
TENSOR_MEMBERS = [
    ("shape", "The shape, a tuple of ints."),
    ("dtype", "The NumPy dtype."),
    ("device", "'cpu' or 'cuda:N': where the data lives."),
    ("ndim", "The number of axes."),
    ("size", "The number of elements."),
    ("requires_grad", ("Whether backward() and the transformations follow gradients to this "
                       "tensor (set at creation, or with requires_grad_).")),
    ("requires_grad_", None),
    ("is_leaf", "True for a tensor made by the user rather than computed on the tape."),
    ("grad", None),
    ("backward", ("Accumulate d(self)/d(leaf) into `.grad` of every leaf that requires grad. self "
                  "must be a scalar unless `cotangent` (of self's shape) is given, as in PyTorch. "
                  "The walk frees the graph as it goes: a second backward() over it raises "
                  "unless the first had `retain_graph=True`. `create_graph=True` records the "
                  "backward pass, so the gradients it leaves can be differentiated again.")),
    ("detach", None),
    ("item", None),
    ("numpy", None),
    ("tolist", None),
    ("to", None),
    ("astype", ("x converted to dtype, as ndarray.astype; differentiable: the gradient is cast "
                "back to x's dtype.")),
    ("at", None),
    ("clip", None),
    ("dot", None),
    ("T", "The transpose (axes reversed)."),
    ("real", None),
    ("imag", None),
    ("reshape", None),
    ("transpose", None),
    ("flatten", None),
    ("ravel", None),
]

TENSOR_EXAMPLE = """\
x = sl.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
x.shape, x.dtype, x.device, x.requires_grad
loss = (x ** 2).sum()
loss.backward(retain_graph=True)
x.grad
x.grad = None
loss.item()
x.detach().numpy()
x.at[0, 1].set(10.0)
x.astype('float32').dtype
x.T @ x
x.sum(axis=0), x.mean(), x.max(axis=1)"""

TENSOR_OPERATORS = (
    "Operators follow NumPy's broadcasting and types: `+ - * / // % **` (and their reflected "
    "forms, so `2.0 * x` works), `@`, unary `-`, `abs(x)`, comparisons `< <= > >= == !=` "
    "(boolean tensors, not differentiable), `~ & | ^` on booleans and integers, `x[index]` with "
    "NumPy's basic and advanced indexing (differentiable). Reductions and elementwise functions "
    "are also methods: `x.sum(axis)`, `.mean`, `.max`, `.min`, `.prod`, `.var`, `.std`, "
    "`.cumsum`, `.cumprod`, `.argmax`, `.argmin`, `.any`, `.all`, `.exp`, `.log`, `.sqrt`, "
    "`.tanh`, `.conj`, `.squeeze`. `np.asarray(x)` of a tensor that requires grad raises rather "
    "than drop its gradient (`x.detach()` first); `.item()` gives a Python number for logging.")


def _member_doc(obj) -> str | None:
    doc = inspect.getdoc(obj)
    return doc.split("\n\n")[0].replace("\n", " ") if doc else None


def _member_signature(name, obj) -> str:
    if isinstance(obj, property) or not callable(obj):
        return f"Tensor.{name}"
    try:
        params = list(inspect.signature(obj).parameters.values())[1:]  # without self
    except (TypeError, ValueError):
        return f"Tensor.{name}(...)"
    text = str(inspect.Signature(params))
    return f"Tensor.{name}" + re.sub(r"'([\w.\[\], |]+)'", r"\1", text)


DISTRIBUTED_HEADING = "## scanlib.distributed (import scanlib.distributed as dist)"
DISTRIBUTED_ANCHOR = "scanlibdistributed-import-scanlibdistributed-as-dist"


def distributed_markdown(old: str) -> list[str]:
    """scanlib.distributed (not imported by `import scanlib`: it needs the [mpi] extra), run at
    size 1. Where mpi4py is not installed its examples cannot run, so the section already in
    docs/api.md (old) is kept as it is."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        if DISTRIBUTED_HEADING not in old:
            raise SystemExit("gen_api: scanlib.distributed's section needs mpi4py to run its "
                             "examples; pip install -e '.[mpi]'") from None
        section = old.split(DISTRIBUTED_HEADING + "\n", 1)[1].split("\n## ", 1)[0]
        return [DISTRIBUTED_HEADING, *section.rstrip("\n").split("\n"), ""]
    import scanlib.distributed as dist

    lines = submodule_markdown("distributed", dist)
    return [DISTRIBUTED_HEADING, *lines[1:]]


def numpy_markdown() -> list[str]:
    """scanlib.numpy (not in __all__, so that `from scanlib import *` leaves NumPy's name alone):
    its docstring, then each of its names with the scanlib object it is."""
    import scanlib.numpy as jnp

    doc = own_doc(jnp).split("\n\n")
    lines = ["## scanlib.numpy (import scanlib.numpy as jnp)", "",
             " ".join(" ".join(part.split()) for part in doc[:2]).rpartition(" Imports")[0], ""]
    links = anchors(sl.__all__)
    for module, prefix in ((jnp, "jnp"), (jnp.linalg, "jnp.linalg")):
        views, others = [], []
        for name in module.__all__:
            obj = getattr(module, name)
            if name in ("linalg", "fft"):
                continue
            places = [("", sl)] if module is jnp else [("linalg.", sl.linalg), ("", sl)]
            same = [(p, n) for p, where in places
                    for n in sorted(where.__all__, key=lambda n: n != name)
                    if getattr(where, n, None) is obj][:1]
            if same:
                (place, target), = same
                anchor = (place + target).replace(".", "").lower() if place else links[target]
                views.append(f"`{name}`" if place + target == prefix[4:] + name else
                             f"`{name}` = [`sl.{place}{target}`](#{anchor})")
            else:
                others.append(f"`{name}`")
        lines += [f"`{prefix}`'s functions, each scanlib's own object (the entries above): "
                  + ", ".join(views) + ".", ""]
        if others:
            lines += [f"NumPy's dtypes and constants under JAX's names: {', '.join(others)}.", ""]
    return lines + submodule_markdown("numpy.fft", jnp.fft, "###")


def tensor_markdown() -> list[str]:
    lines = ["## Tensor methods and properties", "",
             ("What a `Tensor` carries and what can be done with it (see [`Tensor`](#tensor-1) "
              "for the class). Run together:"), "",
             "```python", as_doctest(TENSOR_EXAMPLE, new_namespace()), "```", "",
             TENSOR_OPERATORS, ""]
    for name, desc in TENSOR_MEMBERS:
        obj = inspect.getattr_static(sl.Tensor, name)
        desc = desc or _member_doc(obj)
        if not desc:
            raise SystemExit(f"gen_api: Tensor.{name} has no docstring and no description")
        lines += [f"### Tensor.{name}", "", f"`{_member_signature(name, obj)}`", "", desc, ""]
    return lines


# (function, example) for scanlib.pytree's helpers.
PYTREE = [
    ("tree_map", "sl.pytree.tree_map(lambda a, b: a + b, {'h': 1.0, 'c': (2.0, None)}, "
                 "{'h': 10.0, 'c': (20.0, None)})"),
    ("flatten", "leaves, treedef = sl.pytree.flatten({'h': sl.zeros(2), 'c': [1.0, 2.0]})\n"
                "leaves\ntreedef"),
    ("unflatten", "leaves, treedef = sl.pytree.flatten({'h': 1.0, 'c': [2.0, 3.0]})\n"
                  "sl.pytree.unflatten(treedef, [x * 10 for x in leaves])"),
    ("flatten_with_paths", "paths, leaves, _ = sl.pytree.flatten_with_paths("
                           "{'h': 1.0, 'c': [2.0, 3.0]}, 'init')\npaths"),
    ("structure_str", "sl.pytree.structure_str(sl.pytree.flatten((1.0, {'h': 2.0}))[1])"),
]


def pytree_markdown() -> list[str]:
    doc = own_doc(sl.pytree) or ""
    lines = ["## pytree", "", doc.split("\n\n")[0].replace("\n", " "), ""]
    for name, example in PYTREE:
        fn = getattr(sl.pytree, name)
        lines += [f"### pytree.{name}", "", f"`{signature('pytree.' + name, fn)}`", "",
                  (own_doc(fn) or "").split("\n\n")[0].replace("\n", " "), "",
                  "```python", as_doctest(example, new_namespace()), "```", ""]
    return lines


# The main entry points: their whole docstring (every option) is shown under the example.
FULL_DOC = ("scan", "scan_plan", "while_loop", "fori_loop", "checkpoint", "vmap", "jit", "grad",
            "value_and_grad", "vjp", "jvp", "linearize", "jacfwd", "jacrev", "hessian",
            "associative_scan")


def full_doc_markdown(name, obj) -> list[str]:
    doc = own_doc(obj)
    if not doc:
        raise SystemExit(f"gen_api: scanlib.{name} has no docstring")
    return ["<details><summary>Full docstring</summary>", "", "```text", doc, "```", "",
            "</details>", ""]


# --- refreshing the outputs in a markdown file of >>> blocks ----------------------------------
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def refresh_markdown(text: str) -> str:
    """Re-run every ```python block that holds >>> examples (one namespace per file, in
    order) and write each example's real output under it."""
    ns = new_namespace()

    def redo(match):
        body = match.group(1)
        if ">>>" not in body:
            return match.group(0)
        sources, lines = [], body.splitlines()
        for line in lines:
            if line.startswith(">>> "):
                sources.append(line[4:])
            elif line.startswith("...") and sources:
                sources[-1] += "\n" + line[4:]
        return "```python\n" + "\n".join(_example_block(s, ns) for s in sources) + "\n```"

    return _BLOCK.sub(redo, text)


def _example_block(source: str, ns: dict) -> str:
    first, *rest = source.splitlines()
    lines = [">>> " + first] + ["... " + r for r in rest]
    multiline_block = bool(rest) and first.rstrip().endswith(":")
    out = run_chunk(source + ("\n" if multiline_block else ""), ns)
    if out.strip():
        lines += _doctest_safe(out).rstrip("\n").splitlines()
    return "\n".join(lines)


# --- the README's example and its plan ----------------------------------------------------
PLAN_BEGIN = "<!-- plan: generated by docs/gen_api.py from the example above -->\n```\n"
PLAN_END = "```\n<!-- plan end -->"
PLAN_CALL = "print(sl.scan_plan(step, sl.zeros((4, 16)), xs))"


def refresh_readme(text: str) -> str:
    head, sep, rest = text.partition("## A dozen lines")
    match = _BLOCK.search(rest)
    if not sep or not match:
        raise SystemExit("gen_api: README.md has no '## A dozen lines' section with a python "
                         "block")
    code = match.group(1)
    *body, last = code.rstrip("\n").splitlines()
    statement = last.split("  #")[0].rstrip()
    ns = new_namespace()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec("\n".join([*body, statement]), ns)  # noqa: S102
    new_last = f"{statement}  # {out.getvalue().strip()}"
    rest = rest.replace(code, "\n".join([*body, new_last]) + "\n", 1)
    plan = io.StringIO()
    with contextlib.redirect_stdout(plan):
        exec(PLAN_CALL, ns)  # noqa: S102
    before, found, after = rest.partition(PLAN_BEGIN)
    if not found or PLAN_END not in after:
        raise SystemExit("gen_api: README.md lacks the plan markers after the example")
    after = after.split(PLAN_END, 1)[1]
    return head + sep + before + PLAN_BEGIN + plan.getvalue() + PLAN_END + after


# --- the package's stub ----------------------------------------------------------------------
STUB_HEAD = """\
# Generated by docs/gen_api.py from scanlib as imported (a test checks it is up to date); do not
# edit. Editors and type checkers read this file for `import scanlib`: functions and classes are
# re-exported from the modules that define them (their annotations are there), and primitives,
# objects called as functions, and functions made by a factory are declared here with the
# signature they have at run time (`inspect.signature(scanlib.exp)`).
"""


def _defined_in(name, obj):
    """(module, attribute) under which obj is defined, for a `from module import attribute`."""
    if isinstance(obj, types.ModuleType):
        parent, _, leaf = obj.__name__.rpartition(".")
        return parent, leaf
    module = sys.modules[obj.__module__]
    if getattr(module, getattr(obj, "__name__", ""), None) is obj:
        return obj.__module__, obj.__name__
    found = [k for k, v in vars(module).items() if v is obj]
    if not found:
        raise SystemExit(f"gen_api: cannot find where scanlib.{name} is defined")
    return obj.__module__, name if name in found else found[0]


def _relative(module: str) -> str:
    return "." + module[len("scanlib."):] if module != "scanlib" else "."


def _made_by_a_factory(obj) -> bool:
    """A function whose def is inside another function (special.square, reductions.argmax):
    type checkers see the factory's result, not its signature, so the stub declares it."""
    code = getattr(inspect.unwrap(obj), "__code__", None)  # a decorated def is its own
    module = sys.modules.get(getattr(obj, "__module__", ""), None)
    return code is not None and getattr(module, code.co_name, None) is not obj


def _declared_stub(name, prim) -> str:
    sig = re.sub(r"'([\w.\[\], |]+)'", r"\1", str(inspect.signature(prim)))
    doc = inspect.cleandoc(prim.__doc__ or "").split("\n\n")[0]  # without its example
    doc = doc.replace('"""', "'''")
    body = ("\n" + textwrap.fill(" ".join(doc.split()), 96, initial_indent='    """',
                                 subsequent_indent="    ") + '"""') if doc else " ..."
    return f"{_folded_def(name, sig)}{body}"


def _folded_def(name, sig, width=100):
    """`def name(sig):`, its parameters folded onto further lines when it is too long."""
    head = f"def {name}{sig}:"
    if len(head) <= width:
        return head
    close = sig.rindex(")")
    params, depth, start = [], 0, 1
    for i, ch in enumerate(sig[:close]):
        depth += ch in "[(" and i > 0
        depth -= ch in "])"
        if ch == "," and depth == 0:
            params.append(sig[start:i].strip())
            start = i + 1
    params.append(sig[start:close].strip())
    pieces = [p + "," for p in params[:-1]] + [params[-1] + sig[close:] + ":"]
    lines, line = [], f"def {name}("
    for piece in pieces:
        if len(line) + len(piece) > width and line.strip() != f"def {name}(":
            lines.append(line.rstrip())
            line = " " * 8
        line += piece + " "
    return "\n".join(lines + [line.rstrip()])


NOT_IMPORTED = ("distributed",)  # needs the [mpi] extra: `import scanlib.distributed`
TYPE_NAMES = ("ArrayLike", "Axis", "DTypeLike", "Device", "PyTree", "Shape")


def stub_text() -> str:
    """scanlib/__init__.pyi: every public attribute of scanlib, as it is at run time."""
    from scanlib.ops.primitive import Primitive

    # (a submodule that `import scanlib` does not import is no attribute of it until imported)
    names = sorted(n for n in dir(sl) if not n.startswith("_") and n not in NOT_IMPORTED)
    imports, defs = {}, []
    for name in names:
        obj = getattr(sl, name)
        if isinstance(obj, Primitive) or _made_by_a_factory(obj):
            defs.append(_declared_stub(name, obj))
            continue
        module, attr = _defined_in(name, obj)
        imports.setdefault(_relative(module), []).append(f"{attr} as {name}")
    used = sorted(n for n in TYPE_NAMES if any(re.search(rf"\b{n}\b", d) for d in defs))
    lines = [STUB_HEAD, f"from .tape.types import {', '.join(used)}"]
    for module in sorted(imports):
        lines.append(f"from {module} import " + ", ".join(sorted(imports[module])))
    lines += ["", f"__version__: str = {sl.__version__!r}", ""]
    lines += [d + "\n" for d in defs]
    lines += ["__all__ = ["] + [f"    {n!r}," for n in sl.__all__] + ["]"]
    return _wrap_imports("\n".join(lines)) + "\n"


def _wrap_imports(text: str, width: int = 100) -> str:
    """`from m import a as a, b as b, ...` lines longer than width, folded in parentheses."""
    out = []
    for line in text.splitlines():
        if not line.startswith("from ") or len(line) <= width:
            out.append(line)
            continue
        head, _, rest = line.partition(" import ")
        out.append(f"{head} import (")
        current = "   "
        for item in rest.split(", "):
            if len(current) + len(item) + 2 > width:
                out.append(current)
                current = "   "
            current += f" {item},"
        out += [current, ")"]
    return "\n".join(out)


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    check = "--check" in argv
    targets = {os.path.join(HERE, "api.md"): api_markdown,
               os.path.join(HERE, "tutorial.md"): refresh_markdown,
               os.path.join(HERE, "internals.md"): refresh_markdown,
               os.path.join(HERE, "porting.md"): refresh_markdown,
               os.path.join(HERE, "random.md"): refresh_markdown,
               os.path.join(ROOT, "README.md"): refresh_readme,
               os.path.join(ROOT, "scanlib", "__init__.pyi"): lambda _: stub_text()}
    stale = []
    for path, make in targets.items():
        old = read(path) if os.path.exists(path) else ""
        new = make(old)
        if new != old:
            stale.append(os.path.relpath(path, ROOT))
            if not check:
                with open(path, "w") as f:
                    f.write(new)
    if check and stale:
        print(f"out of date: {', '.join(stale)}; run python docs/gen_api.py", file=sys.stderr)
        return 1
    print(("up to date: " if check else "wrote: ") + ", ".join(
        os.path.relpath(p, ROOT) for p in (targets if check else stale)) if (check or stale)
        else "nothing changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
