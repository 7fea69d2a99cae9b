"""Dialogue-level federated splits: each method follows its documented rule, and seeds reproduce."""

import numpy as np
import pytest

from tffre.data.partition import DialoguePartitioner

DISEASES = [f"d{i}" for i in range(10)]


def diagnoses(n=300, seed=0):
    rng = np.random.RandomState(seed)
    return [DISEASES[i] for i in rng.randint(0, 10, n)]


@pytest.mark.parametrize("method", ["diagnosis-dirichlet", "iid", "by-diagnosis"])
def test_same_seed_reproduces(method):
    dx = diagnoses()
    a = DialoguePartitioner(method, 5, DISEASES, alpha=0.5, seed=3).assign(dx)
    b = DialoguePartitioner(method, 5, DISEASES, alpha=0.5, seed=3).assign(dx)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n,num_clients,split_seed", [(300, 7, 0), (23, 5, 1), (40, 8, 2)])
def test_iid_deals_the_seeds_permutation_round_robin(n, num_clients, split_seed):
    dx = diagnoses(n)
    clients = DialoguePartitioner("iid", num_clients, DISEASES, seed=3).assign(
        dx, split_seed=split_seed)
    counts = np.bincount(clients, minlength=num_clients)
    assert set(counts.tolist()) <= {n // num_clients, n // num_clients + 1}
    assert counts.sum() == n
    # The documented rule: the k-th dialogue of RandomState([seed, split_seed + 1]).permutation(n)
    # goes to client k mod C.
    perm = np.random.RandomState([3, split_seed + 1]).permutation(n)
    for c in range(num_clients):
        assert set(np.flatnonzero(clients == c)) == set(perm[c::num_clients])


@pytest.mark.parametrize("num_clients", [3, 4, 10])
def test_by_diagnosis_sends_disease_i_to_client_i_mod_c(num_clients):
    dx = diagnoses()
    clients = DialoguePartitioner("by-diagnosis", num_clients, DISEASES, seed=3).assign(dx)
    expected = [int(name[1:]) % num_clients for name in dx]  # "d7" is disease 7
    assert clients.tolist() == expected


def test_dirichlet_mix_is_the_documented_draw():
    part = DialoguePartitioner("diagnosis-dirichlet", 6, DISEASES, alpha=0.7, seed=11)
    expected = np.random.RandomState(11).dirichlet(np.full(len(DISEASES), 0.7), 6)
    np.testing.assert_array_equal(part.mix, expected)


def test_dirichlet_client_frequencies_match_the_mix_columns():
    num_clients, per_disease = 5, 3000
    dx = [d for d in DISEASES for _ in range(per_disease)]
    part = DialoguePartitioner("diagnosis-dirichlet", num_clients, DISEASES, alpha=0.5, seed=3)
    clients = part.assign(dx, split_seed=0)
    q = part.mix
    for i, disease in enumerate(DISEASES):
        p = q[:, i] / q[:, i].sum()  # P(client c | disease d)
        owners = clients[[k for k, d in enumerate(dx) if d == disease]]
        freq = np.bincount(owners, minlength=num_clients) / per_disease
        # Each frequency is a binomial proportion: within 5 standard errors (+1 count of slack).
        tol = 5 * np.sqrt(p * (1 - p) / per_disease) + 1 / per_disease
        np.testing.assert_array_less(np.abs(freq - p), tol, err_msg=disease)
    # The check can tell the mix from a uniform assignment: some column is far from 1/C.
    columns = q / q.sum(axis=0, keepdims=True)
    assert np.abs(columns - 1 / num_clients).max() > 0.2


def test_different_seed_differs():
    dx = diagnoses()
    a = DialoguePartitioner("diagnosis-dirichlet", 5, DISEASES, seed=1).assign(dx)
    b = DialoguePartitioner("diagnosis-dirichlet", 5, DISEASES, seed=2).assign(dx)
    assert not np.array_equal(a, b)


def test_by_diagnosis_gives_whole_diseases():
    dx = diagnoses()
    clients = DialoguePartitioner("by-diagnosis", 4, DISEASES).assign(dx)
    for disease in DISEASES:
        owners = {c for d, c in zip(dx, clients) if d == disease}
        assert len(owners) == 1


def test_small_alpha_skews_more_than_large():
    dx = diagnoses(2000)

    def skew(alpha):
        clients = DialoguePartitioner("diagnosis-dirichlet", 8, DISEASES, alpha=alpha, seed=0).assign(dx)
        mixes = [np.bincount([DISEASES.index(d) for d, c in zip(dx, clients) if c == k], minlength=10)
                 for k in range(8)]
        return np.mean([m.max() / max(m.sum(), 1) for m in mixes])
    assert skew(0.1) > skew(100.0) + 0.2


def test_test_split_follows_the_same_mix():
    part = DialoguePartitioner("diagnosis-dirichlet", 6, DISEASES, alpha=0.3, seed=0)
    train = part.assign(diagnoses(3000, 1), split_seed=0)
    test = part.assign(diagnoses(3000, 2), split_seed=1)
    tr = np.bincount(train, minlength=6) / 3000
    te = np.bincount(test, minlength=6) / 3000
    np.testing.assert_allclose(tr, te, atol=0.05)


def test_min_per_client_fills_empty_clients():
    dx = ["d0"] * 40
    clients = DialoguePartitioner("diagnosis-dirichlet", 8, DISEASES, alpha=0.05, seed=0).assign(
        dx, min_per_client=2)
    assert np.bincount(clients, minlength=8).min() >= 2


def test_errors():
    with pytest.raises(ValueError, match="unknown partition"):
        DialoguePartitioner("random", 3, DISEASES)
    with pytest.raises(ValueError, match="at most 10 clients"):
        DialoguePartitioner("by-diagnosis", 11, DISEASES)
    with pytest.raises(ValueError, match="not in the partition"):
        DialoguePartitioner("iid", 3, DISEASES).assign(["flu"])


# Example-level splits for relation extraction (FedCMC label skew, FedED IID).

from tffre.data.partition import (clients_per_round, dirichlet_label_split,  # noqa: E402
                                  format_label_mix, iid_split, label_mix)

RELATIONS = ["TrIP", "TrWP", "TrCP", "TrAP", "TrNAP", "TeRP", "TeCP", "PIP"]


def relation_labels(n=2000, seed=0):
    rng = np.random.RandomState(seed)
    return np.array([RELATIONS[i] for i in rng.randint(0, len(RELATIONS), n)])


def assert_exact_partition(parts, n):
    together = np.concatenate(parts)
    assert len(together) == n  # disjoint (no index twice) ...
    np.testing.assert_array_equal(np.sort(together), np.arange(n))  # ... and complete
    for part in parts:
        assert part.dtype == np.int64
        np.testing.assert_array_equal(part, np.sort(part))


@pytest.mark.parametrize("alpha,num_clients", [(0.5, 10), (0.05, 20), (0.05, 50), (100.0, 7)])
def test_dirichlet_label_split_partitions_all_examples(alpha, num_clients):
    labels = relation_labels()
    parts = dirichlet_label_split(labels, num_clients, alpha, seed=3)
    assert len(parts) == num_clients
    assert_exact_partition(parts, len(labels))
    assert min(len(p) for p in parts) >= 1  # the default min_size


def test_dirichlet_label_split_seed_reproduces_and_differs():
    labels = relation_labels()
    a = dirichlet_label_split(labels, 10, 0.5, seed=1)
    b = dirichlet_label_split(labels, 10, 0.5, seed=1)
    c = dirichlet_label_split(labels, 10, 0.5, seed=2)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert any(len(x) != len(z) or not np.array_equal(x, z) for x, z in zip(a, c))


def test_dirichlet_label_split_is_the_documented_draw():
    labels = np.array([2, 0, 1, 1, 0, 2, 2, 0, 1, 2, 0, 0, 1, 2, 2, 1, 0, 0, 2, 1] * 5)
    rng = np.random.RandomState(9)
    expected = [[] for _ in range(4)]
    for c in np.unique(labels):  # the classes in np.unique order
        idx = rng.permutation(np.flatnonzero(labels == c))
        p = rng.dirichlet(np.full(4, 0.7))
        for k, chunk in enumerate(np.split(idx, (np.cumsum(p) * len(idx)).astype(int)[:-1])):
            expected[k].extend(chunk.tolist())
    parts = dirichlet_label_split(labels, 4, 0.7, seed=9, min_size=0)
    assert [p.tolist() for p in parts] == [sorted(e) for e in expected]


def test_dirichlet_label_split_accepts_int_labels_and_respects_min_size():
    labels = np.random.RandomState(0).randint(0, 5, 600)
    parts = dirichlet_label_split(labels, 10, 0.1, seed=0, min_size=20)
    assert_exact_partition(parts, 600)
    assert min(len(p) for p in parts) >= 20


def test_dirichlet_label_split_impossible_raises_with_a_hint():
    # One class, alpha tiny: (nearly) all of it lands on one client in every draw.
    with pytest.raises(ValueError, match="lower num_clients or min_size, or raise alpha"):
        dirichlet_label_split(["A"] * 100, 10, 0.001, seed=0, min_size=5, max_tries=20)
    with pytest.raises(ValueError, match="cannot give 10 clients 5 each"):
        dirichlet_label_split(["A"] * 30, 10, 1.0, seed=0, min_size=5)
    with pytest.raises(ValueError, match="alpha must be > 0"):
        dirichlet_label_split(["A"] * 30, 2, 0.0, seed=0)


def test_dirichlet_rule_statistics_alpha_one_two_clients():
    # With K = 2 and alpha = 1, client 0's share of a class is Beta(1, 1): uniform,
    # mean 1/2, variance 1/12. The cut floors, so share = floor(p n) / n (bias <= 1/n).
    labels = np.repeat(["A", "B", "C"], 1000)
    shares = []
    for seed in range(300):
        parts = dirichlet_label_split(labels, 2, 1.0, seed=seed, min_size=0)
        got = labels[parts[0]]
        shares.extend(np.sum(got == c) / 1000 for c in "ABC")
    shares = np.array(shares)
    standard_error = np.sqrt(1 / 12 / len(shares))
    assert abs(shares.mean() - 0.5) < 5 * standard_error
    # The variance of a uniform share, within ~20% (900 draws: SE of the variance ~ 5%).
    assert abs(shares.var() - 1 / 12) < 0.2 / 12


def test_small_alpha_puts_each_class_mostly_on_one_client():
    # The largest share of a Dir(alpha * 1_10) draw has mean ~0.78 (sd ~0.18) at
    # alpha = 0.05, ~0.94 (sd ~0.12) at 0.01 and ~0.116 at 100 (Monte Carlo, 2e5 draws).
    # 20 seeds x 8 classes = 160 shares: the standard error is < 0.015, so the
    # thresholds sit more than 5 standard errors below the means.
    labels = relation_labels(4000)

    def mean_max_share(alpha):
        out = []
        for seed in range(20):
            mix = label_mix(labels, dirichlet_label_split(labels, 10, alpha, seed=seed, min_size=0))
            counts = mix[RELATIONS].to_numpy()
            out.extend(counts.max(axis=0) / counts.sum(axis=0))  # per class
        return np.mean(out)
    assert mean_max_share(0.05) > 0.7
    assert mean_max_share(0.01) > 0.87
    assert mean_max_share(100.0) < 0.2  # near IID: about 1/10 each


@pytest.mark.parametrize("n,num_clients", [(100, 10), (101, 10), (23, 5), (5, 5)])
def test_iid_split_sizes_and_rule(n, num_clients):
    parts = iid_split(n, num_clients, seed=4)
    assert_exact_partition(parts, n)
    assert {len(p) for p in parts} <= {n // num_clients, n // num_clients + 1}
    perm = np.random.RandomState(4).permutation(n)
    for k, part in enumerate(parts):
        assert part.tolist() == sorted(perm[k::num_clients].tolist())
    with pytest.raises(ValueError, match="lower num_clients"):
        iid_split(3, 5, seed=0)


@pytest.mark.parametrize("num_clients,fraction,expected", [
    (100, 0.1, 10), (50, 0.1, 5), (10, 0.1, 1), (5, 0.1, 1), (10, 1.0, 10),
    (5, 0.5, 3), (100, 0.29, 29), (3, 0.01, 1)])
def test_clients_per_round(num_clients, fraction, expected):
    assert clients_per_round(num_clients, fraction) == expected


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5, float("nan")])
def test_clients_per_round_rejects_fractions_outside_0_1(fraction):
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\]"):
        clients_per_round(10, fraction)


def test_label_mix_counts_and_format():
    labels = ["b", "a", "a", "c", "b", "a"]
    parts = [np.array([0, 1]), np.array([2, 3, 4, 5]), np.array([], dtype=np.int64)]
    mix = label_mix(labels, parts, label_names=["c", "b", "a"])
    assert list(mix.columns) == ["c", "b", "a", "total"]
    assert list(mix.index) == ["client_0", "client_1", "client_2"]
    assert mix.to_numpy().tolist() == [[0, 1, 1, 2], [1, 1, 2, 4], [0, 0, 0, 0]]
    assert list(label_mix(labels, parts).columns) == ["a", "b", "c", "total"]
    text = format_label_mix(mix)
    lines = text.splitlines()
    assert lines[0].split() == ["c", "b", "a", "total"]
    assert lines[-1].split() == ["all", "1", "2", "3", "6"]
    with pytest.raises(ValueError, match="not in label_names"):
        label_mix(labels, parts, label_names=["a", "b"])


def test_a_held_out_split_follows_each_clients_training_labels():
    """Hand case: class 0's training examples are 3:1 between clients a and b, class 1's all
    at b; 8 held-out class-0 examples go 6:2, 3 class-1 ones 0:3 (largest remainder)."""
    from tffre.data.partition import label_following_split
    train = np.array([0, 0, 0, 0, 1, 1])
    parts = [np.array([0, 1, 2]), np.array([3, 4, 5])]
    held = np.array([0] * 8 + [1] * 3)
    a, b = label_following_split(held, train, parts, seed=0)
    assert sorted(np.concatenate([a, b]).tolist()) == list(range(11))
    assert (np.sum(held[a] == 0), np.sum(held[a] == 1)) == (6, 0)
    assert (np.sum(held[b] == 0), np.sum(held[b] == 1)) == (2, 3)
    # 5 class-0 examples at 3:1: quotas 3.75 and 1.25 -> 4 and 1.
    a, b = label_following_split(np.zeros(5, int), train, parts, seed=1)
    assert (len(a), len(b)) == (4, 1)
    # A class no client trains on is dealt round-robin.
    a, b = label_following_split(np.full(4, 2), train, parts, seed=2)
    assert (len(a), len(b)) == (2, 2)
