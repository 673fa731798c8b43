"""The interpreters of a graph or of a running function, one per transformation, each asking
the primitives it meets for their rule (ops/primitive.py documents the rules):

- forward.py: forward mode (jvp): values with their tangents beside them, by `prim.jvp`.
- batching.py: vmap: values with a batch axis, by `prim.vmap` or `prim.batch`.
- reverse.py: the reverse walk over a graph's equations, by `prim.vjp` (the tape's walk,
  tape/backward.py, is the same over recorded nodes).

Imports backends, tape, ops, pytree and tracing (rank 3), never scan or the transformations
above it: scan's own rules live beside scan.
"""
