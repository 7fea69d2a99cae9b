"""FedRS: federated learning with restricted softmax (Li and Zhan, KDD 2021).

Under label skew a client lacks some classes altogether. Trained with the
plain softmax, its update pushes the classifier vectors of those missing
classes away from every feature it sees, and the averaged classifier
suffers. FedRS restricts the missing classes' logits while the client
trains (the paper's "restricted softmax"):

    s_c = 1 if class c is in the client's data, alpha otherwise   (binary, the paper's form)
    p_c = exp(s_c * o_c) / sum_j exp(s_j * o_j),   o = the model's logits
    L   = -(1/B) sum_i log p_{y_i}(x_i)

With alpha = 1 it is FedAvg; the smaller alpha, the less a missing class's
vector is moved. Tune alpha (``restriction``) over the grid 0.9 / 0.5 / 0.1;
0.5 is the default.

The authors' code (FedRepo, ``fedrs.py``) uses a proportional form instead,
which also restricts the client's rare classes: ``fedrs_form="proportional"``

    s_c = alpha + (1 - alpha) * n_c / max_j n_j                     (n_c: the client's count)

which is alpha for a missing class and 1 for the client's most common one.

Two details differ from FedRepo: the scale multiplies the model's whole
``logits`` output (bias included; FedRepo multiplies W h and drops the
classifier's bias), as the spec s ⊙ logits says, and the loss keeps the
model's own regularization losses (``keras_model.losses``) as the model
loss does. The objective *replaces* the model's cross-entropy and needs a
model with a ``logits`` output (pre-softmax scores). The counts n_c come
from one pass over the client's data before training
(``uses_label_counts``). At test time the model is used as it is, without
any scaling: the restriction exists only in local training.
"""

import dataclasses

from tffre import definition
from tffre.definition import Definition
from tffre.hparams import choice, param, probability
from tffre.lazy import tf

FEDRS_FORMS = ("binary", "proportional")


def model_logits(ctx, algorithm):
    """The model's ``logits`` output, or a ValueError naming what ``algorithm`` needs."""
    if "logits" not in ctx.outputs:
        raise ValueError(f"{algorithm} rescales the model's pre-softmax scores and needs a model "
                         f"with a 'logits' output; its outputs are {sorted(ctx.outputs)}")
    return ctx.outputs["logits"]


def cross_entropy_on(ctx, logits):
    """The batch-mean sparse cross-entropy of ``logits`` against ``ctx.y`` (Keras' default
    reduction, SUM_OVER_BATCH_SIZE), plus the model's regularization losses, as
    ``ctx.model_loss()`` would give on the plain logits."""
    y = tf.cast(tf.reshape(ctx.y, [-1]), tf.int32)
    ce = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y, logits=tf.cast(logits, tf.float32)))
    return tf.add_n([ce] + list(ctx.model.keras_model.losses))


def restriction_scales(label_counts, restriction, form="binary"):
    """FedRS's per-class scales s [C] from the client's label counts [C] (module docstring)."""
    counts = tf.cast(label_counts, tf.float32)
    alpha = tf.cast(restriction, tf.float32)
    if form == "binary":
        return tf.where(counts > 0, 1.0, alpha)
    # Proportional (FedRepo): a client with no data at all (max 0) gets alpha everywhere.
    return alpha + (1.0 - alpha) * counts / tf.maximum(tf.reduce_max(counts), 1.0)


class FedRS(Definition):
    """FedRS's restricted softmax as the client objective (see the module docstring)."""

    @dataclasses.dataclass(frozen=True)
    class Hparams(definition.Hparams):
        restriction: float = param(0.5, probability, "FedRS: the logit scale alpha of the "
                                   "classes a client lacks (grid 0.9/0.5/0.1)",
                                   paper="FedRS, restricted softmax")
        fedrs_form: str = param("binary", choice(*FEDRS_FORMS), "FedRS: binary (the paper) or "
                                "proportional (the authors' FedRepo code)")

    uses_label_counts = True

    def objective(self, ctx):
        logits = model_logits(ctx, "FedRS")
        scales = restriction_scales(ctx.label_counts, self.hparams.restriction,
                                    self.hparams.fedrs_form)
        return cross_entropy_on(ctx, scales * tf.cast(logits, tf.float32))
