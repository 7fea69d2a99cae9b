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

__all__ = ["AnchoredOptimizer", "MissingAnchorError", "PAdam", "PGD", "SelfAdam"]
