"""MOON: model-contrastive federated learning (Li, He and Song, CVPR 2021).

MOON corrects local drift at the level of representations. Each client, on
each batch, contrasts the representation of its model being trained, z,
with that of the broadcast global model, z_glob (the positive pair), and
with that of its own local model from its previous round, z_prev (the
negative pair) (MOON Sect. 3.3: the model-contrastive loss l_con and the
local objective l_sup + mu * l_con):

    l_con = -log( exp(sim(z, z_glob) / tau)
                  / (exp(sim(z, z_glob) / tau) + exp(sim(z, z_prev) / tau)) )
    L     = CE(logits, y) + mu * l_con                       (mean over the batch)

with sim the cosine similarity, tau = 0.5 (MOON's value) and mu = 1 by
default (MOON uses mu = 1 for CIFAR-100 and Tiny-ImageNet, 5 for CIFAR-10;
FedCMC, which runs MOON as a baseline in its Table 2, does not give its
values). CE is the model's own loss (``ctx.model_loss()``). z_glob and
z_prev come from frozen copies of the two models, run in inference mode and
without gradient (MOON Algorithm 1). MOON's server is FedAvg's: here the
registry row's weighted mean, with tf.keras Adam as the local optimizer.

**Per-client state.** The previous local model is the client's own: it is
kept per client between the rounds in which the client is sampled, however
many rounds apart (:meth:`MOON.initial_client_state`). Before a client's
first round there is no previous model and the contrastive term is exactly
0, so a client's first round is FedAvg's with the same optimizer (FedAvgT).
A client whose round diverged (NaN or Inf, excluded from the mean) keeps its
old state. The state is the trainable weights only: a frozen copy takes the
non-trainable weights (e.g. batch-norm statistics) of the fresh model, which
the relation models of :mod:`tffre.models.relation_model` do not have.

**Representation.** z is the model's ``features`` output (the relation
representation of :mod:`tffre.models.relation_model`; for the document-level model of
:mod:`tffre.models.document_model`, each candidate pair's [z_s; z_o], the input of its
grouped bilinear classifier). An output with a pair axis (``[batch, pairs,
d]``) is contrasted pair by pair and averaged over the valid pairs only: the
model's loss says which they are (:meth:`ObjectiveContext.row_mask
<tffre.definition.ObjectiveContext.row_mask>`; document RE's
``pair_mask``). FedLCC (:mod:`tffre.algorithms.fedlcc`) is this class with the
localized context as z. MOON adds a projection head (two
dense layers, Linear-ReLU-Linear) between the encoder and the contrast;
with ``projection_head=True`` z is the model's ``projection`` output
instead. The head has to be part of the Keras model, so that it is trained,
averaged and broadcast like every other layer: build the model with an
extra output ``projection`` (the head applied to ``features``) and the
option reads it. This module does not add variables of its own.

At test time the model is used as it is: MOON changes only the training
objective.
"""

import collections
import dataclasses

from tffre import definition
from tffre.definition import Definition, GlobalModelMixin, finite_or_previous
from tffre.hparams import boolean, non_negative_float, param, positive_float
from tffre.lazy import tf

#: The contrastive term's weight and temperature, as MOON and FedLCC (Eq. 12-13) declare them.
CONTRASTIVE_WEIGHT = dict(parse=non_negative_float, aliases=("mu",),
                          help="weight mu of the model-contrastive term")
CONTRASTIVE_TEMPERATURE = dict(parse=positive_float, aliases=("temperature",),
                               help="temperature tau of the model-contrastive term")


def cosine_similarity(a, b):
    """Row-wise cosine similarity of [B, D] tensors.

    A zero row gives 0 rather than NaN: ``l2_normalize`` clamps the squared
    norm at 1e-12 (torch's ``F.cosine_similarity``, which MOON's code uses,
    clamps the norms at 1e-8 to the same end).
    """
    return tf.reduce_sum(tf.math.l2_normalize(a, axis=-1) * tf.math.l2_normalize(b, axis=-1),
                         axis=-1)


def masked_mean(values, mask=None):
    """The mean of ``values``; with a ``mask`` of the same shape, over its nonzero entries
    (0 where none is)."""
    if mask is None:
        return tf.reduce_mean(values)
    mask = tf.cast(mask, values.dtype)
    return tf.reduce_sum(values * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)


def contrastive_loss(z, z_glob, z_prev, temperature):
    """MOON's l_con per example ([B], or [B, P] for [B, P, D] inputs):
    -log(e^{s_g/tau} / (e^{s_g/tau} + e^{s_p/tau})).

    That is the cross-entropy of the 2-way logits (s_g, s_p) / tau with the
    positive pair as the label (MOON's code), which equals
    softplus((s_p - s_g) / tau): written so, it cannot overflow.
    """
    s_glob = cosine_similarity(z, z_glob)
    s_prev = cosine_similarity(z, z_prev)
    return tf.nn.softplus((s_prev - s_glob) / temperature)


class MOON(GlobalModelMixin, Definition):
    """MOON's client objective and per-client previous model (see the module docstring).

    A subclass contrasts another output by setting :attr:`representation_output`
    (FedLCC: ``"context"``) and may replace :meth:`contrast`.

    Client state: ``weights`` (the trainable weights of the client's last
    local model, in ``model.trainable_variables`` order) and ``seen`` (1.0
    once the client has trained a round, else 0.0).
    """

    @dataclasses.dataclass(frozen=True)
    class Hparams(definition.Hparams):
        contrastive_weight: float = param(1.0, paper="MOON Sect. 3.3: mu", **CONTRASTIVE_WEIGHT)
        contrastive_temperature: float = param(0.5, paper="MOON Sect. 3.3: tau",
                                               **CONTRASTIVE_TEMPERATURE)
        projection_head: bool = param(False, boolean, "MOON: contrast the model's "
                                      "'projection' output (a 2-layer head) instead of its "
                                      "'features'", flag=True)

    #: The named model output contrasted (z); ``projection_head=True`` reads "projection".
    representation_output = "features"

    def __init__(self, hparams, context=None):
        super().__init__(hparams, context)
        self.representation = "projection" if getattr(self.hparams, "projection_head", False) \
            else self.representation_output

    def _z(self, outputs):
        if self.representation not in outputs:
            hint = (" (projection_head=True needs the model to output its projection head's "
                    "result as 'projection')" if self.representation == "projection" else "")
            raise ValueError(f"{type(self).__name__} contrasts the model's "
                             f"{self.representation!r} output, but "
                             f"the model's outputs are {sorted(outputs)}{hint}")
        return outputs[self.representation]

    def frozen_models(self):
        models = super().frozen_models()     # "global": the broadcast model (GlobalModelMixin)

        def previous(broadcast, state):
            # Before the client's first round there is no previous model: load the global one
            # instead (its term is multiplied by 0 below). Any finite model would do; the global
            # one is surely finite, where a model of zeros might not be for every architecture.
            return [tf.where(state["seen"] > 0, p, g)
                    for p, g in zip(state["weights"], broadcast["model"].trainable)]
        models["previous"] = previous
        return models

    def contrast(self, ctx):
        """The batch's contrastive term: the mean l_con over its examples (over the valid pairs
        when the model's loss masks rows, :meth:`ObjectiveContext.row_mask`)."""
        con = contrastive_loss(self._z(ctx.outputs), self._z(ctx.frozen["global"]),
                               self._z(ctx.frozen["previous"]),
                               self.hparams.contrastive_temperature)
        return masked_mean(con, ctx.row_mask())

    def objective(self, ctx):
        # seen = 0 in a client's first round: the term, and its gradient, are exactly 0 (it is
        # finite: the previous copy holds the global model then).
        return ctx.model_loss() + self.hparams.contrastive_weight * ctx.client_state["seen"] * \
            self.contrast(ctx)

    def initial_client_state(self, model):
        return collections.OrderedDict(
            weights=[tf.zeros_like(v) for v in model.trainable_variables],
            seen=tf.constant(0.0))

    def next_client_state(self, ctx):
        # A diverged round (its update excluded from the mean) keeps the old state.
        return finite_or_previous(collections.OrderedDict(
            weights=[tf.identity(v) for v in ctx.model.trainable_variables],
            seen=tf.constant(1.0)), ctx.client_state)
