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
"""

import numpy as np

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
