"""The synthetic(alpha, beta) task (FLCMC section 5.1, Table 8): logistic regression."""

import dataclasses

from tffre.hparams import Params, boolean, non_negative_float, param
from tffre.runner.settings import Job
from tffre.tasks import Task


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


def prepare(cfg):
    """FedProx's synthetic data for ``cfg`` and the paper's logistic regression."""
    import tensorflow as tf
    from tffre.data.synthetic import make_synthetic
    from tffre.models import logistic_regression
    from tffre.text import FeatureEncoder

    o = cfg.options
    data = make_synthetic(o.alpha, o.beta, iid=o.iid, num_clients=cfg.run.clients,
                          seed=cfg.run.seed)
    num_features = data.element_spec()[0].shape[-1]
    return Job(data=data,
               model_fn=lambda: logistic_regression(num_features, data.num_classes),
               loss=tf.keras.losses.SparseCategoricalCrossentropy(),
               title=f"{data.name}, logistic regression",
               label_names=[str(k) for k in range(data.num_classes)],
               encoder=FeatureEncoder(num_features))
