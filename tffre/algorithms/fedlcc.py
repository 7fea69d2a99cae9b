"""FedLCC: federated document-level RE with localized context contrast (Xiao, Jin and Hao).

FedLCC is MOON's model-contrastive correction (:mod:`tffre.algorithms.moon`)
applied to the *localized context* of each candidate entity pair rather than
to a representation of the whole input (FedLCC Sect. 3.3). For every valid
pair (e_s, e_o) of a batch, with c = c^{(e_s, e_o)} the model's ``context``
output (Eq. 5) under this client's model being trained (L_k^t), the broadcast
global model (L^t) and this client's model from its previous round
(L_k^{t-1}):

    L_LCC = -log( exp(sim(L_k^t, L^t) / tau)
                  / (exp(sim(L_k^t, L^t) / tau) + exp(sim(L_k^t, L_k^{t-1}) / tau)) )   (Eq. 12)
    L     = L_BCE + mu * L_LCC                                                          (Eq. 13)

sim the cosine similarity, the mean over the batch's valid pairs (the pair
mask packed in the targets, :func:`tffre.models.document_model.pack_targets`, which
the loss hands over as ``ctx.row_mask()``), tau = 0.5 and mu = 0.1 (Table
2). L_BCE is the model's own Keras loss,
:class:`tffre.models.document_model.DocRELoss` (Eq. 11; ``--loss softmax`` for the
authors' 2-class cross-entropy). The per-pair term is
:func:`lcc_loss`, which is MOON's l_con on c.

Everything else is MOON's, inherited, not copied: the global and previous
models are frozen copies run in inference mode without gradient; the
previous local model is per-client state kept between the rounds the client
is sampled in; before a client's first round the term is exactly 0 (so that
round is FedAvg's with Adam); a diverged client keeps its old state. The
server averages the models (Eq. 14, the registry row's weighted mean; the
paper's unweighted 1/n mean is ``--client-weighting uniform``).

The authors' released code never applies this loss (its contrastive branch
runs only for a ``fed_algo`` value no option reaches, and would contrast the
bilinear feature instead of c, without a temperature): this is the paper's
FedLCC, not the code's.
"""

import dataclasses

from tffre import definition
from tffre.algorithms.moon import (CONTRASTIVE_TEMPERATURE, CONTRASTIVE_WEIGHT, MOON,
                                  contrastive_loss, masked_mean)
from tffre.hparams import param
from tffre.lazy import tf


def lcc_loss(c, c_glob, c_prev, pair_mask, tau=0.5):
    """The localized context contrast loss (Eq. 12), averaged over the valid pairs.

    l = -log[exp(sim(c, c_glob)/τ) / (exp(sim(c, c_glob)/τ) + exp(sim(c, c_prev)/τ))],
    sim = cosine similarity, for c = L_k^t (this client's model), c_glob = L^t
    (the global model) and c_prev = L_k^{t-1} (this client's previous model),
    each the model's ``"context"`` output ``[b, P, d]``. ``c_glob`` and ``c_prev`` are
    targets: no gradient flows into them (they come from frozen models, as in MOON).
    Zero vectors (padded or context-less pairs) have similarity 0. Eq. 13's
    total is ``docre_loss(...) + mu * lcc_loss(...)``.

    Per pair this is MOON's l_con (:func:`tffre.algorithms.moon.contrastive_loss`, one
    formula for both), here on the localized context, averaged over ``pair_mask``.
    """
    c = tf.convert_to_tensor(c)
    c_glob = tf.stop_gradient(tf.cast(c_glob, c.dtype))
    c_prev = tf.stop_gradient(tf.cast(c_prev, c.dtype))
    mask = None if pair_mask is None else tf.cast(pair_mask, c.dtype)   # None: every pair
    return masked_mean(contrastive_loss(c, c_glob, c_prev, tau), mask)


class FedLCC(MOON):
    """FedLCC's client objective (Eq. 12-13) over the model's ``context`` output.

    The model must output ``context``: ``[batch, pairs, d]`` from
    :func:`tffre.models.document_model.build_docre_model`, trained with
    :class:`tffre.models.document_model.DocRELoss` on packed targets, whose pair mask selects
    the pairs averaged over (with another loss every row counts). Client state: MOON's
    (``weights``, ``seen``).
    """

    @dataclasses.dataclass(frozen=True)
    class Hparams(definition.Hparams):
        # FedLCC Table 2: mu 0.1, tau 0.5. No projection head (the context is contrasted).
        contrastive_weight: float = param(0.1, paper="FedLCC Eq. 13: mu", **CONTRASTIVE_WEIGHT)
        contrastive_temperature: float = param(0.5, paper="FedLCC Eq. 12: tau",
                                               **CONTRASTIVE_TEMPERATURE)

    representation_output = "context"

    def contrast(self, ctx):
        """L_LCC of Eq. 12 on the batch: :func:`lcc_loss` of the local,
        global and previous contexts over the valid pairs (the pair mask packed in ``y``,
        which :class:`~tffre.models.document_model.DocRELoss` hands over as ``ctx.row_mask()``)."""
        return lcc_loss(self._z(ctx.outputs), self._z(ctx.frozen["global"]),
                        self._z(ctx.frozen["previous"]), ctx.row_mask(),
                        self.hparams.contrastive_temperature)
