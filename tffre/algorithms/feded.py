"""FedED (FedED section 3.3, Algorithm 1): clients upload only predictions; the server distils.

The server holds a labelled set D_v (the task context's ``server_data``). Each round:

1. **Clients** start from Θ_t, train E epochs with cross-entropy (Eq. 3; the
   default objective) and upload **only their class probabilities on D_v**,
   ``[|D_v|, C]`` (float32, or float16 with ``upload_precision="float16"``),
   with a scalar weight: 1, or 0 for a client whose predictions are not
   finite (it is excluded and counted in ``num_excluded_clients``).
   No weights leave a client (``uploads_model = False``).
2. **The server** averages them, z = (1/|J|) Σ_j p(y|s, Θ_j) (Eq. 5), softens
   them, q = softmax(z/τ) (Eq. 4), and takes one pass over D_v from Θ_t,
   minimising (1/|D_v|) Σ_i [−log p(y_i|s_i) + λ·KL(q_i ‖ p_i)] (Eq. 6; λ =
   ``kl_weight``, 1 in the paper), with a fresh optimizer of the row's kind
   and the row's learning rate (Algorithm 1 uses the same η). The result is
   Θ_{t+1}.

Choices the paper leaves open (hyperparameters):

* ``teacher_temperature`` τ (alias ``temperature``): the paper gives none. Eq. 4-5 apply the softmax to the
  *averaged probabilities*, which lie in [0, 1]: with τ = 1 the teacher is
  nearly uniform (its largest and smallest entries differ by at most a factor
  e). The default τ = 0.25 keeps it about as sharp as the averaged
  probabilities themselves (a confident 0.9 stays about 0.8 with nine classes).
* ``teacher``: "probabilities" (the default, Eq. 4-5 as printed) or "logits":
  clients upload log-probabilities, the server averages those and softens them
  (Hinton et al.'s softened ensemble logits; use τ of 1 to 4 with it). The
  upload has the same type either way.
* The server pass keeps D_v's order and the batch size of ``server_data``'s
  batches; a round in which no client counted leaves Θ unchanged.

**What the clients receive.** The clients need D_v's *inputs* to predict on
it (not its labels). They are a server extra, ``server_x``, that never
changes (``constant_extras``), so a client receives them once, with its first
broadcast, and ``bytes_broadcast`` counts them at its first round only, as a
deployment sends them. D_v must therefore be data the server may
share: public, or its own. The labels stay at the server (a constant of the
server computation). The predictions are still a channel about each client's
data (a model trained on few records can reveal them through its outputs),
so FedED lowers the traffic, not the need for care.

**Secure aggregation** (:mod:`tffre.deploy.secagg`). A site's contribution is its
predictions on D_v with weight 1 (:class:`TeacherMean`): probabilities in [0, 1] with the
default ``teacher="probabilities"``, well inside any range that holds the training sums
every contribution carries; the teacher mean z (Eq. 5), the predictions' sum over the
sites' count, both off by at most ``K W 2C / 2**22``, is off by at most ``2 W 2C / 2**22``
per entry. With ``teacher="logits"`` the sites send log-probabilities, which have no lower
bound: a value below ``-C W`` is refused at the site in one line that says so (raise
``secagg-max-weight``, or use the probabilities). :meth:`FedED.upload_ranges` declares both.
"""

import collections
import dataclasses


from tffre import definition
from tffre.definition import Definition, UploadRange, WeightedStructMean
from tffre.hparams import choice, non_negative_float, param, positive_float
from tffre.lazy import np, tf


TEACHERS = ("probabilities", "logits")
PRECISIONS = ("float32", "float16")


def teacher_distribution(mean_prediction, temperature):
    """q of Eq. 4 from the clients' averaged predictions z (Eq. 5): softmax(z / τ).

    z averages probabilities (``teacher="probabilities"``, the paper's literal
    form) or log-probabilities ("logits"): the clients' uploads decide which.
    """
    return tf.nn.softmax(tf.cast(mean_prediction, tf.float32) / temperature, axis=-1)


def distillation_loss(y, logits, q, kl_weight=1.0):
    """Eq. 6 on a batch: mean_i [−log p(y_i|s_i) + kl_weight · KL(q_i ‖ p_i)], p = softmax(logits)."""
    log_p = tf.nn.log_softmax(logits, axis=-1)
    y = tf.cast(tf.reshape(y, [-1]), tf.int32)
    ce = -tf.gather(log_p, y, axis=1, batch_dims=1)
    q = tf.cast(q, log_p.dtype)
    # 0 · log 0 = 0: entries where q is 0 add nothing.
    kl = tf.reduce_sum(tf.math.multiply_no_nan(tf.math.log(q) - log_p, q), axis=-1)
    return tf.reduce_mean(ce + kl_weight * kl)


class TeacherMean(WeightedStructMean):
    """Eq. 5's unweighted mean over the counted clients, and how many counted.

    A client uploads {value: its predictions, weight: 1} (0 when excluded).
    The report is {mean: z, clients: the number of clients averaged}.
    """

    def client(self, value, weight):
        return super().client(value, tf.cast(weight > 0, tf.float32))

    def report(self, acc):
        return collections.OrderedDict(mean=super().report(acc), clients=acc["weight"])


class PrivateTeacherMean:
    """Eq. 5's mean under client-level DP: the clients' prediction matrices clipped and summed,
    noised and divided by the expected clients per round (a :class:`DPStructMean`), reported as
    :class:`TeacherMean` reports, {mean, clients}."""

    additive = True   # DP's noised sum (secure aggregation may sum it)

    def __init__(self, dp):
        self.dp = dp
        # The protocol's other parts are DP's own.
        self.initial_state, self.client_params, self.client = \
            dp.initial_state, dp.client_params, dp.client
        self.zero, self.accumulate, self.merge, self.report = \
            dp.zero, dp.accumulate, dp.merge, dp.report

    def finalize(self, state, reported):
        mean, new_state, metrics = self.dp.finalize(state, reported)
        return collections.OrderedDict(mean=mean, clients=metrics["dp_clients"]), new_state, \
            metrics


def log_probabilities(model, outputs):
    """log p(y|s) from a ClientModel's outputs: log-softmax of logits, or the log of a
    probability output (a model whose loss has ``from_logits=False``)."""
    main = tf.cast(model.main_output(outputs), tf.float32)
    from_logits = getattr(model.loss_fn, "get_config", dict)().get("from_logits", True)
    if from_logits:
        return tf.nn.log_softmax(main, axis=-1)
    return tf.math.log(tf.clip_by_value(main, 1e-7, 1.0))


def _server_arrays(server_data):
    """(x, y) numpy arrays of a dataset of (x, y) batches, an (x, y) pair, and its batch size.
    ``x`` may be a dict of arrays (a split encoder's {"hidden", "inputs"})."""
    if server_data is None:
        raise ValueError("FedED needs server_data: the server's labelled set D_v, a "
                         "tf.data.Dataset of (x, y) batches (the command line: "
                         "--server-fraction or --server-data)")
    if isinstance(server_data, tf.data.Dataset):
        xs, ys = [], []
        for batch in server_data:
            x, y = (batch["x"], batch["y"]) if isinstance(batch, dict) else batch
            xs.append(tf.nest.map_structure(np.asarray, x))
            ys.append(np.asarray(y))
        if not xs:
            raise ValueError("FedED: server_data is empty")
        return (tf.nest.map_structure(lambda *parts: np.concatenate(parts), *xs),
                np.concatenate(ys).reshape(-1), len(ys[0]))
    x, y = server_data
    return tf.nest.map_structure(np.asarray, x), np.asarray(y).reshape(-1), 32


class FedED(Definition):
    """FedED's parts: no model upload, predictions on D_v up, distillation at the server.

    Needs the task context's ``server_data`` (D_v).
    """

    @dataclasses.dataclass(frozen=True)
    class Hparams(definition.Hparams):
        teacher_temperature: float = param(
            0.25, positive_float, "FedED: the teacher's temperature tau (the paper gives none; "
            "see tffre.algorithms.feded)", aliases=("temperature",), paper="FedED Eq. 4")
        kl_weight: float = param(1.0, non_negative_float, "FedED: weight of KL(q || p) in the "
                                 "server's loss", paper="FedED Eq. 6")
        teacher: str = param("probabilities", choice(*TEACHERS), "FedED: average the clients' "
                             "probabilities (Eq. 4-5 as printed) or their log-probabilities",
                             paper="FedED Eq. 4-5")
        upload_precision: str = param("float32", choice(*PRECISIONS), "FedED: the predictions' "
                                      "upload type")

    uploads_model = False
    needs_server_data = True
    constant_extras = ("server_x",)   # D_v's inputs: server_update returns them unchanged

    @classmethod
    def dp_refusal(cls, hparams):
        return None   # the predictions on D_v are clipped and noised (upload_aggregator)

    @classmethod
    def upload_ranges(cls, hparams):
        """Probabilities lie in [0, 1]; log-probabilities have no lower bound (a confident
        model's log-probability of another class can be -50)."""
        if hparams.teacher == "logits":
            return (UploadRange("extra", None, 0.0, values="FedED's teacher=logits uploads "
                                "log-probabilities", instead="use teacher=probabilities (in "
                                "[0, 1]) with secure aggregation"),)
        return (UploadRange("extra", 0.0, 1.0, values="FedED's probabilities"),)

    def __init__(self, hparams, context=None):
        super().__init__(hparams, context)
        self.server_x, self.server_y, self.server_batch_size = _server_arrays(
            self.context.server_data)
        inputs = len(tf.nest.flatten(self.server_x)[0])
        if inputs != len(self.server_y) or not len(self.server_y):
            raise ValueError(f"FedED: server_data has {inputs} inputs and "
                             f"{len(self.server_y)} labels")

    # --- part 2: server extras: D_v's inputs, broadcast so that clients can predict on them ---

    def initial_extras(self, model):
        return collections.OrderedDict(server_x=self.server_x)

    # --- part 4: the upload: predictions on D_v only ---

    def predict(self, model, x):
        """[|D_v|, C] probabilities (log-probabilities for the "logits" teacher), in chunks.
        ``x``: a tensor, or a structure of tensors (a split encoder's inputs)."""
        n = int(tf.nest.flatten(x)[0].shape[0])
        chunk = min(self.server_batch_size, n)
        pad = (-n) % chunk

        def chunked(t):
            rest = t.shape[1:].as_list()
            padded = tf.concat([t, tf.zeros([pad] + rest, t.dtype)], 0) if pad else t
            return tf.reshape(padded, [-1, chunk] + rest)
        chunks = tf.nest.map_structure(chunked, x)
        log_p = tf.map_fn(
            lambda c: log_probabilities(model, model.outputs(c, training=False)),
            chunks, fn_output_signature=tf.float32)
        log_p = tf.reshape(log_p, [n + pad, -1])[:n]
        out = log_p if self.hparams.teacher == "logits" else tf.exp(log_p)
        return tf.cast(out, self.hparams.upload_precision)

    def client_upload(self, ctx):
        return self.predict(ctx.model, ctx.extras["server_x"])

    def upload_aggregator(self, spec):
        if getattr(self.hparams, "dp_on", False):
            from tffre.privacy.aggregator import DPStructMean
            return PrivateTeacherMean(DPStructMean(spec, **self.dp_settings()))
        return TeacherMean(spec)

    # --- part 5: the server distils the ensemble into Θ_t ---

    def server_objects(self, make_model, make_optimizer):
        import optimizers   # imports TensorFlow: not at module import (see tffre.lazy)
        model = make_model()
        optimizer = make_optimizer()
        optimizer.build(model.trainable_variables)
        return collections.OrderedDict(model=model, optimizer=optimizer,
                                       carried=optimizers.training_state(optimizer))

    def server_update(self, model_weights, extras, aggregate, previous_weights, objects=None):
        model, optimizer = objects["model"], objects["optimizer"]
        q = teacher_distribution(aggregate["mean"], self.hparams.teacher_temperature)

        @tf.function
        def distil():
            tf.nest.map_structure(lambda v, t: v.assign(t), model.weights(), model_weights)
            for var in objects["carried"]:   # a fresh optimizer each round
                var.assign(tf.zeros_like(var))
            data = tf.data.Dataset.from_tensor_slices(
                (extras["server_x"], tf.constant(self.server_y), q)).batch(
                    self.server_batch_size)

            def step(n, batch):
                x, y, q_batch = batch
                trainable = model.trainable_variables
                with tf.GradientTape() as tape:
                    log_p = log_probabilities(model, model.outputs(x, training=True))
                    loss = distillation_loss(y, log_p, q_batch, self.hparams.kl_weight)
                optimizer.apply_gradients(zip(tape.gradient(loss, trainable), trainable))
                return n + 1
            steps = data.reduce(tf.constant(0), step)
            with tf.control_dependencies([steps]):
                return tf.nest.map_structure(tf.identity, model.weights())
        distilled = distil()
        counted = aggregate["clients"] > 0   # no teacher this round: keep Θ_t
        weights = tf.nest.map_structure(lambda new, old: tf.where(counted, new, old),
                                        distilled, model_weights)
        return weights, extras
