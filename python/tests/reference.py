# SPDX-License-Identifier: Apache-2.0
"""Float64 references of one step of each recurrence, written once for NumPy and PyTorch
(``xp`` is the ``numpy`` or ``torch`` module), and random step inputs."""

import math


def softplus(xp, v):
    return xp.log1p(xp.exp(v))


def sigmoid(xp, v):
    return 1.0 / (1.0 + xp.exp(-v))


def mamba2_step(xp, state, x, dt, A, B, C, D, z, dt_bias, dt_softplus=True):
    """One conventional Mamba-2 step of a batch: ``state`` ``[batch, H, P, N]`` is updated
    in place; returns y ``[batch, H, P]``. Every input float64."""
    H, G = x.shape[1], B.shape[1]
    group = xp.arange(H) // (H // G)
    dt = dt + dt_bias
    if dt_softplus:
        dt = softplus(xp, dt)
    decay = xp.exp(dt * A)  # [batch, H]
    Bh, Ch = B[:, group], C[:, group]  # [batch, H, N]
    state *= decay[..., None, None]
    state += (dt[..., None] * x)[..., None] * Bh[:, :, None, :]
    y = xp.einsum("bhpn,bhn->bhp", state, Ch) + D[:, None] * x
    return y * z * sigmoid(xp, z)


def l2_normalize(xp, v, scale=1.0, eps=1e-6):
    return v / xp.sqrt((v * v).sum(-1)[..., None] + eps) * scale


def gdn_step(xp, state, q, k, v, a, b, A_log, dt_bias):
    """One conventional Gated DeltaNet step of a batch: ``state`` ``[batch, HV, V, K]`` is
    updated in place; returns o ``[batch, HV, V]``. Every input float64."""
    HV, HK, K = v.shape[1], q.shape[1], q.shape[2]
    key_head = xp.arange(HV) // (HV // HK)
    qn = l2_normalize(xp, q, 1.0 / math.sqrt(K))[:, key_head]
    kn = l2_normalize(xp, k)[:, key_head]
    g = -xp.exp(A_log) * softplus(xp, a + dt_bias)
    beta = sigmoid(xp, b)
    state *= xp.exp(g)[..., None, None]
    u = beta[..., None] * (v - xp.einsum("bhvk,bhk->bhv", state, kn))
    state += u[..., None] * kn[:, :, None, :]
    return xp.einsum("bhvk,bhk->bhv", state, qn)


def mamba2_inputs(rng, rows, shape):
    """Random Mamba-2 step inputs (float64 NumPy) of ``rows`` rows, with Mamba's statistics."""
    H, P, N, G = shape
    return {"x": rng.standard_normal((rows, H, P)), "dt": 0.3 * rng.standard_normal((rows, H)),
            "B": rng.standard_normal((rows, G, N)), "C": rng.standard_normal((rows, G, N)),
            "z": rng.standard_normal((rows, H, P))}


def mamba2_weights(rng, shape):
    H = shape[0]
    return {"A": -rng.uniform(1.0, 16.0, H) / 16.0, "D": rng.standard_normal(H),
            "dt_bias": rng.uniform(-4.0, -2.0, H)}


def gdn_inputs(rng, rows, shape):
    HV, HK, K, V = shape
    return {"q": rng.standard_normal((rows, HK, K)), "k": rng.standard_normal((rows, HK, K)),
            "v": rng.standard_normal((rows, HV, V)), "a": 0.3 * rng.standard_normal((rows, HV)),
            "b": rng.standard_normal((rows, HV))}


def gdn_weights(rng, shape):
    HV = shape[0]
    return {"A_log": rng.uniform(-1.0, 1.0, HV), "dt_bias": rng.uniform(-1.0, 1.0, HV)}


def relative_error(got, want):
    """Largest relative error of a request's row: |got - want| / |want| over rows of the batch."""
    got, want = got.reshape(got.shape[0], -1), want.reshape(want.shape[0], -1)
    return float((((got - want) ** 2).sum(1) ** 0.5 / ((want ** 2).sum(1) ** 0.5)).max())
