"""Temporal parallelisation of the Kalman filter and RTS smoother (Särkkä and
García-Fernández, 2021): each step becomes an element of an associative operation, combined by
`lax.associative_scan` (forwards for the filter, `reverse=True` for the smoother), the
elements built with `vmap`, the operators written with `jnp.linalg.solve` on batched
matrices; the marginal log-likelihood from the filtered predictions, and gradients through
both prefix scans. Written in the style of dynamax's parallel inference module.
Stands for https://github.com/probml/dynamax/blob/main/dynamax/linear_gaussian_ssm/parallel_inference.py
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax, vmap
from jax.scipy.stats import multivariate_normal as mvn


class LGSSM(NamedTuple):
    m0: jnp.ndarray
    P0: jnp.ndarray
    F: jnp.ndarray
    Q: jnp.ndarray
    H: jnp.ndarray
    R: jnp.ndarray


class FilterElement(NamedTuple):
    A: jnp.ndarray
    b: jnp.ndarray
    C: jnp.ndarray
    J: jnp.ndarray
    eta: jnp.ndarray


class SmoothElement(NamedTuple):
    E: jnp.ndarray
    g: jnp.ndarray
    L: jnp.ndarray


def make_model(params):
    """Covariances from unconstrained factors, so that gradients reach every entry."""
    def psd(L):
        return L @ L.T + 1e-3 * jnp.eye(L.shape[-1])

    return LGSSM(params["m0"], psd(params["L0"]), params["F"], psd(params["LQ"]),
                 params["H"], psd(params["LR"]))


def _first_element(model, y):
    m1 = model.F @ model.m0
    P1 = model.F @ model.P0 @ model.F.T + model.Q
    S = model.H @ P1 @ model.H.T + model.R
    K = jnp.linalg.solve(S, model.H @ P1).T
    A = jnp.zeros_like(model.F)
    b = m1 + K @ (y - model.H @ m1)
    C = P1 - K @ S @ K.T
    n = model.F.shape[0]
    return FilterElement(A, b, C, jnp.zeros((n, n)), jnp.zeros(n))


def _generic_element(model, y):
    F, Q, H, R = model.F, model.Q, model.H, model.R
    S = H @ Q @ H.T + R
    K = jnp.linalg.solve(S, H @ Q).T
    A = F - K @ H @ F
    b = K @ y
    C = Q - K @ H @ Q
    HF = H @ F
    eta = HF.T @ jnp.linalg.solve(S, y)
    J = HF.T @ jnp.linalg.solve(S, HF)
    return FilterElement(A, b, C, J, eta)


@vmap
def filtering_operator(elem1, elem2):
    A1, b1, C1, J1, eta1 = elem1
    A2, b2, C2, J2, eta2 = elem2
    n = A1.shape[0]
    I = jnp.eye(n)
    temp = jnp.linalg.solve((I + C1 @ J2).T, A2.T).T
    A = temp @ A1
    b = temp @ (b1 + C1 @ eta2) + b2
    C = temp @ C1 @ A2.T + C2
    temp = jnp.linalg.solve((I + J2 @ C1).T, A1).T
    eta = temp @ (eta2 - J2 @ b1) + eta1
    J = temp @ J2 @ A1 + J1
    return FilterElement(A, b, 0.5 * (C + C.T), 0.5 * (J + J.T), eta)


def parallel_filter(model, emissions):
    """Filtered means and covariances of x_1..x_T (x_0 ~ N(m0, P0), y_t observes x_t)."""
    first = _first_element(model, emissions[0])
    rest = vmap(lambda y: _generic_element(model, y))(emissions[1:])
    elems = jax.tree_util.tree_map(lambda f, r: jnp.concatenate([f[None], r]), first, rest)
    out = lax.associative_scan(filtering_operator, elems)
    return out.b, out.C


def log_likelihood(model, emissions, means, covs):
    """log p(y_1:T) from the one-step predictions the filtered moments give."""
    prev_means = jnp.concatenate([model.m0[None], means[:-1]])
    prev_covs = jnp.concatenate([model.P0[None], covs[:-1]])

    def one(m, P, y):
        mp = model.F @ m
        Pp = model.F @ P @ model.F.T + model.Q
        return mvn.logpdf(y, model.H @ mp, model.H @ Pp @ model.H.T + model.R)

    return jnp.sum(vmap(one)(prev_means, prev_covs, emissions))


def _smoothing_element(model, m, P):
    Pp = model.F @ P @ model.F.T + model.Q
    E = jnp.linalg.solve(Pp, model.F @ P).T
    g = m - E @ model.F @ m
    L = P - E @ Pp @ E.T
    return SmoothElement(E, g, 0.5 * (L + L.T))


@vmap
def smoothing_operator(elem1, elem2):
    E1, g1, L1 = elem1
    E2, g2, L2 = elem2
    return SmoothElement(E2 @ E1, E2 @ g1 + g2, E2 @ L1 @ E2.T + L2)


def parallel_smoother(model, emissions):
    means, covs = parallel_filter(model, emissions)
    n = means.shape[-1]
    last = SmoothElement(jnp.zeros((n, n)), means[-1], covs[-1])
    elems = vmap(lambda m, P: _smoothing_element(model, m, P))(means[:-1], covs[:-1])
    elems = jax.tree_util.tree_map(lambda e, l: jnp.concatenate([e, l[None]]), elems, last)
    out = lax.associative_scan(smoothing_operator, elems, reverse=True)
    return means, covs, out.g, out.L


def loss(params, emissions):
    model = make_model(params)
    means, covs, smoothed_means, smoothed_covs = parallel_smoother(model, emissions)
    ll = log_likelihood(model, emissions, means, covs)
    return -ll + 0.1 * jnp.sum(smoothed_means ** 2) + 0.1 * jnp.sum(jnp.trace(smoothed_covs,
                                                                             axis1=1, axis2=2))
