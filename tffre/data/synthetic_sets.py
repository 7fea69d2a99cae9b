"""Synthetic(alpha, beta) federated data (Shamir et al.; FLCMC section 3.4.4).

A seeded transcription of the FedProx reference generators
(``data/synthetic_*/generate_synthetic.py`` and ``synthetic_iid/generate_iid.py``
in litian96/FedProx). The reference draws from numpy's global state with no
seed; we draw from ``numpy.random.RandomState(seed)`` in the same order, so
with the same seed the per-client data before the split is identical to the
reference's after ``np.random.seed(seed)``. The reference shuffles with
Python's unseeded ``random`` before its 90/10 split; we shuffle with the same
RandomState after all draws.
"""

import collections

import numpy as np

from tffre.data.federated import FederatedData


def _softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def generate_clients(alpha, beta, iid, num_clients, num_features, num_classes, rng):
    """Draws the per-client (X_k, y_k) from ``rng``, before the split, in the reference's order.

    Returns:
      A list of (x float32 [n_k, num_features], y int32 [n_k]) per client.
    """
    # 1. client sizes n_k = int(lognormal(4, 2)) + 50
    sizes = rng.lognormal(4, 2, num_clients).astype(int) + 50
    cov = np.diag(np.power(np.arange(1, num_features + 1, dtype=float), -1.2))
    if iid:
        # generate_iid.py: one shared W, b ~ N(0, 1); X_k ~ N(0, diag((j+1)^-1.2)).
        w = rng.normal(0, 1, (num_features, num_classes))
        b = rng.normal(0, 1, num_classes)
        params = [(w, b)] * num_clients
        means = np.zeros((num_clients, num_features))
        per_client_params = False
    else:
        # 2. mean_W = mean_b ~ N(0, alpha); 3. B ~ N(0, beta); 4. v_k ~ N(B_k, 1).
        mean_w = rng.normal(0, alpha, num_clients)
        big_b = rng.normal(0, beta, num_clients)
        means = np.stack([rng.normal(big_b[k], 1, num_features) for k in range(num_clients)])
        per_client_params = True
    out = []
    for k in range(num_clients):
        if per_client_params:
            # 5. W_k ~ N(mean_W_k, 1), b_k ~ N(mean_W_k, 1)
            w = rng.normal(mean_w[k], 1, (num_features, num_classes))
            b = rng.normal(mean_w[k], 1, num_classes)
        else:
            w, b = params[k]
        x = rng.multivariate_normal(means[k], cov, sizes[k])
        y = np.argmax(_softmax(x @ w + b), axis=1)
        out.append((x.astype(np.float32), y.astype(np.int32)))
    return out


def make_synthetic(alpha, beta, iid=False, num_clients=30, num_features=60, num_classes=10, seed=0):
    """Synthetic(alpha, beta) as :class:`FederatedData`, split 90/10 per client.

    Args:
      alpha: std of the per-client model means (label skew).
      beta: std of the per-client feature-mean centres (feature skew).
      iid: the reference's IID variant (alpha and beta are then unused).
      num_clients, num_features, num_classes: sizes (30, 60, 10 in the paper).
      seed: the RandomState seed; the same seed gives the same data.

    Returns:
      FederatedData with clients "f_00000", "f_00001", ... in the reference's
      order; train = the first int(0.9 n_k) shuffled examples.
    """
    if alpha < 0 or beta < 0:
        raise ValueError(f"alpha and beta must be >= 0, got alpha={alpha}, beta={beta}")
    rng = np.random.RandomState(seed)
    raw = generate_clients(alpha, beta, iid, num_clients, num_features, num_classes, rng)
    clients = collections.OrderedDict()
    for k, (x, y) in enumerate(raw):
        order = rng.permutation(len(y))
        x, y = x[order], y[order]
        n_train = int(0.9 * len(y))
        clients[f"f_{k:05d}"] = {"train": (x[:n_train], y[:n_train]),
                                 "test": (x[n_train:], y[n_train:])}
    name = "synthetic_iid" if iid else f"synthetic({alpha},{beta})"
    return FederatedData(clients, num_classes=num_classes, name=name)
