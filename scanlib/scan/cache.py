"""Reuse of the expensive, shape-only work of a scan across calls.

f is traced on every call (cheap, and always faithful to the f given now, including a fresh
closure per training step), but the trace's fingerprint picks one canonical graph per
distinct computation, and the compiled loops and linearizations hang off that graph. The
canonical graph keeps no constant values: those come from each call's own trace.
Imports tape.
"""

from __future__ import annotations

import collections
import threading

from ..tape.graph import Graph, fingerprint

_MAX = 256
_lock = threading.Lock()
_graphs: "collections.OrderedDict[object, Graph]" = collections.OrderedDict()


def canonical(graph: Graph) -> Graph:
    """The cached graph computing the same as `graph` (registering it when new)."""
    # The device too: a linearization made on one device holds constants there.
    key = (fingerprint(graph), graph.device)
    with _lock:
        hit = _graphs.get(key)
        if hit is not None:
            _graphs.move_to_end(key)
            return hit
        canon = Graph(graph.invars, graph.constvars, [None] * len(graph.consts), graph.eqns,
                      graph.outvars, graph.name, graph.device)
        canon._fingerprint = key[0]
        _graphs[key] = canon
        if len(_graphs) > _MAX:
            _graphs.popitem(last=False)
        return canon


def clear():
    """Forget every cached graph (and its compiled loops)."""
    with _lock:
        _graphs.clear()
