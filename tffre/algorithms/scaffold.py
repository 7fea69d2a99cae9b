"""SCAFFOLD: stochastic controlled averaging (Karimireddy et al., ICML 2020), option II of
Algorithm 1.

Client drift is corrected with control variates: the server keeps c (a server extra,
broadcast with the model x), each client i keeps its own c_i (per-client state), both zeros
at first, and N is the population (the task context's ``num_clients``). A round of
Algorithm 1, with its line numbers:

    5   the server sends (x, c) to the sampled clients S
    7   y_i ← x
    10  K times: y_i ← y_i − η_l (g_i(y_i) − c_i + c)
    12  c_i⁺ ← c_i − c + (x − y_i) / (K η_l)                         (option II)
    13  the client uploads (Δy_i, Δc_i) = (y_i − x, c_i⁺ − c_i)
    14  c_i ← c_i⁺
    16  (Δx, Δc) ← (1/|S|) Σ_{i∈S} (Δy_i, Δc_i)
    17  x ← x + η_g Δx,  c ← c + (|S|/N) Δc = c + (1/N) Σ_{i∈S} Δc_i

How the lines map onto a :class:`~tffre.definition.Definition`:

* **Line 10** is plain SGD (the row's ``sgd`` client optimizer) on the objective
  f_i(y) + ⟨c − c_i, y⟩, whose gradient is g_i(y) + c − c_i.
* **Line 12.** K is the number of local steps the client took: the batches of its round,
  ``num_epochs`` passes capped at ``num_iters`` steps (what ``ClientTrainer.local_data``
  feeds the loop), counted from the client's dataset, so a client with less data than the
  cap counts its own, smaller K. η_l is the round's local learning rate, ``learning_rate``
  times ``lr_decay`` to the round (the server then keeps the round in the extras, as it
  broadcasts its own to the client's optimizer). Option II's (x − y_i)/(K η_l) is the mean
  corrected gradient of the K steps for plain SGD; with ``--local-optimizer``, ``clip_norm``
  or momentum it is the formula as the paper writes it, no longer that mean.
* **Line 13.** Δy_i is the model delta (tffre uploads x − y_i, TFF's sign), Δc_i an extra
  upload, summed (:class:`~tffre.definition.StructSum`) with a 1 per counted client. An
  excluded client (NaN or Inf) uploads zeros and keeps its c_i.
* **Lines 16-17.** Δx is the row's mean of the deltas, uniform over S as line 16 says
  (``client_weighting`` defaults to uniform here; ``dataset_size`` weighs it by n_k instead,
  which Algorithm 1 does not). η_g is the server step: ``--server-learning-rate`` with the
  default ``sgd`` server optimizer (1: x becomes the clients' mean). The server divides
  Σ Δc_i by N; without a population in the context, by the counted clients (so c then
  follows full participation's c ← c + Δc).

**Which parameters.** Control variates are kept for every trainable weight (all of them are
shared: SCAFFOLD has no personal weights) and for nothing else: non-trainable weights (a
frozen embedding, the frozen lower layers of ``--trainable-layers``, BatchNorm's moving
statistics, which are averaged as for every row) take no gradient step to correct. Each
client's state and the server's c are each the size of the trainable model, and a client
uploads twice what FedAvg's does (the paper's "doubles the communication").

**Hyperparameters.** No new ones: η_l is ``learning_rate`` (and ``lr_decay``), K follows
``num_epochs`` and ``num_iters``, η_g is ``server_learning_rate``; ``client_weighting``
defaults to uniform.

**Client-level DP: refused** (:meth:`SCAFFOLD.dp_refusal`). DP-FedAvg clips and noises the
model delta only; Δc_i, a mean of the client's gradients, travels beside it unclipped and
without noise, and c, broadcast to every client, carries it on. It would need the
control-variate upload clipped and noised too (one clip over (Δy_i, Δc_i)).

**SecAgg+: possible.** Both uploads are sums: the deltas' mean (a weighted sum) and Σ Δc_i
(:class:`~tffre.definition.StructSum`), so ``deploy run --secagg`` accepts the round
(:func:`tffre.federation.split_round.sum_refusal`). As for the model delta, no bound on
Δc_i is known in advance: a value beyond ``--secagg-clip`` (times the maximum weight) is
refused in one line, never clipped.

**Per-client state** has no MapReduceForm (the documented exception): on TFF's executor the
process keeps c_i per client id, and in deployment it never leaves the site.
"""

import collections
import dataclasses

from tffre import definition
from tffre.definition import Definition, StructSum, finite_or_previous
from tffre.hparams import redefault
from tffre.lazy import tf


class SCAFFOLD(Definition):
    """SCAFFOLD's control variates (option II): the corrected objective, c_i as client state,
    c as a server extra (module docstring)."""

    @dataclasses.dataclass(frozen=True)
    class Hparams(definition.Hparams):
        # Algorithm 1, line 16: the mean over S is uniform.
        client_weighting: str = redefault(definition.Hparams, "client_weighting", "uniform")

    @classmethod
    def dp_refusal(cls, hparams):
        return ("SCAFFOLD uploads its control-variate update Δc_i = c_i⁺ − c_i (Algorithm 1, "
                "line 13) beside the model delta; DP's clip bounds only the delta, and Δc_i is "
                "neither clipped nor noised")

    def __init__(self, hparams, context=None):
        super().__init__(hparams, context)
        if self.context.num_clients is not None and self.context.num_clients < 1:
            raise ValueError(f"SCAFFOLD: num_clients must be >= 1, got "
                             f"{self.context.num_clients}")
        if hparams.learning_rate == 0:
            raise ValueError("SCAFFOLD: learning_rate must be > 0 (option II divides by K·η_l)")

    @property
    def _decays(self):
        return float(self.hparams.lr_decay) != 1.0

    # --- parts 2 and 6: c at the server, c_i at each client, zeros at first ---

    def initial_extras(self, model):
        extras = collections.OrderedDict(c=[tf.zeros_like(v) for v in model.trainable_variables])
        if self._decays:   # the round, for line 12's η_l (the Round keeps its own for the client)
            extras["round"] = tf.constant(0, tf.int32)
        return extras

    def initial_client_state(self, model):
        return collections.OrderedDict(c=[tf.zeros_like(v) for v in model.trainable_variables])

    # --- part 3: line 10 as SGD on f_i(y) + <c - c_i, y> ---

    def objective(self, ctx):
        y = list(ctx.model.trainable_variables)
        correction = tf.add_n([tf.reduce_sum((c - c_i) * w) for c, c_i, w in
                               zip(ctx.extras["c"], ctx.client_state["c"], y)])
        return ctx.model_loss() + correction

    # --- line 12: c_i+ ---

    def local_steps(self, dataset):
        """K: the local steps of a client's round on ``dataset`` (int64), the batches of
        ``num_epochs`` passes capped at ``num_iters`` (``ClientTrainer.local_data``, which the
        client loop iterates). Read off the pipeline's cardinality when it is known, else
        counted by one pass over those batches."""
        hp = self.hparams
        data = dataset.repeat(hp.num_epochs)
        if hp.num_iters is not None:
            data = data.take(hp.num_iters)
        known = tf.data.experimental.cardinality(data)
        return tf.cond(known >= 0, lambda: known,
                       lambda: data.reduce(tf.constant(0, tf.int64), lambda k, _: k + 1))

    def local_learning_rate(self, extras):
        """η_l of the round (float32): ``learning_rate`` times ``lr_decay`` to the round, as
        the client's optimizer has it (``ClientTrainer.learning_rate_at``)."""
        hp = self.hparams
        rate = tf.constant(hp.learning_rate, tf.float32)
        if not self._decays:
            return rate
        return rate * tf.pow(tf.constant(float(hp.lr_decay), tf.float32),
                             tf.cast(extras["round"], tf.float32))

    def _next_control(self, ctx):
        """c_i⁺ (line 12, option II), computed once per client round: the upload and the next
        state are given the same context, so the second call reuses the first's tensors."""
        cached = ctx.__dict__.get("_scaffold_next")
        if cached is not None:
            return cached
        k = tf.cast(self.local_steps(ctx.dataset), tf.float32)
        scale = tf.math.divide_no_nan(1.0, k * self.local_learning_rate(ctx.extras))
        trained = list(ctx.model.trainable_variables)
        c_plus = [c_i - c + (x - y) * scale for c_i, c, x, y in
                  zip(ctx.client_state["c"], ctx.extras["c"], ctx.initial_weights, trained)]
        # No step taken (K = 0): nothing measured, c_i stays.
        c_plus = [tf.where(k > 0, new, old) for new, old in zip(c_plus, ctx.client_state["c"])]
        ctx.__dict__["_scaffold_next"] = c_plus
        return c_plus

    # --- part 4, line 13: Δc_i, summed, and a 1 per counted client ---

    def client_upload(self, ctx):
        c_plus = self._next_control(ctx)
        return collections.OrderedDict(
            delta_c=[new - old for new, old in zip(c_plus, ctx.client_state["c"])],
            counted=tf.constant(1.0))

    def upload_aggregator(self, spec):
        return StructSum(spec)

    # --- part 6, line 14: c_i <- c_i+ (a diverged client keeps its old c_i) ---

    def next_client_state(self, ctx):
        return finite_or_previous(collections.OrderedDict(c=self._next_control(ctx)),
                                  ctx.client_state)

    # --- part 5, line 17: c <- c + (1/N) Σ Δc_i (x <- x + η_g Δx is the row's server step) ---

    def server_update(self, model_weights, extras, aggregate, previous_weights, objects=None):
        counted = aggregate["counted"]
        n = tf.constant(float(self.context.num_clients), tf.float32) \
            if self.context.num_clients else counted
        # A round in which no client counted sums zeros: c stays.
        new = collections.OrderedDict(
            c=[c + tf.math.divide_no_nan(total, n)
               for c, total in zip(extras["c"], aggregate["delta_c"])])
        if self._decays:
            new["round"] = extras["round"] + 1
        return model_weights, new
