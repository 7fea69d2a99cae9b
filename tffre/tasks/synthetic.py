"""The synthetic(alpha, beta) job (FLCMC section 5.1, Table 8): logistic regression."""

from tffre.experiments import Job


def prepare(cfg):
    """FedProx's synthetic data for ``cfg`` and the paper's logistic regression."""
    import tensorflow as tf
    from tffre.data.synthetic import make_synthetic
    from tffre.models import logistic_regression
    from tffre.text import FeatureEncoder

    data = make_synthetic(cfg.alpha, cfg.beta, iid=cfg.iid, num_clients=cfg.clients,
                          seed=cfg.seed)
    num_features = data.element_spec()[0].shape[-1]
    return Job(data=data,
               model_fn=lambda: logistic_regression(num_features, data.num_classes),
               loss=tf.keras.losses.SparseCategoricalCrossentropy(),
               title=f"{data.name}, logistic regression",
               label_names=[str(k) for k in range(data.num_classes)],
               encoder=FeatureEncoder(num_features))
