"""The proximal ("anchored") part shared by PAdam and PGD.

FedProx's local objective (FLCMC paper Eq. 21) adds mu/2 ||theta - theta_global||^2
to the client loss. Its gradient (Eq. 22) is g + mu (theta - theta_global). The
optimizers here apply that perturbation themselves, so the global weights
("the anchor") must reach them through :meth:`AnchoredOptimizer.set_anchor`.
"""

import tensorflow as tf


class MissingAnchorError(RuntimeError):
    """Raised when a proximal optimizer steps before ``set_anchor`` was called."""


class AnchoredOptimizer(tf.keras.optimizers.Optimizer):
    """Base class for optimizers that step on g + mu (theta - anchor) (Eq. 22).

    Subclasses call :meth:`perturbed_gradient` inside ``update_step``.

    Args:
      mu: the proximal coefficient mu of Eq. 21-22.
      name: the optimizer's name.
      **kwargs: the base ``tf.keras.optimizers.Optimizer`` keywords.
    """

    def __init__(self, mu=0.01, name="AnchoredOptimizer", **kwargs):
        super().__init__(name=name, **kwargs)
        if mu < 0:
            raise ValueError(f"{name}: mu must be >= 0, got {mu}")
        self.mu = mu
        self._pending_anchor = None
        self._anchors = None
        self._anchor_is_set = False

    def set_anchor(self, weights):
        """Sets theta_global, the point the proximal term pulls toward.

        Args:
          weights: a list of tensors or arrays, one per variable this optimizer
            optimizes and in the same order (``model.trainable_variables``
            order). May be called before or after the optimizer is built, and
            again at each federated round.
        """
        weights = list(weights)
        self._anchor_is_set = True
        if self._anchors is None:
            self._pending_anchor = weights
            return
        if len(weights) != len(self._anchors):
            raise ValueError(
                f"{self.name}.set_anchor: got {len(weights)} tensors for "
                f"{len(self._anchors)} optimized variables")
        for anchor, value in zip(self._anchors, weights):
            anchor.assign(tf.cast(value, anchor.dtype))

    def build(self, var_list):
        """Creates one anchor slot per variable, filled from a pending anchor if any."""
        super().build(var_list)
        if self._anchors is not None:
            return
        pending = self._pending_anchor
        if pending is not None and len(pending) != len(var_list):
            raise ValueError(
                f"{self.name}.set_anchor was given {len(pending)} tensors but "
                f"optimizes {len(var_list)} variables")
        self._anchors = []
        for i, var in enumerate(var_list):
            init = None if pending is None else tf.cast(tf.reshape(pending[i], var.shape), var.dtype)
            self._anchors.append(self.add_variable_from_reference(var, "anchor", initial_value=init))
        self._pending_anchor = None

    def perturbed_gradient(self, gradient, variable):
        """Returns g + mu (theta - theta_global) for ``variable`` (Eq. 22).

        A ``tf.IndexedSlices`` gradient is made dense: the proximal term
        touches every row of the variable.
        """
        if not self._anchor_is_set:
            raise MissingAnchorError(
                f"{self.name} needs the global weights before it can step: call "
                f"optimizer.set_anchor(weights) with one tensor per trainable "
                f"variable (model.trainable_variables order).")
        anchor = self._anchors[self._index_dict[self._var_key(variable)]]
        if isinstance(gradient, tf.IndexedSlices):
            gradient = tf.convert_to_tensor(gradient)
        return gradient + tf.cast(self.mu, variable.dtype) * (variable - anchor)

    def get_config(self):
        """Returns the constructor arguments, for ``from_config``."""
        config = super().get_config()
        config["mu"] = self.mu
        return config
