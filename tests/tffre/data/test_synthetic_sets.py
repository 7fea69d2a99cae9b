"""make_synthetic against the FedProx reference construction (FLCMC section 3.4.4)."""

import numpy as np
import pytest

from tffre.data.synthetic_sets import make_synthetic


def reference_draws(alpha, beta, iid, seed, num_clients=30, dim=60, num_class=10):
    """The FedProx reference generators' draws, in their order, from numpy's global state."""
    np.random.seed(seed)
    sizes = np.random.lognormal(4, 2, num_clients).astype(int) + 50
    cov = np.diag([np.power(j + 1, -1.2) for j in range(dim)])
    xs, ys = [], []
    if iid:
        w = np.random.normal(0, 1, (dim, num_class))
        b = np.random.normal(0, 1, num_class)
        for i in range(num_clients):
            x = np.random.multivariate_normal(np.zeros(dim), cov, sizes[i])
            xs.append(x)
            ys.append(np.array([np.argmax(np.exp(r @ w + b) / np.sum(np.exp(r @ w + b))) for r in x]))
        return xs, ys
    mean_w = np.random.normal(0, alpha, num_clients)
    big_b = np.random.normal(0, beta, num_clients)
    mean_x = np.zeros((num_clients, dim))
    for i in range(num_clients):
        mean_x[i] = np.random.normal(big_b[i], 1, dim)
    for i in range(num_clients):
        w = np.random.normal(mean_w[i], 1, (dim, num_class))
        b = np.random.normal(mean_w[i], 1, num_class)
        x = np.random.multivariate_normal(mean_x[i], cov, sizes[i])
        xs.append(x)
        ys.append(np.array([np.argmax(np.exp(r @ w + b) / np.sum(np.exp(r @ w + b))) for r in x]))
    return xs, ys


def as_sets(x, y):
    return sorted(map(tuple, np.round(np.c_[x, y], 5)))


@pytest.mark.parametrize("alpha,beta,iid,seed", [(0.5, 0.5, False, 0), (1, 1, False, 3),
                                                 (0, 0, True, 7)])
def test_matches_reference_draws_before_split(alpha, beta, iid, seed):
    data = make_synthetic(alpha, beta, iid=iid, seed=seed)
    ref_x, ref_y = reference_draws(alpha, beta, iid, seed)
    for cid, rx, ry in zip(data.client_ids, ref_x, ref_y):
        x = np.concatenate([data.clients[cid]["train"][0], data.clients[cid]["test"][0]])
        y = np.concatenate([data.clients[cid]["train"][1], data.clients[cid]["test"][1]])
        assert len(y) == len(ry)
        # The split shuffles; compare as multisets of rows.
        assert as_sets(x, y) == as_sets(rx.astype(np.float32), ry)


def test_structure():
    data = make_synthetic(0.5, 0.5, seed=0)
    assert data.client_ids == [f"f_{k:05d}" for k in range(30)]
    for cid in data.client_ids:
        (xtr, ytr), (xte, yte) = data.clients[cid]["train"], data.clients[cid]["test"]
        n = len(ytr) + len(yte)
        assert n >= 50 and len(ytr) == int(0.9 * n)
        assert xtr.shape[1] == 60 and xtr.dtype == np.float32
        assert ytr.min() >= 0 and ytr.max() < 10
    assert data.num_classes == 10


def test_deterministic_by_seed():
    a, b, c = (make_synthetic(0.5, 0.5, seed=s) for s in (1, 1, 2))
    np.testing.assert_array_equal(a.clients["f_00004"]["train"][0], b.clients["f_00004"]["train"][0])
    np.testing.assert_array_equal(a.clients["f_00004"]["test"][1], b.clients["f_00004"]["test"][1])
    assert not np.array_equal(a.sizes(), c.sizes())


def test_heterogeneity_grows_with_alpha_beta():
    """Label skew: per-client label distributions differ more at (1,1) than IID."""
    def spread(data):
        dists = [np.bincount(data.clients[c]["train"][1], minlength=10) / len(data.clients[c]["train"][1])
                 for c in data.client_ids]
        return np.mean(np.std(dists, axis=0))
    assert spread(make_synthetic(1, 1, seed=0)) > spread(make_synthetic(0, 0, iid=True, seed=0))


def test_rejects_negative_parameters():
    with pytest.raises(ValueError, match="alpha"):
        make_synthetic(-1, 0.5)


def test_to_tf_datasets():
    data = make_synthetic(0, 0, num_clients=3, seed=0)
    datasets = data.to_tf_datasets(batch_size=7, seed=1)
    x, y = next(iter(datasets["f_00000"]))
    assert x.shape == (7, 60) and y.shape == (7,)
