"""Self-Adam: Adam as written in Eq. 15-20 of the FLCMC paper."""

import tensorflow as tf


@tf.keras.utils.register_keras_serializable(package="tffre")
class SelfAdam(tf.keras.optimizers.Optimizer):
    """Adam implemented literally from the FLCMC paper, Eq. 15-20.

    m_t = b1 m_{t-1} + (1 - b1) g_t                       (Eq. 16)
    v_t = b2 v_{t-1} + (1 - b2) g_t^2                     (Eq. 17)
    m_hat = m_t / (1 - b1^t),  v_hat = v_t / (1 - b2^t)   (Eq. 18, 19)
    theta_t = theta_{t-1} - lr * m_hat / (sqrt(v_hat) + eps)   (Eq. 20)

    Unlike ``tf.keras.optimizers.Adam``, epsilon is added to sqrt(v_hat)
    (the paper's form), not to sqrt(v_t) after folding the bias correction
    into the learning rate. The two agree to within O(eps).

    Args:
      learning_rate: eta in Eq. 20 (a float or a Keras schedule).
      beta_1: b1 in Eq. 16.
      beta_2: b2 in Eq. 17.
      epsilon: eps in Eq. 20.
      name: the optimizer's name.
      **kwargs: the base ``tf.keras.optimizers.Optimizer`` keywords
        (clipnorm, weight_decay, jit_compile, ...).
    """

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-8, name="SelfAdam", **kwargs):
        super().__init__(name=name, **kwargs)
        self._learning_rate = self._build_learning_rate(learning_rate)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon

    def build(self, var_list):
        """Creates the first (m) and second (v) moment slots, zero-initialised."""
        super().build(var_list)
        if getattr(self, "_built", False):
            return
        self._built = True
        self._momentums = [self.add_variable_from_reference(v, "m") for v in var_list]
        self._velocities = [self.add_variable_from_reference(v, "v") for v in var_list]

    def update_step(self, gradient, variable):
        """Applies Eq. 16-20 to one variable (dense or ``tf.IndexedSlices`` gradient)."""
        dtype = variable.dtype
        lr = tf.cast(self.learning_rate, dtype)
        beta_1 = tf.cast(self.beta_1, dtype)
        beta_2 = tf.cast(self.beta_2, dtype)
        t = tf.cast(self.iterations + 1, dtype)
        index = self._index_dict[self._var_key(variable)]
        m = self._momentums[index]
        v = self._velocities[index]
        if isinstance(gradient, tf.IndexedSlices):
            # Rows without a gradient have g = 0: their moments only decay
            # (Eq. 16-17 with g = 0); the sliced rows get the gradient term.
            m.assign(m * beta_1)
            m.scatter_add(tf.IndexedSlices(gradient.values * (1 - beta_1), gradient.indices))
            v.assign(v * beta_2)
            v.scatter_add(tf.IndexedSlices(tf.square(gradient.values) * (1 - beta_2),
                                           gradient.indices))
        else:
            m.assign(beta_1 * m + (1 - beta_1) * gradient)
            v.assign(beta_2 * v + (1 - beta_2) * tf.square(gradient))
        m_hat = m / (1 - tf.pow(beta_1, t))
        v_hat = v / (1 - tf.pow(beta_2, t))
        variable.assign_sub(lr * m_hat / (tf.sqrt(v_hat) + self.epsilon))

    def get_config(self):
        """Returns the constructor arguments, for ``from_config``."""
        config = super().get_config()
        config.update({
            "learning_rate": self._serialize_hyperparameter(self._learning_rate),
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
        })
        return config
