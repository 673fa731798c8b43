"""bench: scanlib against hand-written NumPy BPTT and its peers (HIPS autograd, torch, JAX).

Run it with `python -m bench` (see bench/NOTES.md). This file imports nothing, so that
`python -m bench` can set the BLAS thread variables before NumPy is first imported.
"""
