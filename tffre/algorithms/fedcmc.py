"""FedCMC: federated contrastive learning with major classifier vectors (FedCMC, section 3).

Under label skew a client's classifier vectors (the rows Θ^L_c of its
classifier, Eq. 2) carry its label distribution: the vector of a class the
client has many examples of is pushed away from the other classes' vectors
(Eq. 5), so it is the least similar to them. FedCMC picks, for every class,
the vector of the client that knows the class best and pulls every client's
representations towards those vectors. One round t:

    theta_k                   local training on L (Eq. 15), FedAvg's aggregation (Eq. 8-9)
    d_{k,c} = 1/(C-1) sum_{i != c} cos(Θ^L_{k,c}, Θ^L_{k,i})       local similarity (Eq. 10)
    Θ̂_c     = Θ^L_{k*,c},  k* = argmin_k d_{k,c}                  major vector (Eq. 12-13)
    L_con   = sum_i -log softmax(h_i · Θ̂^T)_{y_i}                 contrastive loss (Eq. 14)
    L       = L_ce(Θ^E, Θ^L) + mu L_con(Θ^E, Θ̂)                    (Eq. 15)

Definition 1 prints "Θ_{k,c} ⊙ Θ_{k,c}", a typo for Θ_{k,c} ⊙ Θ_{k,i} (the
sum runs over i != c). Eq. 16-17: L_con trains the encoder only; the local
classifier learns from L_ce alone (L_con reads the ``features`` output,
before the classifier, and Θ̂ is a constant under ``stop_gradient``).

How it maps onto the :class:`~tffre.definition.Definition` parts:

* **server extras**: ``vectors``, Θ̂ [C, D'], broadcast with the FedAvg'd
  model every round.
* **client objective**: L_ce + mu L_con (:func:`contrastive_loss`), with
  options ``temperature`` tau (logits h·Θ̂^T / tau; the paper has none, tau = 1)
  and ``con_reduction`` "mean" (default) or "sum" (Eq. 14 as printed) over the batch.
* **uploads**: after training, the C scores d_{k,c} (C float32). The class
  vectors themselves are *not* uploaded again: they are rows of the
  classifier kernel's delta, which the model upload already carries.
* **aggregation**: Eq. 12 as a mergeable argmin (:class:`MajorVectorSelection`):
  per class, the best score so far and that client's classifier-delta row.
  It reads the model upload (``reads_model_upload``), so the server never
  holds more than one candidate row per class and the round is still one
  ``federated_aggregate`` (it lowers to MapReduceForm).
* **server work**: Θ̂_c = Θ^L_{t,c} - selected delta row (Θ^L_t is the
  broadcast classifier, the delta theta_t - theta_k), so Θ̂_c = Θ^L_{k*,c}.
  A class no counted client supplied (all excluded) keeps its old Θ̂_c.

**Ties** (equal scores, e.g. identical clients): the smaller class vector
lexicographically wins (on the uploaded deltas theta_t - theta_k: the larger
delta row), then any (the vectors are then equal). That is a total order on
the candidates, so the result does not depend on the clients' order or on
how partial accumulators are merged. :func:`select_major_vectors` is the same
rule in numpy.

**Θ̂^0** (Algorithm 1, line 2: Θ̂^{L,0} = Θ^{L,0}) is the classifier of the
model ``model_fn`` builds, read in :meth:`FedCMC.initial_extras`. If weights
are set later with ``set_model_weights`` (the runner's pretrained encoder,
or any other weights), Θ̂^0 stays that built model's classifier: only the
model part of the state is replaced. For the relation models the classifier
is freshly initialised either way, so Θ̂^0 is a random-initialised
classifier's rows, as in the paper; from round 1 on Θ̂ comes from the
clients' trained classifiers.

**Ablations** (section 4.3) via ``vectors``: "major" (Eq. 12, argmin, the
default), "minor" (Eq. 18, argmax) and "random": random vectors drawn once
at initialisation, with a fixed seed (stateless, so identical on both
executors and on every ``initialize``), from the Glorot-uniform distribution
of a freshly initialised classifier of that shape, and never updated. The
paper does not say whether its random vectors are redrawn; fixed vectors
keep the contrastive target consistent across rounds, the closer
counterpart of the major vectors. With "random" no scores are uploaded.
"""

import collections
import dataclasses


from tffre import definition
from tffre.definition import Definition
from tffre.hparams import choice, non_negative_float, param, positive_float
from tffre.lazy import np, tf

VECTORS = ("major", "minor", "random")
REDUCTIONS = ("mean", "sum")
#: The stateless seed of the "random" ablation's vectors.
RANDOM_VECTORS_SEED = (2023, 12)


# --- the rule in numpy (reference and offline use) ---

def local_similarity(classifier):
    """Def. 1 (Eq. 10) in numpy: d_c = mean over i != c of cos(Θ_c, Θ_i).

    Args:
      classifier: (C, D) class vectors (the classifier's rows; a Keras
        ``Dense`` kernel transposed).

    Returns:
      (C,) float64. A zero vector has cosine 0 to everything; with C = 1 the
      mean over no other class is 0.
    """
    theta = np.asarray(classifier, np.float64)
    norms = np.linalg.norm(theta, axis=1, keepdims=True)
    unit = np.divide(theta, norms, out=np.zeros_like(theta), where=norms > 0)
    cos = unit @ unit.T
    num_classes = theta.shape[0]
    return (cos.sum(axis=1) - np.diag(cos)) / max(num_classes - 1, 1)


def select_major_vectors(client_classifiers, minor=False, weights=None):
    """Eq. 12 (or Eq. 18 with ``minor=True``) in numpy: per class, the vector of the client with
    the smallest (largest) local similarity d_{k,c}.

    Args:
      client_classifiers: list of K (C, D) arrays, the clients' trained class vectors.
      minor: pick the argmax instead (the "minor vectors" ablation).
      weights: optional K client weights; a client with weight 0 (excluded) is never chosen.

    Returns:
      ((C, D) array of the chosen vectors, (C,) int array of the chosen
      client per class; -1 and a zero vector where no client counts).
      Ties: the lexicographically smaller vector, then the smaller index
      (see the module docstring).
    """
    classifiers = [np.asarray(c) for c in client_classifiers]
    if weights is None:
        weights = [1.0] * len(classifiers)
    num_classes, dim = classifiers[0].shape if classifiers else (0, 0)
    scores = [local_similarity(c) for c in classifiers]
    vectors = np.zeros((num_classes, dim), classifiers[0].dtype if classifiers else np.float32)
    chosen = np.full(num_classes, -1, np.int64)
    for c in range(num_classes):
        candidates = [((-1.0 if minor else 1.0) * scores[k][c], tuple(classifiers[k][c]), k)
                      for k in range(len(classifiers)) if weights[k] > 0]
        if candidates:
            k = min(candidates)[2]
            vectors[c], chosen[c] = classifiers[k][c], k
    return vectors, chosen


# --- the rule in TensorFlow ---

def tf_local_similarity(classifier):
    """Def. 1 (Eq. 10) in TensorFlow: [C, D] class vectors -> [C] d_c (:func:`local_similarity`)."""
    unit = tf.math.l2_normalize(classifier, axis=1)   # a zero row stays zero: cosine 0
    cos = tf.matmul(unit, unit, transpose_b=True)
    num_classes = classifier.shape[0]
    return (tf.reduce_sum(cos, axis=1) - tf.linalg.diag_part(cos)) / float(
        max(num_classes - 1, 1))


def _lex_less(a, b):
    """[C] bool: row a[c] < row b[c] lexicographically ([C, D] tensors)."""
    differ = tf.not_equal(a, b)
    first = tf.argmax(tf.cast(differ, tf.int32), axis=1, output_type=tf.int32)
    a_first = tf.gather(a, first, axis=1, batch_dims=1)
    b_first = tf.gather(b, first, axis=1, batch_dims=1)
    return tf.logical_and(tf.reduce_any(differ, axis=1), a_first < b_first)


def contrastive_loss(features, labels, vectors, temperature=1.0, reduction="mean"):
    """Eq. 14: -log softmax(h_i · Θ̂^T / tau)_{y_i}, reduced over the batch.

    ``vectors`` (Θ̂, [C, D']) is a constant (``stop_gradient``): Eq. 16-17,
    the contrastive term trains the encoder only. ``reduction``: "mean" or
    "sum" (Eq. 14 as printed sums over the client's examples).
    """
    vectors = tf.stop_gradient(tf.cast(vectors, features.dtype))
    logits = tf.matmul(features, vectors, transpose_b=True) / temperature
    labels = tf.cast(tf.reshape(labels, [-1]), tf.int32)
    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return tf.reduce_sum(per_example) if reduction == "sum" else tf.reduce_mean(per_example)


class MajorVectorSelection:
    """Eq. 12 as a mergeable accumulator: per class, the best score so far and its class vector's
    delta row.

    The client uploads only its scores (``client``: C float32); ``accumulate``
    takes the class-vector deltas from the same client's model upload
    (``reads_model_upload``): ``model_upload["update"][kernel_index]`` is
    the classifier kernel's delta theta_t - theta_k, [D', C], whose
    transpose's rows are the class vectors' deltas. A client with weight 0
    (excluded) is skipped. The order is total (score, then the larger delta
    row lexicographically, i.e. the smaller class vector), so ``merge`` is
    commutative and associative and the report does not depend on the
    clients' order.

    Args:
      definition: the :class:`FedCMC` (its ``kernel_index``, set when the
        model is described).
      num_classes: C.
      dim: D'.
      minor: argmax (Eq. 18) instead of argmin.
    """

    reads_model_upload = True

    def __init__(self, definition, num_classes, dim, minor=False):
        self.definition = definition
        self.num_classes, self.dim = num_classes, dim
        # Keep the argmin of key = d (major) or -d (minor): one comparison for both.
        self.sign = -1.0 if minor else 1.0

    def client(self, value, weight):
        # The weight already travels in the model upload: only the C scores are sent.
        return value

    def zero(self):
        """No candidate: key +inf (every counted client's finite key beats it), a zero row."""
        return collections.OrderedDict(
            key=tf.fill([self.num_classes], tf.constant(np.inf, tf.float32)),
            row=tf.zeros([self.num_classes, self.dim], tf.float32))

    @staticmethod
    def _better(key_a, row_a, key_b, row_b):
        """[C] bool: candidate a strictly precedes b (smaller key; on a tie the larger delta row,
        i.e. the smaller class vector theta_t - delta)."""
        return tf.logical_or(key_a < key_b,
                             tf.logical_and(tf.equal(key_a, key_b), _lex_less(row_b, row_a)))

    def _pick(self, take_a, a, b):
        return collections.OrderedDict(key=tf.where(take_a, a["key"], b["key"]),
                                       row=tf.where(take_a[:, None], a["row"], b["row"]))

    def accumulate(self, acc, upload, model_upload):
        index = self.definition.kernel_index
        if index is None:
            raise ValueError("FedCMC: the classifier's position is unknown; initial_extras(model) "
                             "must run before the selection is built")
        rows = tf.transpose(tf.cast(model_upload["update"][index], tf.float32))
        candidate = collections.OrderedDict(
            key=self.sign * tf.cast(upload["scores"], tf.float32), row=rows)
        counted = tf.fill([self.num_classes], model_upload["weight"] > 0)
        take = tf.logical_and(counted, self._better(candidate["key"], candidate["row"],
                                                    acc["key"], acc["row"]))
        return self._pick(take, candidate, acc)

    def merge(self, a, b):
        return self._pick(self._better(a["key"], a["row"], b["key"], b["row"]), a, b)

    def report(self, acc):
        """The selected delta rows [C, D'] and which classes have one ([C] bool)."""
        return collections.OrderedDict(rows=acc["row"], found=acc["key"] < np.inf)


class FedCMC(Definition):
    """FedCMC (see the module docstring): FedAvg plus contrastive learning on major classifier
    vectors.

    The model must have a ``features`` output (h, Eq. 1) and a layer named
    ``"classifier"`` (a ``Dense`` on the features whose kernel [D', C] has
    the class vectors as columns), as :func:`tffre.models.relation_model.build_re_model`'s.

    Extras: ``vectors``, Θ̂ [C, D'].
    """

    @dataclasses.dataclass(frozen=True)
    class Hparams(definition.Hparams):
        contrastive_weight: float = param(
            1.0, non_negative_float, "weight mu of the contrastive term", aliases=("mu",),
            paper="FedCMC Eq. 15: mu")
        contrastive_temperature: float = param(
            1.0, positive_float, "temperature tau of the contrastive term (FedCMC: 1, the "
            "paper's plain dot product)", aliases=("temperature",), paper="FedCMC Eq. 14")
        con_reduction: str = param("mean", choice(*REDUCTIONS), "FedCMC: reduce L_con over the "
                                   "batch by mean or sum (Eq. 14 as printed)",
                                   paper="FedCMC Eq. 14")
        vectors: str = param("major", choice(*VECTORS), "FedCMC classifier vectors: major "
                             "(Eq. 12) or the ablations minor (Eq. 18) and random",
                             paper="FedCMC Eq. 12, Sect. 4.3")

    @classmethod
    def dp_refusal(cls, hparams):
        if hparams.vectors == "random":
            return None   # fixed random vectors: only the model delta leaves a client
        return ("its server picks, for each class, one client's classifier vector (the "
                "arg-min of the uploaded scores, Eq. 12): the release is a single client's "
                "vector, which noise on a sum does not cover")

    def __init__(self, hparams, context=None):
        super().__init__(hparams, context)
        #: The classifier kernel's index in ``model.trainable_variables`` (found by initial_extras).
        self.kernel_index = None
        self.num_classes = self.dim = None

    # --- the model's classifier ---

    def _locate(self, model):
        """Finds the classifier kernel among the trainable variables; checks the model's shape."""
        keras_model = model.keras_model
        try:
            layer = keras_model.get_layer("classifier")
        except ValueError:
            layer = None
        if layer is None or getattr(layer, "kernel", None) is None:
            raise ValueError("FedCMC needs a model with a Dense layer named 'classifier' (its "
                             "kernel's columns are the class vectors); this model has layers "
                             f"{[l.name for l in keras_model.layers]}")
        shapes = model.output_shapes()
        if "features" not in shapes:
            raise ValueError("FedCMC needs a model with a 'features' output (the representation "
                             f"h of Eq. 1); this model's outputs are {sorted(shapes)}")
        kernel = layer.kernel
        matches = [i for i, v in enumerate(model.trainable_variables) if v is kernel]
        if len(matches) != 1:
            raise ValueError("FedCMC: the 'classifier' layer's kernel is not a trainable "
                             "variable of the model")
        dim, num_classes = (int(d) for d in kernel.shape)
        if int(shapes["features"][-1]) != dim:
            raise ValueError(f"FedCMC: the 'features' output has {shapes['features'][-1]} "
                             f"dimensions but the classifier takes {dim}")
        self._check_features_before_classifier(keras_model, layer)
        self.kernel_index, self.num_classes, self.dim = matches[0], num_classes, dim
        return kernel

    @staticmethod
    def _check_features_before_classifier(keras_model, classifier):
        """Eq. 17: L_con must not reach the classifier, so ``features`` must not depend on it."""
        # Walk Keras's functional graph back from the features output (Keras internals: a
        # model whose graph cannot be walked so is not checked here; the gradient test is).
        try:
            seen, stack = set(), [keras_model.output["features"]]
            while stack:
                history = getattr(stack.pop(), "_keras_history", None)
                if history is None or id(history.layer) in seen:
                    continue
                seen.add(id(history.layer))
                if history.layer is classifier:
                    break
                node = history.layer._inbound_nodes[history.node_index]
                stack.extend(tf.nest.flatten(node.keras_inputs))
            else:
                return
        except (AttributeError, IndexError, KeyError, TypeError):
            return
        raise ValueError("FedCMC: the 'features' output depends on the 'classifier' layer, so "
                         "the contrastive loss would train the classifier (Eq. 17 says it "
                         "must not)")

    # --- part 2: server extras ---

    def initial_extras(self, model):
        """Θ̂^0: the built model's classifier rows (Algorithm 1, line 2), or the random vectors."""
        kernel = self._locate(model)
        if self.hparams.vectors == "random":
            # Glorot-uniform, as a fresh classifier of this shape, drawn once (stateless seed).
            limit = float(np.sqrt(6.0 / (self.num_classes + self.dim)))
            vectors = tf.random.stateless_uniform([self.num_classes, self.dim],
                                                  seed=RANDOM_VECTORS_SEED,
                                                  minval=-limit, maxval=limit)
        else:
            vectors = tf.transpose(tf.cast(kernel, tf.float32))
        return collections.OrderedDict(vectors=vectors)

    # --- part 3: client objective ---

    def objective(self, ctx):
        """Eq. 15: L_ce + mu L_con (Eq. 14 on the ``features`` output and the broadcast Θ̂)."""
        con = contrastive_loss(ctx.outputs["features"], ctx.y, ctx.extras["vectors"],
                               temperature=self.hparams.contrastive_temperature,
                               reduction=self.hparams.con_reduction)
        return ctx.model_loss() + self.hparams.contrastive_weight * con

    # --- part 4: uploads ---

    def client_upload(self, ctx):
        """Eq. 10 on the trained local classifier: the C scores d_{k,c} (none for "random")."""
        if self.hparams.vectors == "random":
            return collections.OrderedDict()
        if self.kernel_index is None:
            self._locate(ctx.model)
        kernel = ctx.model.trainable_variables[self.kernel_index]
        return collections.OrderedDict(
            scores=tf_local_similarity(tf.transpose(tf.cast(kernel, tf.float32))))

    def upload_aggregator(self, spec):
        """Eq. 12 (Eq. 18 for "minor") as a mergeable argmin over the clients."""
        num_classes = int(spec["scores"].shape[0])
        return MajorVectorSelection(self, num_classes, self.dim,
                                    minor=self.hparams.vectors == "minor")

    # --- part 5: server work ---

    def server_update(self, model_weights, extras, aggregate, previous_weights, objects=None):
        """Eq. 13: Θ̂_c = Θ^L_{t,c} - (Θ^L_t - Θ^L_{k*})_c = Θ^L_{k*,c}.

        A class no counted client supplied keeps its Θ̂_c.
        """
        if aggregate is None:   # "random": fixed vectors
            return model_weights, extras
        broadcast = tf.transpose(tf.cast(previous_weights.trainable[self.kernel_index],
                                         tf.float32))
        selected = broadcast - aggregate["rows"]
        vectors = tf.where(aggregate["found"][:, None], selected, extras["vectors"])
        return model_weights, collections.OrderedDict(vectors=vectors)
