"""Federated splits of dialogue corpora: clients are institutions, a dialogue never spans two.

Methods:
* ``diagnosis-dirichlet`` (alpha): each client c draws a disease mix
  q_c ~ Dirichlet(alpha * 1) (``mix = RandomState(seed).dirichlet(alpha * 1_D, C)``,
  one row per client); a dialogue of disease d goes to client c with
  probability q_c[d] / sum_c' q_c'[d]. Small alpha = strong skew between
  "departments"; large alpha approaches IID.
* ``iid``: dialogues are shuffled with ``RandomState([seed, split_seed + 1])
  .permutation(n)`` and dealt round-robin: the k-th dialogue of the
  permutation goes to client k mod C.
* ``by-diagnosis``: whole diseases per client (disease i -> client i mod C),
  so at most as many clients as diseases.

A :class:`DialoguePartitioner` is built once and applied to every split, so a
client's test dialogues follow the same rule (and the same q) as its training
dialogues.

Example-level splits for relation extraction (FedCMC, FedED):

* :func:`dirichlet_label_split` (label skew, FedCMC Section 4.1, after
  NIID-bench / MOON): for each class c, ``p ~ Dir_K(alpha)`` over the K
  clients and client k gets a ``p_k`` share of class c's examples. Small
  alpha puts each class on few clients; FedCMC uses alpha = 0.5, 0.05, 0.01
  with K = 10, 20, 50. Whole draws are repeated until every client has
  ``min_size`` examples.
* :func:`iid_split`: a seeded permutation dealt round-robin (FedED Section
  4.2: "randomly shuffled and then partitioned into K local platforms each
  receiving 1/K of the training data").
* :func:`label_following_split`: a held-out split shared out as the training data was (a
  client's share of each class follows its training share), for per-site evaluation.
* :func:`clients_per_round`: how many clients a fraction C samples per round
  (FedED: C = 0.1).
* :func:`label_mix` / :func:`format_label_mix`: the per-client label counts
  of a split (FedCMC Fig. 1), for reports and :func:`tffre.plots.plot_label_mix`.
"""

import math

import numpy as np
import pandas as pd

METHODS = ("diagnosis-dirichlet", "iid", "by-diagnosis")


class DialoguePartitioner:
    """Assigns dialogues (by their diagnosis) to clients, the same rule for every split.

    Args:
      method: one of :data:`METHODS`.
      num_clients: number of clients.
      diagnoses: the diagnosis vocabulary (order fixes the Dirichlet columns).
      alpha: Dirichlet concentration (diagnosis-dirichlet only).
      seed: seeds the mixes and the assignments.
    """

    def __init__(self, method, num_clients, diagnoses, alpha=0.5, seed=0):
        if method not in METHODS:
            raise ValueError(f"unknown partition {method!r}; valid: {', '.join(METHODS)}")
        if num_clients < 1:
            raise ValueError(f"num_clients must be >= 1, got {num_clients}")
        if method == "diagnosis-dirichlet" and not alpha > 0:
            raise ValueError(f"alpha must be > 0, got {alpha}")
        if method == "by-diagnosis" and num_clients > len(diagnoses):
            raise ValueError(f"by-diagnosis gives whole diseases to clients: at most "
                             f"{len(diagnoses)} clients, got {num_clients}")
        self.method, self.num_clients, self.alpha, self.seed = method, num_clients, alpha, seed
        self.diagnoses = list(diagnoses)
        rng = np.random.RandomState(seed)
        # q[c, d]: client c's share of disease d.
        self.mix = rng.dirichlet(np.full(len(self.diagnoses), alpha), num_clients) \
            if method == "diagnosis-dirichlet" else None

    def assign(self, diagnoses, split_seed=0, min_per_client=0):
        """Returns the client index of each dialogue.

        Args:
          diagnoses: the diagnosis of each dialogue, in order.
          split_seed: distinguishes splits (train 0, test 1, ...).
          min_per_client: if > 0, a client left with fewer dialogues takes
            them from the largest client (whole dialogues, seeded).
        """
        unknown = sorted(set(diagnoses) - set(self.diagnoses))
        if unknown:
            raise ValueError(f"diagnoses not in the partition's vocabulary: {unknown}")
        rng = np.random.RandomState([self.seed, split_seed + 1])
        idx = np.array([self.diagnoses.index(d) for d in diagnoses], dtype=int)
        n = len(idx)
        if self.method == "iid":
            clients = np.empty(n, dtype=int)
            clients[rng.permutation(n)] = np.arange(n) % self.num_clients
        elif self.method == "by-diagnosis":
            clients = idx % self.num_clients
        else:
            columns = self.mix / self.mix.sum(axis=0, keepdims=True)
            clients = np.array([rng.choice(self.num_clients, p=columns[:, d]) for d in idx], dtype=int)
        if min_per_client and self.method != "by-diagnosis":
            clients = self._fill_empty(clients, min_per_client, rng)
        return clients

    def _fill_empty(self, clients, minimum, rng):
        clients = clients.copy()
        if len(clients) < minimum * self.num_clients:
            raise ValueError(f"{len(clients)} dialogues cannot give {self.num_clients} clients "
                             f"{minimum} each")
        for c in range(self.num_clients):
            while np.sum(clients == c) < minimum:
                donor = np.bincount(clients, minlength=self.num_clients).argmax()
                clients[rng.choice(np.flatnonzero(clients == donor))] = c
        return clients


def _check_num_clients(num_clients):
    if isinstance(num_clients, bool) or int(num_clients) != num_clients or num_clients < 1:
        raise ValueError(f"num_clients must be an int >= 1, got {num_clients}")
    return int(num_clients)


def dirichlet_label_split(labels, num_clients, alpha, seed, min_size=1, max_tries=1000):
    """Label-skew split of examples over clients (FedCMC, NIID-bench's Dirichlet rule).

    The rule, with ``rng = np.random.RandomState(seed)`` and the classes in
    ``np.unique(labels)`` order: for each class c, ``idx = rng.permutation
    (indices of class c)``, then ``p = rng.dirichlet(alpha * 1_K)`` and client
    k gets ``np.split(idx, (np.cumsum(p) * n_c).astype(int)[:-1])[k]``. If some
    client ends up with fewer than ``min_size`` examples the whole draw is
    repeated (continuing the same ``rng``), as NIID-bench does, up to
    ``max_tries`` times.

    Unlike NIID-bench's code, a client already holding N/K examples is not
    excluded from later classes: FedCMC describes the plain rule ("allocate a
    p_{k,c} proportion of the instances of class c to client k"), so client
    sizes vary as much as the draws make them.

    Args:
      labels: the label of each example (strings or ints; anything
        ``np.unique`` can sort).
      num_clients: K.
      alpha: the Dirichlet concentration, > 0; smaller is more skewed.
      seed: seeds the ``RandomState``; the same seed gives the same split.
      min_size: the fewest examples a client may get (default 1: no client
        is left without data). 0 accepts the first draw.
      max_tries: how many draws to try before giving up.

    Returns:
      ``num_clients`` sorted int64 arrays of example indices; every index in
      ``range(len(labels))`` is in exactly one of them.

    Raises:
      ValueError: if no draw in ``max_tries`` gives every client ``min_size``
        examples (or there are fewer than ``num_clients * min_size``
        examples); the message says which knobs to turn.
    """
    num_clients = _check_num_clients(num_clients)
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    if min_size < 0 or max_tries < 1:
        raise ValueError(f"need min_size >= 0 and max_tries >= 1, got {min_size}, {max_tries}")
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError("labels must be a 1-D sequence")
    n = len(labels)
    hint = "lower num_clients or min_size, or raise alpha (or max_tries)"
    if n < num_clients * min_size:
        raise ValueError(f"{n} examples cannot give {num_clients} clients {min_size} each; {hint}")
    _, class_of = np.unique(labels, return_inverse=True)
    class_of = class_of.ravel()
    members = [np.flatnonzero(class_of == c) for c in range(class_of.max() + 1)] if n else []
    rng = np.random.RandomState(seed)
    concentration = np.full(num_clients, float(alpha))
    for _ in range(max_tries):
        parts = [[] for _ in range(num_clients)]
        for idx in members:
            idx = rng.permutation(idx)
            p = rng.dirichlet(concentration)
            # Cut points: client k takes the slice between the k-th and (k+1)-th
            # cumulative share of the class (NIID-bench, partition_data "noniid-labeldir").
            for k, chunk in enumerate(np.split(idx, (np.cumsum(p) * len(idx)).astype(int)[:-1])):
                parts[k].append(chunk)
        sizes = [sum(len(chunk) for chunk in part) for part in parts]
        if min(sizes) >= min_size:
            return [np.sort(np.concatenate(part or [np.empty(0, dtype=np.int64)]))
                    .astype(np.int64) for part in parts]
    raise ValueError(f"no Dirichlet(alpha={alpha}) draw in {max_tries} tries gave all "
                     f"{num_clients} clients at least {min_size} example(s) ({n} examples, "
                     f"{len(members)} classes); {hint}")


def iid_split(num_examples, num_clients, seed):
    """IID split: ``RandomState(seed).permutation(num_examples)`` dealt round-robin.

    The k-th example of the permutation goes to client ``k mod num_clients``,
    so client sizes differ by at most one (FedED: each platform receives 1/K
    of the shuffled training data).

    Args:
      num_examples: N.
      num_clients: K, at most N (every client gets at least one example).
      seed: seeds the permutation.

    Returns:
      ``num_clients`` sorted int64 index arrays partitioning ``range(N)``.
    """
    num_clients = _check_num_clients(num_clients)
    if num_examples < num_clients:
        raise ValueError(f"{num_examples} examples cannot give each of {num_clients} "
                         "clients one; lower num_clients")
    perm = np.random.RandomState(seed).permutation(int(num_examples))
    return [np.sort(perm[k::num_clients]).astype(np.int64) for k in range(num_clients)]


def label_following_split(held_labels, train_labels, train_parts, seed):
    """A held-out split shared out as the training data was: each client's share of class c
    is its share of class c's training examples (personalised-FL benchmarks' per-client test
    sets, so that a site is scored on patients like its own).

    With ``rng = np.random.RandomState(seed)``, for each class c (``np.unique`` order of the
    held-out labels): its held-out examples in ``rng.permutation`` order go to the clients
    in proportion to ``n_{k,c} / n_c`` (client k's training examples of class c over the
    class's), rounded by largest remainder (ties to the lower client), in client order. A
    class no client trains on is dealt round-robin.

    Args:
      held_labels: the held-out split's labels.
      train_labels: the training split's labels.
      train_parts: the clients' training index arrays (e.g. :func:`dirichlet_label_split`'s).
      seed: seeds the permutations.

    Returns:
      ``len(train_parts)`` sorted int64 index arrays partitioning ``range(len(held_labels))``.
    """
    held_labels, train_labels = np.asarray(held_labels), np.asarray(train_labels)
    num_clients = len(train_parts)
    rng = np.random.RandomState(seed)
    out = [[] for _ in range(num_clients)]
    for c in np.unique(held_labels):
        idx = rng.permutation(np.flatnonzero(held_labels == c))
        counts = np.array([np.sum(train_labels[part] == c) for part in train_parts], float)
        if counts.sum() == 0:
            for k in range(num_clients):
                out[k].append(idx[k::num_clients])
            continue
        quota = counts / counts.sum() * len(idx)
        take = np.floor(quota).astype(int)
        # Largest remainder: the examples floor() left over go to the largest fractions.
        for k in np.argsort(-(quota - take), kind="stable")[:len(idx) - take.sum()]:
            take[k] += 1
        for k, chunk in enumerate(np.split(idx, np.cumsum(take)[:-1])):
            out[k].append(chunk)
    return [np.sort(np.concatenate(part)).astype(np.int64) if part
            else np.empty(0, np.int64) for part in out]


def clients_per_round(num_clients, fraction):
    """Clients sampled per round for a fraction C: ``max(1, round(C * K))``.

    FedAvg (McMahan et al.) and FedED (C = 0.1) select a C-fraction of the K
    clients each round. Ties round half up (C = 0.5, K = 5 gives 3), not to
    even as Python's ``round`` would; rounding (not flooring) keeps float
    error from dropping a client (0.29 * 100 = 28.999...).

    Raises:
      ValueError: unless 0 < fraction <= 1 and num_clients is an int >= 1.
    """
    num_clients = _check_num_clients(num_clients)
    if isinstance(fraction, bool) or not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    return max(1, min(num_clients, math.floor(fraction * num_clients + 0.5)))


def label_mix(labels, parts, label_names=None):
    """Per-client label counts of a split (FedCMC Fig. 1 in numbers).

    Args:
      labels: the label of every example (the array the split was made from).
      parts: one index array per client (e.g. from :func:`dirichlet_label_split`).
      label_names: the column order; defaults to ``np.unique(labels)``. Every
        label in ``labels`` must be in it.

    Returns:
      A DataFrame indexed "client_0", "client_1", ..., one int64 column of
      counts per label and a final ``total`` column.
    """
    labels = np.asarray(labels)
    names = list(np.unique(labels).tolist() if label_names is None else label_names)
    if "total" in names:
        raise ValueError('a label is named "total", which is the total column')
    column = {name: j for j, name in enumerate(names)}
    unknown = sorted({str(v) for v in labels.tolist() if v not in column})
    if unknown:
        raise ValueError(f"labels not in label_names: {unknown}")
    codes = np.array([column[v] for v in labels.tolist()], dtype=np.int64)
    counts = np.array([np.bincount(codes[np.asarray(part, dtype=np.int64)],
                                   minlength=len(names)) for part in parts],
                      dtype=np.int64).reshape(len(parts), len(names))
    mix = pd.DataFrame(counts, columns=names,
                       index=[f"client_{k}" for k in range(len(parts))])
    mix["total"] = counts.sum(axis=1)
    return mix


def format_label_mix(df):
    """A printable table of a :func:`label_mix` frame, with an "all" row of column sums."""
    table = pd.concat([df, df.sum(axis=0).to_frame("all").T])
    return table.to_string()
