"""Hand-written forward + BPTT in NumPy: the reference every contender is compared with.

Two per workload where they differ:
- `manual`: what a careful person writes step by step (preallocated stacks, out= in the
  loops, no temporaries in the hot path). This is `numpy-manual`, the 1.0x of every ratio.
- `hoisted`: the same plus the usual batching tricks (x_t @ U and the bias for all t in one
  product before the loop; dW, dU, db, dxs in one batched product after the backward loop).
  This is `numpy-hoisted`, the level scanlib-scan aims for.
Each returns (loss, gradient tree shaped like inputs); the dtype follows the data. Imports
NumPy only; tests/test_bench.py checks each against finite differences in float64.
"""

from __future__ import annotations

import numpy as np


def _loss_tail(ys, P, carry, Q):
    return float(np.vdot(ys, P)) + float(np.vdot(carry, Q))


# --- rnn: h = tanh(h @ W + x_t @ U + b) -------------------------------------------------------
def rnn_manual(inputs, consts):
    W, U, b = (inputs["params"][k] for k in ("W", "U", "b"))
    xs, h0, P, Q = inputs["xs"], inputs["init"], consts["P"], consts["Q"]
    T, B, I = xs.shape
    H, dt = W.shape[0], W.dtype
    hs = np.empty((T + 1, B, H), dt)
    hs[0] = h0
    a, tmp = np.empty((B, H), dt), np.empty((B, H), dt)
    for t in range(T):
        np.matmul(hs[t], W, out=a)
        np.matmul(xs[t], U, out=tmp)
        a += tmp
        a += b
        np.tanh(a, out=hs[t + 1])
    loss = _loss_tail(hs[1:], P, hs[T], Q)

    gh = Q.copy()
    dW, dU, db = np.zeros_like(W), np.zeros_like(U), np.zeros_like(b)
    dxs = np.empty_like(xs)
    ga, tHH, tIH = np.empty((B, H), dt), np.empty((H, H), dt), np.empty((I, H), dt)
    for t in range(T - 1, -1, -1):
        gh += P[t]
        np.multiply(hs[t + 1], hs[t + 1], out=ga)
        np.subtract(1, ga, out=ga)
        ga *= gh  # cotangent of the pre-activation
        np.matmul(hs[t].T, ga, out=tHH)
        dW += tHH
        np.matmul(xs[t].T, ga, out=tIH)
        dU += tIH
        db += ga.sum(0)
        np.matmul(ga, U.T, out=dxs[t])
        np.matmul(ga, W.T, out=gh)
    return loss, {"params": {"W": dW, "U": dU, "b": db}, "init": gh, "xs": dxs}


def rnn_hoisted(inputs, consts):
    W, U, b = (inputs["params"][k] for k in ("W", "U", "b"))
    xs, h0, P, Q = inputs["xs"], inputs["init"], consts["P"], consts["Q"]
    T, B, I = xs.shape
    H, dt = W.shape[0], W.dtype
    pre = np.matmul(xs.reshape(T * B, I), U).reshape(T, B, H)  # x_t @ U for all t at once
    pre += b
    hs = np.empty((T + 1, B, H), dt)
    hs[0] = h0
    a = np.empty((B, H), dt)
    for t in range(T):
        np.matmul(hs[t], W, out=a)
        a += pre[t]
        np.tanh(a, out=hs[t + 1])
    loss = _loss_tail(hs[1:], P, hs[T], Q)

    G = pre  # reuse the buffer: cotangents of the pre-activations, all t
    gh = Q.copy()
    for t in range(T - 1, -1, -1):
        gh += P[t]
        g = G[t]
        np.multiply(hs[t + 1], hs[t + 1], out=g)
        np.subtract(1, g, out=g)
        g *= gh
        np.matmul(g, W.T, out=gh)
    G2 = G.reshape(T * B, H)
    dW = hs[:-1].reshape(T * B, H).T @ G2
    dU = xs.reshape(T * B, I).T @ G2
    dxs = (G2 @ U.T).reshape(T, B, I)
    return loss, {"params": {"W": dW, "U": dU, "b": G2.sum(0)}, "init": gh, "xs": dxs}


# --- lstm -------------------------------------------------------------------------------------
def _gates(z, A, H):
    """i, f, o = sigmoid and g = tanh of the four column blocks of z, written into A.

    sigmoid(x) = (tanh(x / 2) + 1) / 2 cannot overflow, unlike 1 / (1 + exp(-x)).
    """
    np.multiply(z, 0.5, out=A)
    np.copyto(A[:, 2 * H:3 * H], z[:, 2 * H:3 * H])
    np.tanh(A, out=A)
    for sl in (slice(0, 2 * H), slice(3 * H, 4 * H)):
        A[:, sl] *= 0.5
        A[:, sl] += 0.5


def _lstm_step_back(A, tc, c_prev, gh, gc, dz, u, H):
    """Cotangent of the gate pre-activations into dz; gc becomes the cotangent of c_prev."""
    i, f, g, o = A[:, :H], A[:, H:2 * H], A[:, 2 * H:3 * H], A[:, 3 * H:]
    dzi, dzf, dzg, dzo = dz[:, :H], dz[:, H:2 * H], dz[:, 2 * H:3 * H], dz[:, 3 * H:]
    np.multiply(tc, tc, out=u)
    np.subtract(1, u, out=u)
    u *= o
    u *= gh
    gc += u  # gc is now dL/dc_t
    np.multiply(gh, tc, out=dzo)
    np.subtract(1, o, out=u)
    u *= o
    dzo *= u
    np.multiply(gc, g, out=dzi)
    np.subtract(1, i, out=u)
    u *= i
    dzi *= u
    np.multiply(gc, c_prev, out=dzf)
    np.subtract(1, f, out=u)
    u *= f
    dzf *= u
    np.multiply(gc, i, out=dzg)
    np.multiply(g, g, out=u)
    np.subtract(1, u, out=u)
    dzg *= u
    gc *= f


def _lstm_forward(inputs, pre_all=None):
    Wx, Wh, b = (inputs["params"][k] for k in ("Wx", "Wh", "b"))
    xs, init = inputs["xs"], inputs["init"]
    T, B, _ = xs.shape
    H, dt = Wh.shape[0], Wh.dtype
    hs, cs = np.empty((T + 1, B, H), dt), np.empty((T + 1, B, H), dt)
    hs[0], cs[0] = init["h"], init["c"]
    acts, tcs = np.empty((T, B, 4 * H), dt), np.empty((T, B, H), dt)
    z, tmp, u = np.empty((B, 4 * H), dt), np.empty((B, 4 * H), dt), np.empty((B, H), dt)
    for t in range(T):
        np.matmul(hs[t], Wh, out=z)
        if pre_all is None:
            np.matmul(xs[t], Wx, out=tmp)
            z += tmp
            z += b
        else:
            z += pre_all[t]
        A = acts[t]
        _gates(z, A, H)
        c = cs[t + 1]
        np.multiply(A[:, H:2 * H], cs[t], out=c)
        np.multiply(A[:, :H], A[:, 2 * H:3 * H], out=u)
        c += u
        np.tanh(c, out=tcs[t])
        np.multiply(A[:, 3 * H:], tcs[t], out=hs[t + 1])
    return hs, cs, acts, tcs


def _lstm_loss(hs, cs, consts):
    T = len(hs) - 1
    Q = consts["Q"]
    return float(np.vdot(hs[1:], consts["P"])) + float(np.vdot(hs[T], Q["h"])) + float(
        np.vdot(cs[T], Q["c"]))


def lstm_manual(inputs, consts):
    Wx, Wh, b = (inputs["params"][k] for k in ("Wx", "Wh", "b"))
    xs = inputs["xs"]
    T, B, I = xs.shape
    H, dt = Wh.shape[0], Wh.dtype
    hs, cs, acts, tcs = _lstm_forward(inputs)
    loss = _lstm_loss(hs, cs, consts)

    P, Q = consts["P"], consts["Q"]
    gh, gc = Q["h"].copy(), Q["c"].copy()
    dWx, dWh, db = np.zeros_like(Wx), np.zeros_like(Wh), np.zeros_like(b)
    dxs = np.empty_like(xs)
    dz, u = np.empty((B, 4 * H), dt), np.empty((B, H), dt)
    tI, tH = np.empty((I, 4 * H), dt), np.empty((H, 4 * H), dt)
    for t in range(T - 1, -1, -1):
        gh += P[t]
        _lstm_step_back(acts[t], tcs[t], cs[t], gh, gc, dz, u, H)
        np.matmul(xs[t].T, dz, out=tI)
        dWx += tI
        np.matmul(hs[t].T, dz, out=tH)
        dWh += tH
        db += dz.sum(0)
        np.matmul(dz, Wx.T, out=dxs[t])
        np.matmul(dz, Wh.T, out=gh)
    return loss, {"params": {"Wx": dWx, "Wh": dWh, "b": db}, "init": {"h": gh, "c": gc},
                  "xs": dxs}


def lstm_hoisted(inputs, consts):
    Wx, Wh, b = (inputs["params"][k] for k in ("Wx", "Wh", "b"))
    xs = inputs["xs"]
    T, B, I = xs.shape
    H, dt = Wh.shape[0], Wh.dtype
    pre = np.matmul(xs.reshape(T * B, I), Wx).reshape(T, B, 4 * H)
    pre += b
    hs, cs, acts, tcs = _lstm_forward(inputs, pre_all=pre)
    loss = _lstm_loss(hs, cs, consts)

    P, Q = consts["P"], consts["Q"]
    gh, gc = Q["h"].copy(), Q["c"].copy()
    DZ, u = pre, np.empty((B, H), dt)  # reuse the buffer for the gate cotangents
    for t in range(T - 1, -1, -1):
        gh += P[t]
        _lstm_step_back(acts[t], tcs[t], cs[t], gh, gc, DZ[t], u, H)
        np.matmul(DZ[t], Wh.T, out=gh)
    DZ2 = DZ.reshape(T * B, 4 * H)
    dWx = xs.reshape(T * B, I).T @ DZ2
    dWh = hs[:-1].reshape(T * B, H).T @ DZ2
    dxs = (DZ2 @ Wx.T).reshape(T, B, I)
    return loss, {"params": {"Wx": dWx, "Wh": dWh, "b": DZ2.sum(0)},
                  "init": {"h": gh, "c": gc}, "xs": dxs}


# --- cumsum: c = c + x_t, y = c ---------------------------------------------------------------
def cumsum_manual(inputs, consts):
    """Step by step, on Python floats: the cheapest per-step loop Python offers."""
    xs, P, Q = inputs["xs"], consts["P"], consts["Q"]
    T, dt = len(xs), xs.dtype
    xl, ys = xs.tolist(), [0.0] * T
    c = float(inputs["init"])
    for t in range(T):
        c += xl[t]
        ys[t] = c
    loss = float(np.dot(np.array(ys, dt), P)) + c * float(Q)
    Pl, dxs = P.tolist(), [0.0] * T
    g = float(Q)
    for t in range(T - 1, -1, -1):
        g += Pl[t]
        dxs[t] = g
    return loss, {"params": {}, "init": np.asarray(g, dt), "xs": np.array(dxs, dt)}


def cumsum_hoisted(inputs, consts):
    """No loop at all: np.cumsum forward, a reversed cumsum backward."""
    xs, P, Q = inputs["xs"], consts["P"], consts["Q"]
    ys = np.cumsum(xs)
    ys += inputs["init"]
    loss = float(np.dot(ys, P)) + float(ys[-1] * Q)
    dxs = np.cumsum(P[::-1])[::-1] + Q
    return loss, {"params": {}, "init": np.asarray(dxs[0]), "xs": dxs}


# --- linrec: h = a_t * h + b_t ----------------------------------------------------------------
def linrec_manual(inputs, consts):
    a, b = inputs["xs"]["a"], inputs["xs"]["b"]
    P, Q = consts["P"], consts["Q"]
    T = len(a)
    hs = np.empty((T + 1,) + a.shape[1:], a.dtype)
    hs[0] = inputs["init"]
    for t in range(T):
        np.multiply(a[t], hs[t], out=hs[t + 1])
        hs[t + 1] += b[t]
    loss = _loss_tail(hs[1:], P, hs[T], Q)
    gh = Q.copy()
    da, db = np.empty_like(a), np.empty_like(b)
    for t in range(T - 1, -1, -1):
        gh += P[t]
        np.copyto(db[t], gh)
        np.multiply(gh, hs[t], out=da[t])
        gh *= a[t]
    return loss, {"params": {}, "init": gh, "xs": {"a": da, "b": db}}


MANUAL = {"rnn": rnn_manual, "lstm": lstm_manual, "cumsum": cumsum_manual,
          "linrec": linrec_manual}
HOISTED = {"rnn": rnn_hoisted, "lstm": lstm_hoisted, "cumsum": cumsum_hoisted}
