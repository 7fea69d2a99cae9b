"""The synthetic(alpha, beta) task (FLCMC section 5.1, Table 8): logistic regression.

Across sites (:class:`SyntheticSites`) no data is read: each site generates the same
synthetic(alpha, beta) set from the job's options and seed and trains on one client of it.
"""

import dataclasses

from tffre.hparams import Params, boolean, non_negative_float, param
from tffre.runner.run_settings import Job
from tffre.tasks import Task
from tffre.tasks.sites import SiteData, SiteDataError, SiteModel, Sites

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
    """(model_fn, loss) of the paper's logistic regression, for the simulation
    (:func:`prepare`) and each side of a deployment (:class:`SyntheticSites`) alike."""
    import tensorflow as tf
    from tffre.models import logistic_regression
    return (lambda: logistic_regression(NUM_FEATURES, NUM_CLASSES),
            tf.keras.losses.SparseCategoricalCrossentropy())


def prepare(cfg):
    """FedProx's synthetic data for ``cfg`` and the paper's logistic regression."""
    from tffre.text import FeatureEncoder

    data = generate(cfg.options, cfg.run.clients, cfg.run.seed)
    model_fn, loss = build_model()
    return Job(data=data, model_fn=model_fn, loss=loss,
               title=f"{data.name}, logistic regression",
               label_names=[str(k) for k in range(data.num_classes)],
               encoder=FeatureEncoder(NUM_FEATURES))


class SyntheticSites(Sites):
    """synthetic(alpha, beta) across sites (:mod:`tffre.tasks.sites`): no site reads data.

    Node configuration:

    * ``data``: ``synthetic:<k>``, the site's client index k (from 0) of the set
      :func:`tffre.data.synthetic_sets.make_synthetic` generates from the job's options (alpha,
      beta, iid) and seed: the site trains on that client's train split and is evaluated on
      its test split, as client k of ``python -m tffre run --dataset synthetic --clients N
      --seed S`` is;
    * ``clients``: N, the number of clients generated (default the task's 30). The sites must
      agree on it (:attr:`AGREED`): a site that generates another set takes no part.

    Each site should name another k; a k named by two sites trains twice on the same data.
    """

    AGREED = ("labels", "clients")

    def __init__(self):
        self._data = {}   # the last (options, clients, seed) -> FederatedData

    @staticmethod
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

    def _client(self, job, site):
        """{split: (x, y)} of the site's client of the job's data."""
        k, num_clients = self.client_of(site)
        agreed = job.facts.get("clients")
        if agreed and int(agreed) != num_clients:
            raise SiteDataError(f"node config: clients: {num_clients} differs from the "
                                f"{agreed} the sites agreed on")
        options = Options.resolve({n: v for n, v in job.options.items()
                                   if n in Options.names()})
        key = (options, num_clients, job.seed)
        if key not in self._data:
            self._data = {key: generate(options, num_clients, job.seed)}
        return list(self._data[key].clients.values())[k]

    def survey(self, job, site):
        """{labels, examples, clients} of the site's client."""
        _, num_clients = self.client_of(site)
        x, _ = self._client(job, site)["train"]
        return {"labels": [str(c) for c in range(NUM_CLASSES)], "examples": int(len(x)),
                "clients": num_clients}

    def model(self, job, side):
        """The paper's logistic regression (:func:`build_model`); the bundle's encoder takes
        the feature vectors as they are."""
        import tensorflow as tf
        from tffre.text import FeatureEncoder
        model_fn, loss = build_model()
        return SiteModel(model_fn=model_fn, loss=loss,
                         input_spec=(tf.TensorSpec((None, NUM_FEATURES), tf.float32),
                                     tf.TensorSpec((None,), tf.int32)),
                         encoder=FeatureEncoder(NUM_FEATURES))

    def site_data(self, job, site):
        """The site's client's train split, and its test split held out."""
        client = self._client(job, site)
        return SiteData(train=client["train"], held_out={"test": client["test"]})

    def check_site(self, site, dataset=None):
        """The site's ``data`` and ``clients`` before it starts: one line naming its client
        (its examples are generated from the job's options and seed when the run starts)."""
        k, num_clients = self.client_of(site)
        return (f"synthetic:{k}: client {k} of {num_clients}, generated from the run's "
                f"options and seed when it starts")


#: What ``python -m tffre deploy`` runs at each side (:mod:`tffre.tasks.sites`).
SITES = SyntheticSites()
