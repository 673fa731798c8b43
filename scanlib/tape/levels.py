"""Levels: JAX's meaning of custom_vjp and custom_jvp under nested differentiation.

A custom_vjp call is differentiated by its bwd at one level only: the innermost grad or vjp
whose inputs it depends on (JAX's innermost trace that sees the call). Every enclosing
differentiation (grad of grad, a hessian by jacrev, a jvp of a gradient) differentiates fwd's
operations, and bwd's, as any others; forward mode at the call's own level raises, as in JAX.
A custom_jvp's rule likewise holds at its own level, and the levels around it differentiate
the rule's operations; a custom call in the rule's linear code (applied to the tangent) is
transposed through its function, as JAX transposes linear code. A call whose rules are
`exact` (its function's derivative at every order: lax.custom_root's) takes part in none of
this.

A node whose rule is such (a custom call, or a loop or checkpoint whose graph holds one)
records its level when it is made (`assign`, `level_of`). The tape's walk (backward.py) knows
its own level (its grad or vjp call's watch, STATE.walking) and runs the rule of a node of
another level with STATE.custom_as_fwd set; while a node's rule runs, STATE.rule_level is that
node's level, which is what the forward the rule runs again (a checkpoint's replay, a scan
bound again for more residuals) belongs to. The rules' own code (fwd, bwd) runs at the
enclosing levels (`at_enclosing_levels`). Inside a loop body every call takes the body's
level; where that cannot be JAX's (MIXED, and a custom call made by another's rule there),
the walk raises NotImplementedError rather than give another number.

Imports tape.state, tape.graph and tape.tensor.
"""

from __future__ import annotations

import contextlib
import weakref

from . import state
from .graph import Eqn, Var, settled_call
from .tensor import Tensor


# JAX's words: a custom_vjp has no rule for forward mode at its own level.
FORWARD_MODE = "can't apply forward-mode autodiff (jvp) to a custom_vjp function."


class ForwardModeEncloses(Exception):
    """Raised by a custom call that forward mode's trace (forward_jvp) reaches inside a grad
    or vjp of its own: forward mode is an enclosing level there, which differentiates the
    rules' operations (jvp of a gradient, a hessian by jacfwd of jacrev), as the transpose of
    a VJP does; forward_jvp hands the jvp to it (also an exact custom_vjp's)."""


# Loop and checkpoint nodes whose inputs are of several levels (see assign).
MIXED = weakref.WeakSet()
# Calls in the linear code of a custom_jvp's rule (their level a `transpose` watch): their
# level for every other walk than that transposition's (see assign).
OUTER = weakref.WeakKeyDictionary()

MIXED_LEVELS = (
    "a scan, loop or checkpoint body calls a custom_vjp or custom_jvp and reads values of two "
    "nested derivatives (the variables of an inner grad and of one around it), and the outer one "
    "differentiates it. JAX differentiates each such call by its rule at its own level, which "
    "scanlib cannot tell apart inside a loop body, and it stops rather than give another "
    "number. Call the custom function on the outer values outside the body (pass its result "
    "in), or write it without a custom rule.")


def assign(node, inputs):
    """Give a node whose rule holds for one level (a custom_vjp call, or a loop or
    checkpoint whose graph holds one) its level (level_of). Forward mode at a custom_vjp's own
    level raises, as in JAX. A loop or checkpoint whose inputs are of several levels goes
    into MIXED: its calls may each be of another level, which the walk cannot tell apart
    (backward.py raises when an enclosing level walks it)."""
    prim = node.prim
    if not holds(prim, node.params):
        return
    node.level = level_of(inputs)
    if node.level is not None and node.level.forward and holds(prim, node.params, ("vjp",)):
        raise TypeError(FORWARD_MODE)
    st = state.STATE
    if node.level is not None and node.level.transpose:
        # transposed through its function by the rule's VJP (JAX transposes linear code so);
        # a derivative of that differentiates it as any call of its inputs' level
        outer = [w for w in st.watched if not w.transpose]
        found = None
        for x in inputs:
            if outer and type(x) is Tensor and x.requires_grad:
                found = _deeper(found, _level_of_tensor(x, outer))
        if found is not None:
            OUTER[node] = found
    if st.rule_level is not None:  # made by a walk running its rule: as that node (a replay)
        if st.rule_mixed:
            MIXED.add(node)
    elif prim.own_level == "graphs" and _of_several_levels(inputs):
        MIXED.add(node)


def _of_several_levels(inputs):
    st = state.STATE
    if st.walking is not None or len(st.watched) <= 1:
        return False
    found = {_level_of_tensor(x, st.watched) for x in inputs
             if type(x) is Tensor and x.requires_grad}
    return len(found) > 1


def graphs_of(params):
    """The graphs among a node's params (a loop's body, cond's branches)."""
    for v in params.values():
        if hasattr(v, "eqns"):
            yield v
        elif isinstance(v, (tuple, list)):
            yield from (g for g in v if hasattr(g, "eqns"))


def holds(prim, params, kinds=("vjp", "jvp")):
    """Whether an application of prim is a call whose rule holds for one level of
    differentiation (`own_level`: "vjp" a custom_vjp, "jvp" a custom_jvp, of `kinds`), or
    runs a graph that holds one (a loop, checkpoint or cond). A call whose rules are
    `exact` (the rule is its function's derivative at every order: lax.custom_root's) is
    differentiated by its rule at every level, which then means the same."""
    own = prim.own_level
    if own == "graphs":
        return any(calls_own_level(g, kinds) for g in graphs_of(params))
    return own in kinds and not getattr(params.get("rules"), "exact", False)


def calls_own_level(graph, kinds=("vjp", "jvp")):
    """Whether graph, or one nested in its equations, holds a call of `kinds` (see holds)."""
    memo = graph.__dict__.setdefault("_own_level", {})
    if kinds not in memo:
        memo[kinds] = any(holds(e.prim, e.params, kinds) for e in graph.eqns)
    return memo[kinds]


def settle(builder, outs):
    """A leveled node just made inside a trace (outs: its Tensors; its equation the last of
    builder's): its level began inside that trace, since a trace's own values require grad
    only through a grad, vjp or jvp running in it, so it ends there too. Every later
    differentiation of the trace's graph (a scan body's, vmap's) is of a level around it,
    which must differentiate what that level's rule differentiated as operations, as JAX's:
    a custom call reached from the inputs that require grad becomes its differentiated
    function's equations (the jvp rule's primal output, fwd's), and so do those of a loop,
    checkpoint or cond, at every depth (graph.differentiated_graph with settle); a call no
    such input reaches keeps its rule. The node keeps its own params for its level's walk.
    Not for a node of several levels (MIXED: the walk raises), nor a call in a custom_jvp
    rule's linear code (a transpose level)."""
    node, st = outs[0]._node, state.STATE
    if (node is None or node.level is None or node.level.transpose or node in OUTER
            or node in MIXED or st.walking is not None or st.rule_level is not None
            or builder.process_primitive is not None or builder.whole_call
            or not builder.eqns or builder.eqns[-1].outvars[0] is not outs[0]._var):
        return
    eqn, prim = builder.eqns[-1], node.prim
    flags = [type(x) is Tensor and x.requires_grad for x in node.inputs]
    params = prim.differentiated(eqn.params, flags, settle=True) if prim.differentiated else None
    found = settled_call(prim, params or eqn.params, eqn.invars)
    if found is None:
        if params is not None:
            builder.eqns[-1] = Eqn(prim, eqn.invars, params, eqn.outvars)
        return
    eqns, outvars = found
    if not all(isinstance(v, Var) for v in outvars):
        return  # a constant output: the call stays as it was
    builder.eqns[-1:] = eqns
    renamed = dict(zip(eqn.outvars, outvars))
    for t in outs:
        t._var = renamed.get(t._var, t._var)


def level_of(inputs):
    """The level of a node made now from `inputs`: that of the node whose rule a walk is
    running, or of the walk (a loop or checkpoint replayed by a walk belongs to it; enclosing
    walks see what it computed); else the innermost running grad/vjp whose inputs they depend
    on through the tape (None: no walk of a grad or vjp reaches them, a Tensor.backward's
    only). With one grad running, that is it: only a Tensor.backward could walk such a node
    as well, and for it the two readings are one."""
    st = state.STATE
    if st.rule_level is not None:
        return st.rule_level
    if st.walking is not None:
        return st.walking
    watched = st.watched
    if not watched:
        return None
    if len(watched) == 1 and not (watched[0].forward or watched[0].transpose):  # exact there
        return watched[0] if any(type(x) is Tensor and x.requires_grad for x in inputs) else None
    best = None
    for x in inputs:
        if type(x) is Tensor and x.requires_grad:
            best = _deeper(best, _level_of_tensor(x, watched))
    return best


def _deeper(a, b):
    return b if a is None or (b is not None and b.depth > a.depth) else a


def _level_of_tensor(x, watched):
    """The innermost of `watched` whose inputs x depends on, by a walk over the nodes made
    since the outermost started, each node's answer kept while the same calls run (so calls
    that branch off one long chain do not walk it again each)."""
    st = state.STATE
    key = tuple(watched)  # held: no later call can take one of their ids
    if st.level_memo[0] != key:
        st.level_memo = (key, weakref.WeakKeyDictionary())
    memo, first = st.level_memo[1], min(w.first_seq for w in watched)

    def own(t):  # the innermost watch t is an input of
        found = None
        for w in watched:
            if id(t) in w.ids:
                found = _deeper(found, w)
        return found

    def usable(node):
        return node is not None and node.seq >= first and node.inputs is not None

    level = own(x)
    if not usable(x._node):
        return level
    stack = [x._node]
    while stack:  # post-order, without recursion
        node = stack[-1]
        if node in memo:
            stack.pop()
            continue
        if any(node.level is w for w in watched):  # a leveled node's is its inputs' already
            memo[node] = node.level
            stack.pop()
            continue
        ins = [i for i in node.inputs if type(i) is Tensor and i.requires_grad]
        todo = [i._node for i in ins if usable(i._node) and i._node not in memo]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        found = None
        for i in ins:
            found = _deeper(found, own(i))
            if usable(i._node):
                found = _deeper(found, memo[i._node])
        memo[node] = found
    return _deeper(level, memo[x._node])


@contextlib.contextmanager
def at_enclosing_levels():
    """A custom rule's own code (fwd, bwd) run by a walk: it computes at the levels that
    enclose the walk's, as JAX runs a rule on the tracers of the trace below, so a node it
    makes takes its level from the inputs (level_of), not from the walk."""
    st = state.STATE
    saved = st.walking, st.rule_level, st.rule_code
    st.walking, st.rule_level, st.rule_code = None, None, True
    try:
        yield
    finally:
        st.walking, st.rule_level, st.rule_code = saved


@contextlib.contextmanager
def own_levels():
    """A primitive's impl that differentiates on fresh tensors of its own (while_loop's
    derivative primitive): its walks are its own levels, whatever walk binds it."""
    st = state.STATE
    saved = st.walking, st.rule_level, st.custom_as_fwd, st.rule_code, st.watched
    st.walking, st.rule_level, st.custom_as_fwd, st.rule_code, st.watched = (
        None, None, False, False, [])
    try:
        yield
    finally:
        st.walking, st.rule_level, st.custom_as_fwd, st.rule_code, st.watched = saved
