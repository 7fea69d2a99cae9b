"""PAdam: Adam on the proximally perturbed gradient (FLCMC paper Eq. 21-27)."""

import tensorflow as tf

from optimizers.anchored import AnchoredOptimizer
from optimizers.self_adam import SelfAdam


@tf.keras.utils.register_keras_serializable(package="tffre")
class PAdam(AnchoredOptimizer, SelfAdam):
    """Perturbed Adam, the local solver of FedProxP and FedPAP.

    g = grad F_k(theta) + mu (theta - theta_global)        (Eq. 22)
    then the Self-Adam moments and step on g               (Eq. 23-27)

    theta_global is given with :meth:`set_anchor`; stepping without it raises
    :class:`MissingAnchorError`. A ``tf.IndexedSlices`` gradient becomes dense,
    because the proximal term moves every row.

    Args:
      learning_rate: eta in Eq. 27.
      mu: the proximal coefficient of Eq. 21-22.
      beta_1: b1, the first moment's decay (as in Eq. 23-27).
      beta_2: b2, the second moment's decay (as in Eq. 23-27).
      epsilon: eps, added to sqrt(v_hat) (as in Eq. 23-27).
      name: the optimizer's name.
      **kwargs: the base ``tf.keras.optimizers.Optimizer`` keywords.
    """

    def __init__(self, learning_rate=0.001, mu=0.01, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-8, name="PAdam", **kwargs):
        super().__init__(mu=mu, learning_rate=learning_rate, beta_1=beta_1,
                         beta_2=beta_2, epsilon=epsilon, name=name, **kwargs)

    def update_step(self, gradient, variable):
        """Eq. 22 (perturb), then Eq. 23-27 (Self-Adam step)."""
        SelfAdam.update_step(self, self.perturbed_gradient(gradient, variable), variable)
