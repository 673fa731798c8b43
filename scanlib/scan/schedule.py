"""Checkpoint schedules of `scan(..., checkpoint=...)`: which carries the forward pass keeps
and which steps the backward pass recomputes. Only arithmetic lives here (parsing the option,
the segment length, the binomial split and the cost of each); api.py runs a schedule as nested
checkpointed scans.

Imports nothing from scanlib.
"""

from __future__ import annotations

import math
import numbers

ALLOWED = ('None (keep every step\'s residuals), an int k >= 1 (keep the carry every k steps), '
           '"sqrt" (k near sqrt(T)), or ("revolve", s) with an int s >= 1 (a binomial '
           'schedule keeping at most s carries)')


class Segments:
    """Keep the carry at the start of every k-step segment; the backward pass recomputes one
    segment at a time (storing that segment's residuals only), all but the last, whose
    residuals the forward pass keeps (the backward pass starts with them). k=None ("sqrt"):
    the k that makes the kept carries plus one segment's residuals smallest, (T / k) *
    carry_bytes + k * step_bytes, that is sqrt(T * carry_bytes / step_bytes): sqrt(T) when
    a carry and one step's residuals weigh the same (and when their sizes are not given)."""

    def __init__(self, k):
        self.k = k

    def length(self, T, carry_bytes=None, step_bytes=None):
        if self.k is not None:
            return self.k
        ratio = carry_bytes / step_bytes if carry_bytes and step_bytes else 1.0
        return max(1, min(max(T, 1), round(math.sqrt(max(T, 1) * ratio))))

    def describe(self, T, carry_bytes, step_bytes):
        k = self.length(T, carry_bytes, step_bytes)
        k = min(k, T) if T else k
        n, rest = divmod(T, k)
        kept = max(n - 1, 0) + (1 if rest else 0)  # the last segment keeps its residuals
        parts = f"{n} segments of {k} steps" + (f" and one of {rest}" if rest else "")
        return [f"checkpoint: {'sqrt: ' if self.k is None else ''}{parts}",
                f"  kept between the passes: {kept} carries ({kept * carry_bytes:,} bytes) "
                f"and the last segment's residuals",
                f"  recomputed in backward: each segment's forward once, but the last one's "
                f"({max(T - k, 0)} steps in all)",
                f"  peak residuals of one segment: {min(k, T) * step_bytes:,} bytes"]


class Revolve:
    """Griewank's binomial schedule with at most `snapshots` carries kept (the first one is
    the initial carry): the fewest recomputations r with C(s + r, s) >= T, splitting each
    range where the binomial recurrence says."""

    def __init__(self, snapshots):
        self.snapshots = snapshots

    MAX_REPETITIONS = 40  # each one is a level of nested checkpoints (Python frames)

    def repetitions(self, T):
        r = 0
        while math.comb(self.snapshots + r, self.snapshots) < T:
            r += 1
        if r > self.MAX_REPETITIONS:
            fewest = next(s for s in range(1, T + 1)
                          if math.comb(s + self.MAX_REPETITIONS, s) >= T)
            raise ValueError(
                f"scan: checkpoint=('revolve', {self.snapshots}) over T={T} steps would "
                f"recompute each step up to {r} times, nested that deep. Keep at least "
                f"{fewest} snapshots for this length (('revolve', {fewest})), or use "
                f"checkpoint='sqrt'.")
        return r

    def describe(self, T, carry_bytes, step_bytes):
        s, r = self.snapshots, self.repetitions(T)
        return [f"checkpoint: revolve with {s} snapshots: each step recomputed at most {r} "
                f"times",
                f"  kept between the passes: at most {s} carries ({s * carry_bytes:,} bytes)",
                f"  step evaluations, forward + backward: {T + recomputed_steps(T, s, r)} "
                f"(plain scan: {T})",
                f"  peak residuals of one step: {step_bytes:,} bytes"]


def binomial_split(T, s, r):
    """How many steps the checkpointed first part of a revolve range of T steps takes, so that
    it fits s snapshots and r - 1 recomputations and the rest fits s - 1 and r."""
    return min(math.comb(s + r - 1, s), T - 1)


def recomputed_steps(T, s, r):
    """Steps the backward pass of a revolve range evaluates again (an explicit stack, no
    recursion): each checkpointed first part is run once more, then reversed itself."""
    total, stack = 0, [(T, s, r)]
    while stack:
        T, s, r = stack.pop()
        if T <= 1:
            continue
        m = binomial_split(T, s, r)
        total += m
        stack += [(T - m, s - 1, r), (m, s, r - 1)]
    return total


def parse(option):
    """The schedule object for scan's `checkpoint` option (None stays None)."""
    if option is None:
        return None
    if isinstance(option, bool):
        raise ValueError(f"scan: checkpoint={option!r} is not a schedule; use {ALLOWED}.")
    if isinstance(option, numbers.Integral):
        if int(option) < 1:
            raise ValueError(f"scan: checkpoint={option!r}: a segment length must be >= 1; "
                             f"use {ALLOWED}.")
        return Segments(int(option))
    if option == "sqrt":
        return Segments(None)
    if (isinstance(option, tuple) and len(option) == 2 and option[0] == "revolve"
            and isinstance(option[1], numbers.Integral) and not isinstance(option[1], bool)
            and option[1] >= 1):
        return Revolve(int(option[1]))
    raise ValueError(f"scan: checkpoint={option!r} is not a schedule; use {ALLOWED}.")
