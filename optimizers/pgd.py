"""PGD: SGD on the proximally perturbed gradient, FedProx's and FedPA's local solver."""

import tensorflow as tf

from optimizers.anchored import AnchoredOptimizer


@tf.keras.utils.register_keras_serializable(package="tffre")
class PGD(AnchoredOptimizer):
    """Perturbed gradient descent: theta <- theta - lr (g + mu (theta - theta_global)).

    This is Eq. 22 of the FLCMC paper followed by a plain SGD step (the
    paper's section 4.1 calls it PGD). theta_global comes from
    :meth:`set_anchor`. With mu = 0 it is plain SGD.

    Args:
      learning_rate: the SGD step size.
      mu: the proximal coefficient of Eq. 21-22.
      name: the optimizer's name.
      **kwargs: the base ``tf.keras.optimizers.Optimizer`` keywords.
    """

    def __init__(self, learning_rate=0.01, mu=0.01, name="PGD", **kwargs):
        super().__init__(mu=mu, name=name, **kwargs)
        self._learning_rate = self._build_learning_rate(learning_rate)

    def update_step(self, gradient, variable):
        """One SGD step on the perturbed gradient of Eq. 22."""
        lr = tf.cast(self.learning_rate, variable.dtype)
        variable.assign_sub(lr * self.perturbed_gradient(gradient, variable))

    def get_config(self):
        """Returns the constructor arguments, for ``from_config``."""
        config = super().get_config()
        config["learning_rate"] = self._serialize_hyperparameter(self._learning_rate)
        return config
