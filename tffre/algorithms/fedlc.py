"""FedLC: federated learning with logits calibration (Zhang et al., ICML 2022).

Under label skew a client's softmax over-fits its common classes. FedLC
subtracts from each class's logit a margin that shrinks with the class's
local count, so that the client's rare and missing classes get relatively
larger logits while it trains (the paper's calibrated loss L_cal):

    n_c   = max(count of class c on the client, 1)
    z'_c  = z_c - tau * n_c^(-1/4)                  (z: the model's logits)
    L     = -(1/B) sum_i log( exp(z'_{y_i}) / sum_c exp(z'_c) )

with tau the ``calibration`` hyperparameter (default 1.0). n_c is clamped at
1 so that a missing class gets the largest finite margin, tau (its count 0
would give an infinite one).

**The denominator.** The paper prints the calibrated loss with the sum in
the denominator running over c != y only. That loss is not bounded below:
raising z'_y alone drives it to -infinity, and training on it is known to
collapse in practice. We use the full softmax including y, the
cross-entropy of the calibrated logits, as public implementations of FedLC
(FL-bench and code derived from it) do. (Some of that code clamps the counts
at 1e-8, not 1: a missing class's margin is then tau * 100; ours is tau.)

The objective *replaces* the model's cross-entropy (keeping the model's
regularization losses, ``keras_model.losses``) and needs a model with a
``logits`` output. The counts come from one pass over the client's data
before training (``uses_label_counts``). At test time the model is used as
it is, without calibration: the margins exist only in local training.
"""

import dataclasses

from tffre import definition
from tffre.algorithms.fedrs import cross_entropy_on, model_logits
from tffre.definition import Definition
from tffre.hparams import non_negative_float, param
from tffre.lazy import tf


def calibrated_logits(logits, label_counts, calibration):
    """z - tau * max(n, 1)^(-1/4), the margin broadcast over the batch ([B, C])."""
    counts = tf.maximum(tf.cast(label_counts, tf.float32), 1.0)
    return tf.cast(logits, tf.float32) - tf.cast(calibration, tf.float32) * tf.pow(counts, -0.25)


class FedLC(Definition):
    """FedLC's calibrated cross-entropy as the client objective (see the module docstring)."""

    @dataclasses.dataclass(frozen=True)
    class Hparams(definition.Hparams):
        calibration: float = param(1.0, non_negative_float, "FedLC: the calibration tau "
                                   "(0 gives FedAvg's cross-entropy)", paper="FedLC, L_cal")

    uses_label_counts = True

    def objective(self, ctx):
        logits = model_logits(ctx, "FedLC")
        return cross_entropy_on(ctx, calibrated_logits(logits, ctx.label_counts,
                                                       self.hparams.calibration))
