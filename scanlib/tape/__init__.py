"""The tape: Tensor, per-thread recording state, recorded graphs, and the backward walk.

Imports only scanlib.backends.
"""

from .backward import Node, backward_pass, reaches_other_leaves, record
from .graph import Eqn, Graph, GraphBuilder, Literal, Var, format_graph
from .state import current_builder, differentiating, enable_grad, grad_enabled, no_grad, tracing
from .tensor import Tensor, is_differentiable_dtype, type_str

__all__ = [
    "Node", "backward_pass", "reaches_other_leaves", "record", "Eqn", "Graph", "GraphBuilder",
    "Literal", "Var", "format_graph", "current_builder", "differentiating", "enable_grad",
    "grad_enabled", "no_grad", "tracing", "Tensor", "is_differentiable_dtype", "type_str",
]
