"""The proximal ("anchored") part shared by PAdam and PGD.

FedProx's local objective (FLCMC paper Eq. 21) adds mu/2 ||theta - theta_global||^2
to the client loss. Its gradient (Eq. 22) is g + mu (theta - theta_global). The
optimizers here apply that perturbation themselves, so the global weights
("the anchor") must reach them through :meth:`AnchoredOptimizer.set_anchor`.
"""

import tensorflow as tf


class MissingAnchorError(RuntimeError):
    """Raised when a proximal optimizer steps before ``set_anchor`` was called."""


class _AnchorState(tf.train.experimental.PythonState):
    """Whether the anchor holds the global weights, saved in checkpoints.

    The anchor values are checkpointed as variables; this flag goes with
    them so that an optimizer restored from a checkpoint can step without a
    new ``set_anchor`` (and one restored from an unset optimizer cannot).
    """

    def __init__(self):
        self.is_set = False

    def serialize(self):
        return b"1" if self.is_set else b"0"

    def deserialize(self, string_value):
        self.is_set = string_value == b"1"


class AnchoredOptimizer(tf.keras.optimizers.Optimizer):
    """Base class for optimizers that step on g + mu (theta - anchor) (Eq. 22).

    Subclasses call :meth:`perturbed_gradient` inside ``update_step``. The
    anchor slots are created once, by ``build``, one per optimized variable,
    and are looked up by variable (like Keras's own slots), so
    ``apply_gradients`` may be given any subset of the built variables.
    ``set_weights`` and checkpoint restore bring the anchors back with the
    rest of the state; no new ``set_anchor`` is needed after them.

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
        self._anchor_state = _AnchorState()

    @property
    def anchor_variables(self):
        """The anchor slots (theta_global, one per optimized variable); empty before ``build``.

        They are optimizer variables but not training state: a federated client sets them
        from the broadcast each round (:meth:`set_anchor`) rather than carrying them over.
        """
        return list(self._anchors or [])

    @property
    def _anchor_is_set(self):
        return self._anchor_state.is_set

    def set_anchor(self, weights):
        """Sets theta_global, the point the proximal term pulls toward.

        Args:
          weights: a list of tensors or arrays, one per variable this optimizer
            optimizes and in the same order (``model.trainable_variables``
            order, the order given to ``build``). May be called before or
            after the optimizer is built, and again at each federated round.
        """
        weights = list(weights)
        self._anchor_state.is_set = True
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
        """Creates one anchor slot per variable, once, filled from a pending anchor if any.

        Marks the optimizer built, as Keras's own optimizers do: Keras then
        keeps the variable -> slot index of this first ``build`` instead of
        rebuilding it from each ``apply_gradients`` call's variables, and
        accepts ``set_weights``.
        """
        if self._anchors is not None:
            super().build(var_list)
            return
        var_list = list(var_list)
        pending = self._pending_anchor
        # Checked before the base build so that a failed build leaves nothing half-built.
        if pending is not None and len(pending) != len(var_list):
            raise ValueError(
                f"{self.name}.set_anchor was given {len(pending)} tensors but "
                f"optimizes {len(var_list)} variables")
        super().build(var_list)
        self._anchors = []
        for i, var in enumerate(var_list):
            init = None if pending is None else tf.cast(tf.reshape(pending[i], var.shape), var.dtype)
            self._anchors.append(self.add_variable_from_reference(var, "anchor", initial_value=init))
        self._pending_anchor = None
        self._built = True

    def set_weights(self, weights):
        """Sets all optimizer variables (``self.variables`` order), anchors included.

        The anchors are part of the state, so after this the optimizer can
        step without a new ``set_anchor``.
        """
        weights = list(weights)
        super().set_weights(weights)
        if len(weights) >= len(self.variables):
            self._anchor_state.is_set = True

    def load_own_variables(self, store):
        """Loads the state saved in a ``.keras`` file, anchors included (as ``set_weights``)."""
        super().load_own_variables(store)
        if self.variables and len(store.keys()) == len(self.variables):
            self._anchor_state.is_set = True

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
        # By variable, through the index of the one build (the key Keras uses
        # for its slots), not by the variable's position in this step's list.
        anchor = self._anchors[self._index_dict[self._var_key(variable)]]
        if isinstance(gradient, tf.IndexedSlices):
            gradient = tf.convert_to_tensor(gradient)
        return gradient + tf.cast(self.mu, variable.dtype) * (variable - anchor)

    def get_config(self):
        """Returns the constructor arguments, for ``from_config``."""
        config = super().get_config()
        config["mu"] = self.mu
        return config
