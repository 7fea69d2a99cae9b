"""Independent numpy transcriptions of the paper's equations, for the tests.

Nothing here imports tffre: these are the references the code is checked against.
"""

import numpy as np
from scipy.special import softmax


def adam_steps(theta, grad_fn, steps, lr, b1=0.9, b2=0.999, eps=1e-8, mu=0.0, anchor=None):
    """FLCMC Eq. 15-20 (mu = 0) or Eq. 21-27 (PAdam), in float64. Returns the trajectory."""
    theta = np.array(theta, np.float64)
    m = np.zeros_like(theta)
    v = np.zeros_like(theta)
    path = []
    for t in range(1, steps + 1):
        g = grad_fn(theta)
        if anchor is not None:
            g = g + mu * (theta - anchor)           # Eq. 22
        m = b1 * m + (1 - b1) * g                   # Eq. 16 / 23
        v = b2 * v + (1 - b2) * g * g               # Eq. 17 / 24
        m_hat = m / (1 - b1 ** t)                   # Eq. 18 / 25
        v_hat = v / (1 - b2 ** t)                   # Eq. 19 / 26
        theta = theta - lr * m_hat / (np.sqrt(v_hat) + eps)   # Eq. 20 / 27
        path.append(theta.copy())
    return path


def pgd_steps(theta, grad_fn, steps, lr, mu, anchor):
    """SGD on Eq. 22's perturbed gradient."""
    theta = np.array(theta, np.float64)
    path = []
    for _ in range(steps):
        theta = theta - lr * (grad_fn(theta) + mu * (theta - anchor))
        path.append(theta.copy())
    return path


def attention_step(global_w, clients, stepsize, granularity="layer"):
    """FLCMC Eq. 11-14 with the L2 (Frobenius) norm, in float64."""
    g = [np.asarray(x, np.float64) for x in global_w]
    deltas = [[gl - np.asarray(c, np.float64) for gl, c in zip(g, client)] for client in clients]
    if granularity == "layer":
        out = []
        for layer in range(len(g)):
            s = np.array([np.sqrt(np.sum(d[layer] ** 2)) for d in deltas])     # Eq. 11
            alpha = softmax(s)                                                 # Eq. 12
            out.append(g[layer] - stepsize * sum(a * d[layer] for a, d in zip(alpha, deltas)))
        return out
    s = np.array([np.sqrt(sum(np.sum(x ** 2) for x in d)) for d in deltas])
    alpha = softmax(s)
    return [g[l] - stepsize * sum(a * d[l] for a, d in zip(alpha, deltas)) for l in range(len(g))]


def softmax_regression_grads(w, b, x, y, num_classes):
    """Gradients of the mean cross-entropy of softmax(x w + b)."""
    p = softmax(x @ w + b, axis=1)
    p[np.arange(len(y)), y] -= 1.0
    return x.T @ p / len(y), p.mean(axis=0)
