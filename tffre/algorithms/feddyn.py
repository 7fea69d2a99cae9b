"""FedDyn: federated learning with dynamic regularization (Acar et al., ICLR 2021), a FedCB
Table 2 baseline.

Each client keeps a linear term g_k, the gradient of its loss at its last
local model (per-client state, zeros before its first round). In round t,
from the broadcast θ^{t−1}, client k minimises (FedDyn Algorithm 1)

    L_k(θ) − ⟨g_k, θ⟩ + (α/2)·‖θ − θ^{t−1}‖²

and then updates g_k ← g_k − α·(θ_k^t − θ^{t−1}) (the first-order condition
of that minimum). The server keeps h (a server extra, zeros at first):

    h^t = h^{t−1} − α·(1/m)·Σ_{k∈P_t} (θ_k^t − θ^{t−1})
    θ^t = (1/|P_t|)·Σ_{k∈P_t} θ_k^t − h^t / α

with m the number of clients (the task context's ``num_clients``: the runner passes the run's)
and P_t the round's counted clients (each uploads a 1 besides its delta; an
excluded client uploads 0 and keeps its g_k). The mean over P_t is the row's
model mean with ``client_weighting="uniform"``, FedDyn's. α = ``dyn_alpha``,
0.01 as FedCB runs it.
"""

import collections
import dataclasses

from tffre import definition
from tffre.definition import Definition, StructSum, finite_or_previous
from tffre.hparams import param, positive_float, redefault
from tffre.lazy import tf


class FedDyn(Definition):
    """FedDyn's objective, per-client linear term and server correction (module docstring)."""

    @dataclasses.dataclass(frozen=True)
    class Hparams(definition.Hparams):
        dyn_alpha: float = param(0.01, positive_float, "FedDyn: the dynamic regulariser's "
                                 "alpha (FedCB runs it at 0.01)", paper="FedDyn Algorithm 1")
        # FedDyn averages the counted clients uniformly (the mean over P_t).
        client_weighting: str = redefault(definition.Hparams, "client_weighting", "uniform")

    @classmethod
    def dp_refusal(cls, hparams):
        # Its extra upload is a constant 1 per counted client: the count, not the data.
        return None

    def __init__(self, hparams, context=None):
        super().__init__(hparams, context)
        if self.context.num_clients is not None and self.context.num_clients < 1:
            raise ValueError(f"FedDyn: num_clients must be >= 1, got "
                             f"{self.context.num_clients}")

    # --- part 6: the client's linear term g_k ---

    def initial_client_state(self, model):
        return collections.OrderedDict(
            grad=[tf.zeros_like(v) for v in model.trainable_variables])

    def next_client_state(self, ctx):
        alpha = self.hparams.dyn_alpha
        trained = list(ctx.model.trainable_variables)
        # A diverged client (excluded from the mean) keeps its old term.
        return finite_or_previous(collections.OrderedDict(
            grad=[g - alpha * (w - w0) for g, w, w0 in
                  zip(ctx.client_state["grad"], trained, ctx.initial_weights)]),
            ctx.client_state)

    # --- part 3: the dynamic regulariser ---

    def objective(self, ctx):
        alpha = self.hparams.dyn_alpha
        theta = list(ctx.model.trainable_variables)
        linear = tf.add_n([tf.reduce_sum(g * w) for g, w in zip(ctx.client_state["grad"], theta)])
        prox = tf.add_n([tf.reduce_sum(tf.square(w - w0))
                         for w, w0 in zip(theta, ctx.initial_weights)])
        return ctx.model_loss() - linear + 0.5 * alpha * prox

    # --- part 4: a 1 per counted client, to know |P_t| ---

    def client_upload(self, ctx):
        return collections.OrderedDict(counted=tf.constant(1.0))

    def upload_aggregator(self, spec):
        return StructSum(spec)

    # --- parts 2 and 5: the server's h and the corrected model ---

    def initial_extras(self, model):
        return collections.OrderedDict(h=[tf.zeros_like(v) for v in model.trainable_variables])

    def server_update(self, model_weights, extras, aggregate, previous_weights, objects=None):
        alpha = self.hparams.dyn_alpha
        counted = aggregate["counted"]
        m = float(self.context.num_clients) if self.context.num_clients else counted
        mean = list(model_weights.trainable)          # (1/|P_t|) Σ θ_k (uniform weighting)
        share = tf.math.divide_no_nan(counted, tf.cast(m, tf.float32))
        h = [h_old - alpha * share * (w - w0)
             for h_old, w, w0 in zip(extras["h"], mean, previous_weights.trainable)]
        theta = [w - hi / alpha for w, hi in zip(mean, h)]
        # A round in which no client counted changes nothing.
        keep = counted > 0
        theta = [tf.where(keep, t, w0) for t, w0 in zip(theta, previous_weights.trainable)]
        h = [tf.where(keep, new, old) for new, old in zip(h, extras["h"])]
        return (type(model_weights)(trainable=theta, non_trainable=model_weights.non_trainable),
                collections.OrderedDict(h=h))
