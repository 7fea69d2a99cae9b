"""Keras optimizers for federated local training (FLCMC paper, Eq. 15-27).

* :class:`SelfAdam` -- Adam written out literally from Eq. 15-20.
* :class:`PAdam`    -- Adam on the proximally perturbed gradient, Eq. 21-27.
* :class:`PGD`      -- SGD on that same perturbed gradient (FedProx/FedPA).

All three subclass ``tf.keras.optimizers.Optimizer`` and so work in
``model.compile``/``model.fit``, in custom training loops and inside
TFF computations. The proximal ones need the global weights, given with
``set_anchor(weights)``.
"""

from optimizers.anchored import AnchoredOptimizer, MissingAnchorError
from optimizers.padam import PAdam
from optimizers.pgd import PGD
from optimizers.self_adam import SelfAdam

__all__ = ["AnchoredOptimizer", "MissingAnchorError", "PAdam", "PGD", "SelfAdam",
           "training_state"]


def training_state(optimizer):
    """The variables of a built Keras optimizer that carry its training state (step count,
    moments): all of ``optimizer.variables`` but a proximal optimizer's anchors, which are
    the global weights, set afresh each round (:attr:`AnchoredOptimizer.anchor_variables`)."""
    anchors = {id(a) for a in getattr(optimizer, "anchor_variables", ())}
    return [v for v in optimizer.variables if id(v) not in anchors]
