"""The synthetic(alpha, beta) task (FLCMC section 5.1, Table 8): logistic regression.

One recipe (:class:`SyntheticRecipe`) serves the simulation and every site: across sites no
data is read; each site generates the same synthetic(alpha, beta) set from the job's options
and seed and trains on one client of it.
"""

import dataclasses

from tffre.hparams import Params, boolean, non_negative_float, param
from tffre.tasks import Task
from tffre.tasks.recipe import Built, Loaded, Recipe
from tffre.tasks.sites import SiteDataError

#: FedProx's sizes (the defaults of :func:`tffre.data.synthetic_sets.make_synthetic`).
NUM_FEATURES, NUM_CLASSES = 60, 10


@dataclasses.dataclass(frozen=True)
class Options(Params):
    """The synthetic data's options (FedProx's construction)."""
    alpha: float = param(0.5, non_negative_float, "label skew",
                         paper="FLCMC Sect. 5.1")
    beta: float = param(0.5, non_negative_float, "feature skew",
                        paper="FLCMC Sect. 5.1")
    iid: bool = param(False, boolean, "the IID variant", flag=True)


TASK = Task("synthetic", "synthetic(alpha, beta) (FLCMC Sect. 5.1)", ("synthetic",),
            ("logistic",), Options, defaults={"clients": 30, "batch_size": 10})


def generate(options, num_clients, seed):
    """The synthetic(alpha, beta) :class:`tffre.data.FederatedData` of the task's ``options``
    for ``num_clients`` clients from ``seed`` (the same seed, the same data)."""
    from tffre.data.synthetic_sets import make_synthetic
    return make_synthetic(options.alpha, options.beta, iid=options.iid, num_clients=num_clients,
                          num_features=NUM_FEATURES, num_classes=NUM_CLASSES, seed=seed)


def build_model():
    """(model_fn, loss) of the paper's logistic regression."""
    import tensorflow as tf
    from tffre.models import logistic_regression
    return (lambda: logistic_regression(NUM_FEATURES, NUM_CLASSES),
            tf.keras.losses.SparseCategoricalCrossentropy())


class SyntheticRecipe(Recipe):
    """synthetic(alpha, beta) as one recipe (:mod:`tffre.tasks.recipe`): the data is generated,
    not read, so the simulation and every site generate the same set from the options and
    seed.

    Across sites no data is read. Node configuration:

    * ``data``: ``synthetic:<k>``, the site's client index k (from 0) of the set
      :func:`tffre.data.synthetic_sets.make_synthetic` generates from the job's options (alpha,
      beta, iid) and seed: the site trains on that client's train split and is evaluated on
      its test split, as client k of ``python -m tffre run --dataset synthetic --clients N
      --seed S`` is;
    * ``clients``: N, the number of clients generated (default the task's 30). The sites must
      agree on it (:attr:`AGREED`): a site that generates another set takes no part.

    Each site should name another k; a k named by two sites trains twice on the same data.
    """

    TASK = TASK
    EVALUATION = "classification"
    PREDICTS = "features"
    TABLES = ("FLCMC Table 8",)
    AGREED = ("clients",)

    def __init__(self):
        self._data = {}   # the last (options, clients, seed) -> FederatedData

    def _generated(self, options, num_clients, seed):
        key = (options, num_clients, seed)
        if key not in self._data:
            self._data = {key: generate(options, num_clients, seed)}
        return self._data[key]

    def load_run(self, cfg, path, notes):
        """Every client of the set generated for ``--clients`` from the run's seed."""
        return self._loaded(self._generated(cfg.options, cfg.run.clients, cfg.run.seed))

    def load(self, path, options, *, seed, notes=None, site=None, dataset=None):
        """A site's client k of N (``site``'s ``data`` and ``clients``; ``path`` is not read)."""
        k, num_clients = client_of(site or {})
        data = self._generated(options, num_clients, seed)
        client = list(data.clients)[k]
        return self._loaded(data, (client,), {"clients": num_clients})

    @staticmethod
    def _loaded(data, clients=None, facts=None):
        """The :class:`Loaded` records of ``clients`` (default all) of ``data``: each a
        feature vector ``x`` and its ``label``, clients one after another, with the clients'
        row ranges in ``facts["rows"]`` (the partition)."""
        splits, rows = {}, {}
        for cid in clients or data.clients:
            rows[cid] = {}
            for split, (x, y) in data.clients[cid].items():
                records = splits.setdefault(split, [])
                rows[cid][split] = (len(records), len(records) + len(y))
                records.extend({"x": x[i], "label": str(int(y[i]))} for i in range(len(y)))
        return Loaded(splits, tuple(str(k) for k in range(NUM_CLASSES)), [],
                      {"rows": rows, **(facts or {})}, name=data.name)

    def build(self, spec):
        """The paper's logistic regression (:func:`build_model`); the bundle's encoder takes
        the feature vectors as they are."""
        import numpy as np
        import tensorflow as tf
        from tffre.text import FeatureEncoder
        model_fn, loss = build_model()
        return Built(model_fn=model_fn, loss=loss,
                     encode=lambda records: np.asarray([r["x"] for r in records],
                                                       np.float32).reshape(-1, NUM_FEATURES),
                     x_spec=tf.TensorSpec((None, NUM_FEATURES), tf.float32),
                     encoder=FeatureEncoder(NUM_FEATURES), description="logistic regression")

    def partition(self, loaded, options, num_clients, seed):
        """The generated clients as they are (FedProx's own split)."""
        import numpy as np
        return {cid: {split: np.arange(*span) for split, span in spans.items()}
                for cid, spans in loaded.facts["rows"].items()}

    @staticmethod
    def check_site(site, dataset=None):
        """The site's ``data`` and ``clients`` before it starts: one line naming its client
        (its examples are generated from the job's options and seed when the run starts)."""
        k, num_clients = client_of(site)
        return (f"synthetic:{k}: client {k} of {num_clients}, generated from the run's "
                f"options and seed when it starts")


def client_of(site):
    """(k, N) of a node configuration's ``data`` ("synthetic:<k>") and ``clients`` (N,
    default 30); :class:`tffre.tasks.sites.SiteDataError` naming the key otherwise."""
    spec = str(site.get("data") or "")
    prefix, _, index = spec.partition(":")
    clients = site.get("clients")
    try:
        num_clients = int(TASK.defaults["clients"] if clients in (None, "") else clients)
    except (TypeError, ValueError):
        raise SiteDataError(f"node config: clients: {clients!r} is not a whole number") \
            from None
    if num_clients < 1:
        raise SiteDataError(f"node config: clients: {num_clients} is not >= 1")
    if prefix != "synthetic" or not index.strip().isdigit():
        raise SiteDataError(f"node config: data: {spec!r} is not synthetic:<k> (the site's "
                            f"client index k, e.g. --node-config 'data=\"synthetic:0\"')")
    k = int(index)
    if k >= num_clients:
        raise SiteDataError(f"node config: data: client {k} of {num_clients} (clients): "
                            f"k must be below {num_clients}")
    return k, num_clients


#: The task's one declaration: ``prepare`` and the deployment's sites are derived from it
#: (:mod:`tffre.tasks.recipe`).
RECIPE = SyntheticRecipe()
