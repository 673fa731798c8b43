"""The parts of a linearization of a scan body (linearize.py builds them): each residual, the
value the backward body reads, with its policy (the seed's names):

  CLONE                     the incoming carry (stored in a carry history buffer)
  KEEP                      an intermediate (stacked per step), unless it already is a y or
                            the next carry, which are stored anyway and only referenced
  REMOVE_XS                 a slice of xs: the xs array is referenced, nothing is stored
  REMOVE_ADDITIONAL_INPUTS  a closed-over tensor, or a value computed from closed-over
                            tensors only: referenced once (recomputed once, not per step)

and its `Kind`, where the backward pass gets it; and the `Linearization` that holds them.

Imports tape.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..tape import Graph, Var

CLONE, KEEP = "CLONE", "KEEP"
REMOVE_XS, REMOVE_ADDITIONAL_INPUTS = "REMOVE_XS", "REMOVE_ADDITIONAL_INPUTS"


class Kind(enum.Enum):
    """Where the backward pass gets a residual from."""

    AUG = "aug"  # an extra output of the forward scan, one value per step
    XS = "xs"  # a scanned input: each step's slice
    YS = "ys"  # a y output: each step's y
    CONST = "const"  # a closed-over input, the same at every step
    RECOMPUTED = "recomputed"  # a value of closed-over inputs only, recomputed once per call


@dataclass(frozen=True, eq=False)
class Residual:
    """One value the backward body reads (`var`, a value of the forward body), its policy,
    and where the backward pass gets it: `index` counts among the forward scan's extra
    outputs (AUG), its xs (XS), its ys (YS) or the body's constants (CONST); it is None
    for RECOMPUTED."""

    var: Var
    policy: str
    kind: Kind
    index: int | None = None

    @property
    def shape(self) -> tuple:
        return self.var.shape

    @property
    def dtype(self):
        return self.var.dtype

    @property
    def per_step(self) -> bool:
        """Whether the backward scan reads it as one of its xs (a value per step); the others
        are its constants."""
        return self.kind in (Kind.AUG, Kind.XS, Kind.YS)


@dataclass(eq=False, repr=False)  # compared and hashed by identity, as a param of scan_p
class Linearization:
    """What differentiating one scan needs: the forward body extended with the residuals it
    must output (`aug_body`), the backward body, and the residual list in backward-xs order.
    The backward body's inputs are the carry cotangents, one accumulator per closed-over
    input that needs a gradient, the ys' cotangents, then the per-step residuals; its
    outputs the cotangents of the carries in `ct_carry_out`, the accumulators, then those of
    the xs that need one."""

    body: Graph
    aug_body: Graph
    bwd_body: Graph
    residuals: list
    ct_carry: list  # which carries have a cotangent entering a backward step
    ct_ys: list  # which ys have a cotangent (a backward xs) at all
    x_needs: list  # which xs, and which closed-over inputs, get one out
    k_needs: list
    num_ys: int
    bwd_extra_consts: list  # constants the backward body made while traced (after body's)
    ct_carry_out: list  # which carries get a cotangent out of a backward step
    # Inputs whose cotangent is zero at every step by construction (no path reaches them):
    # the VJP gives them none, not zeros.
    zero_carries: list
    zero_xs: list
    zero_ks: list
    bwd_sources: dict  # a var of bwd_body -> the forward value it stands for
    # Made for a walk of an enclosing level: custom_vjp calls in the body differentiated
    # through fwd's operations (see tape/levels.py).
    as_fwd: bool = False

    @property
    def per_step_residuals(self) -> list:
        """The residuals the backward scan reads per step, in the order of its xs."""
        return [r for r in self.residuals if r.per_step]

    @property
    def num_bwd_carry(self) -> int:
        """The backward scan's carry: carry cotangents, then one accumulator per constant."""
        return sum(self.ct_carry) + sum(self.k_needs)

    @property
    def bwd_sum_carries(self) -> tuple:
        """The backward carries that are gradient accumulators (may be summed reordered)."""
        return tuple(range(sum(self.ct_carry), self.num_bwd_carry))
