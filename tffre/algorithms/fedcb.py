"""FedCB (Zhu et al., "Federated classifier debiasing with language models"): a frozen classifier.

Built once, at the server, before round 1 (FedCB section 2):

1. K class concepts (names or descriptions) are put into M prompt templates
   (:data:`IMAGE_TEMPLATES`, :data:`TEXT_TEMPLATES`) and embedded with a frozen
   text encoder, mean-pooled over the word pieces (:func:`embed_prompts`). The
   paper used BiomedCLIP's text tower, which is not available offline; any
   local Hugging Face encoder folder works, all-MiniLM-L6-v2 by default.
2. Each embedding is L2-normalised; class k's M embeddings give the mean μ_k
   and the unbiased variance Σ_k (Eq. 2) (:func:`class_distributions`). Eq. 2
   writes a full covariance; the authors' code (FedBM) keeps its diagonal
   σ²_k, which is our default (``covariance="diagonal"``; "full" is the option).
3. The local model maps an input to h: feature extractor → a linear projection
   to the text dimension → L2 normalisation. The classifier is
   F(h, k) = h·μ_k + ½·τ·hᵀΣ_k h (Eq. 5), frozen (:class:`GaussianClassifier`,
   non-trainable weights: no gradient, never uploaded). The model's logits are
   τ·F(h, k) (:func:`fedcb_logits`): E[exp(τ hᵀe)] for e ~ N(μ_k, Σ_k) is
   exp(τ hᵀμ_k + ½ τ² hᵀΣ_k h).
4. The loss is the upper bound of Eq. 4 as the authors compute it:
   cross-entropy over τ·F plus ½·τ²·hᵀΣ_y h (:meth:`FedCB.objective`).
   Only the extractor and the projection train; the server FedAvgs them,
   weighted by sample counts (the registry row's mean).

τ is a hyperparameter (``temperature``): the paper gives none; the authors'
README uses 17.5 for OCT-C8 and 12.5 for Kvasir-v2. ``use_variance=False``
is the "embedding average" ablation (Table 5): μ_k only.
"""

import numpy as np
import tensorflow as tf

from tffre.definition import Definition

COVARIANCES = ("diagonal", "full")

# M = 20 prompt templates for images (FedCB: "This is an image of {}.", "The image shows {}.",
# and the like) and 20 for relation / class descriptions in text.
IMAGE_TEMPLATES = (
    "This is an image of {}.", "The image shows {}.", "A medical image of {}.",
    "A photo of {}.", "An example of {}.", "This scan shows {}.", "A clinical image showing {}.",
    "There is {} in this image.", "The picture presents {}.", "A diagnostic image of {}.",
    "An image that shows signs of {}.", "This is a scan of {}.", "A close-up image of {}.",
    "The findings in this image are consistent with {}.", "A typical image of {}.",
    "This examination image shows {}.", "An image labelled as {}.",
    "A high-resolution image of {}.", "The image is an example of {}.",
    "A medical scan with {}.")
TEXT_TEMPLATES = (
    "This sentence describes {}.", "The text states {}.", "The relation is {}.",
    "In this sentence, {}.", "The two entities are related as follows: {}.",
    "This is an example of {}.", "The clinical note says {}.", "The sentence expresses {}.",
    "Here, {}.", "The report indicates {}.", "This text is about {}.",
    "The statement means {}.", "A sentence in which {}.", "The passage shows {}.",
    "The medical text describes {}.", "According to the note, {}.",
    "This is a case where {}.", "The relation between the entities: {}.",
    "The sentence tells us {}.", "The record shows {}.")


def contextualize(concepts, templates):
    """The K x M prompts: each concept put into each template."""
    return [[t.format(c) for t in templates] for c in concepts]


def embed_prompts(concepts, templates, encoder_dir=None, batch_size=64):
    """float32 [K, M, D]: the frozen text encoder's mean-pooled embeddings of the prompts.

    Mean pooling over the attention mask (the sentence-transformers pooling of
    all-MiniLM-L6-v2). Raw: :func:`class_distributions` normalises them.
    """
    from transformers import AutoTokenizer
    from tffre.models.relations import load_tf_encoder
    from tffre.text.relation_tokenizer import default_encoder_dir

    if not concepts or not templates:
        raise ValueError("FedCB needs at least one class concept and one prompt template")
    folder = encoder_dir or default_encoder_dir()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, use_fast=True)
    encoder = load_tf_encoder(folder)
    prompts = [p for row in contextualize(concepts, templates) for p in row]
    out = []
    for i in range(0, len(prompts), batch_size):
        batch = tokenizer(prompts[i:i + batch_size], padding=True, truncation=True,
                          return_tensors="np")
        hidden = encoder(input_ids=batch["input_ids"],
                         attention_mask=batch["attention_mask"]).last_hidden_state.numpy()
        mask = batch["attention_mask"][..., None].astype(np.float32)
        out.append((hidden * mask).sum(1) / np.maximum(mask.sum(1), 1.0))
    return np.concatenate(out).reshape(len(concepts), len(templates), -1).astype(np.float32)


def class_distributions(embeddings, covariance="diagonal"):
    """(μ [K, D], Σ) of Eq. 2 from raw prompt embeddings [K, M, D].

    Each embedding is L2-normalised first. Σ is the unbiased (M − 1) variance:
    [K, D] (its diagonal, the default, as the authors' code) or [K, D, D]
    (``covariance="full"``, Eq. 2 as written). M = 1 gives Σ = 0.
    """
    if covariance not in COVARIANCES:
        raise ValueError(f"covariance must be one of {', '.join(COVARIANCES)}, "
                         f"got {covariance!r}")
    e = np.asarray(embeddings, np.float64)
    if e.ndim != 3 or 0 in e.shape:
        raise ValueError(f"expected embeddings of shape [K, M, D], got {e.shape}")
    e = e / np.maximum(np.linalg.norm(e, axis=-1, keepdims=True), 1e-12)
    mu = e.mean(axis=1)
    m = e.shape[1]
    centred = e - mu[:, None]
    if covariance == "diagonal":
        var = (centred ** 2).sum(1) / max(m - 1, 1)
    else:
        var = np.einsum("kmd,kme->kde", centred, centred) / max(m - 1, 1)
    return mu.astype(np.float32), var.astype(np.float32)


def _quadratic(h, var):
    """hᵀΣ_k h for every k: [b, K]; ``var`` [K, D] (diagonal) or [K, D, D]."""
    if len(var.shape) == 2:
        return tf.matmul(tf.square(h), var, transpose_b=True)
    return tf.einsum("bd,kde,be->bk", h, var, h)


def fedcb_logits(h, mu, var, tau):
    """τ·F(h, k) = τ·(h·μ_k + ½·τ·hᵀΣ_k h) (Eq. 5) for a batch of normalised h: [b, K]."""
    h = tf.convert_to_tensor(h, tf.float32)
    mu = tf.convert_to_tensor(mu, tf.float32)
    var = tf.convert_to_tensor(var, tf.float32)
    return tau * (tf.matmul(h, mu, transpose_b=True) + 0.5 * tau * _quadratic(h, var))


def simplex_etf(num_classes, dim, seed=0):
    """[K, D] class vectors of a simplex equiangular tight frame (FedETF's frozen classifier).

    W = sqrt(K / (K - 1)) · U (I − 11ᵀ/K), U a seeded random D x K matrix with orthonormal
    columns (D ≥ K): unit vectors whose pairwise inner products are all −1/(K − 1). As a
    :class:`GaussianClassifier` with Σ = 0 it is the orthogonal-initialisation baseline of
    FedCB Table 2.
    """
    if dim < num_classes:
        raise ValueError(f"a simplex ETF of {num_classes} classes needs dim >= {num_classes}, "
                         f"got {dim}")
    u, _ = np.linalg.qr(np.random.RandomState(seed).randn(dim, num_classes))
    k = num_classes
    w = np.sqrt(k / (k - 1)) * u @ (np.eye(k) - np.ones((k, k)) / k)
    return w.T.astype(np.float32)


@tf.keras.utils.register_keras_serializable(package="tffre")
class GaussianClassifier(tf.keras.layers.Layer):
    """The frozen FedCB classifier: logits τ·F(h, k) from fixed μ and Σ (non-trainable).

    Built from the arrays (``mu`` [K, D], ``var`` [K, D] or [K, D, D]); they are
    weights of the layer, not trainable, so they get no gradient and are never
    in a client's upload. ``use_variance=False``: the embedding-average ablation.
    """

    def __init__(self, mu, var, tau, use_variance=True, **kwargs):
        super().__init__(**kwargs)
        self.trainable = False
        self._mu_init = np.asarray(mu, np.float32)
        self._var_init = np.asarray(var, np.float32)
        self.tau = float(tau)
        self.use_variance = bool(use_variance)

    def build(self, input_shape):
        self.mu = self.add_weight("mu", shape=self._mu_init.shape, trainable=False,
                                  initializer=tf.constant_initializer(self._mu_init))
        self.var = self.add_weight("var", shape=self._var_init.shape, trainable=False,
                                   initializer=tf.constant_initializer(self._var_init))
        super().build(input_shape)

    def effective_var(self):
        """Σ as the classifier uses it (zeros in the embedding-average ablation)."""
        return self.var if self.use_variance else tf.zeros_like(self.var)

    def call(self, h):
        return fedcb_logits(h, self.mu, self.effective_var(), self.tau)

    def get_config(self):
        return {**super().get_config(), "mu": self._mu_init.tolist(),
                "var": self._var_init.tolist(), "tau": self.tau,
                "use_variance": self.use_variance}


def frozen_classifier_model(inputs, features, mu, var, tau, use_variance=True, name="fedcb"):
    """A model from ``inputs``: ``features`` → Dense(D) projection → L2 normalisation (h) →
    the frozen :class:`GaussianClassifier`; outputs ``{"features": h, "logits": τ·F(h, ·)}``.

    ``features`` is a Keras tensor computed from ``inputs`` (the task model's
    ``features`` output): the new model shares the task model's layers up to
    it, flat (so e.g. its "encoder" layer keeps its name for pretrained
    weights), and drops the task model's own classifier.
    """
    dim = int(np.asarray(mu).shape[-1])
    projected = tf.keras.layers.Dense(dim, name="projection")(features)
    h = tf.keras.layers.UnitNormalization(name="normalized_features")(projected)
    logits = GaussianClassifier(mu, var, tau, use_variance, name="classifier")(h)
    return tf.keras.Model(inputs, {"features": h, "logits": logits}, name=name)


def build_fedcb_model(extractor, mu, var, tau, use_variance=True, name="fedcb"):
    """extractor → Dense(D) projection → L2 normalisation ("features", h) → frozen classifier.

    ``extractor``: a Keras model from the input to a feature vector (e.g.
    :func:`tffre.models.resnet.resnet18` without its head). Returns a model with
    outputs ``{"features": h, "logits": τ·F(h, ·)}``.
    """
    inputs = tf.keras.Input(extractor.input_shape[1:], dtype=extractor.input.dtype)
    return frozen_classifier_model(inputs, extractor(inputs), mu, var, tau, use_variance, name)


def task_features(model):
    """(inputs, the ``features`` Keras tensor) of a task model with named outputs."""
    outputs = model.output
    if not isinstance(outputs, dict) or "features" not in outputs:
        raise ValueError(f"the task model {model.name!r} has no 'features' output, which a "
                         f"frozen classifier (FedCB, FedETF) or a personal head (FedRoD) "
                         f"is built on")
    return model.inputs if len(model.inputs) > 1 else model.inputs[0], outputs["features"]


def task_num_classes(model):
    """The number of classes of a task model (its ``logits`` width)."""
    outputs = model.output
    main = outputs.get("logits") if isinstance(outputs, dict) else outputs
    return int(main.shape[-1])


PROMPT_SETS = {"image": IMAGE_TEMPLATES, "text": TEXT_TEMPLATES}
_EMBEDDINGS = {}   # (concepts, templates, encoder folder) -> [K, M, D]: embedded once a process


def prompt_templates(prompts="image", fraction=1.0):
    """The first ceil(fraction · M) templates of a prompt set (FedCB Table 4's 25/50/100%)."""
    if prompts not in PROMPT_SETS:
        raise ValueError(f"prompts must be one of {', '.join(PROMPT_SETS)}, got {prompts!r}")
    if not 0 < fraction <= 1:
        raise ValueError(f"prompt_fraction must be in (0, 1], got {fraction}")
    templates = PROMPT_SETS[prompts]
    return templates[:max(1, int(np.ceil(fraction * len(templates) - 1e-9)))]


def concept_distributions(concepts, templates, encoder_dir=None, covariance="diagonal"):
    """(μ, Σ) of :func:`class_distributions` for ``concepts`` in ``templates``; the prompts are
    embedded once per process (:func:`embed_prompts`)."""
    key = (tuple(concepts), tuple(templates), encoder_dir)
    if key not in _EMBEDDINGS:
        _EMBEDDINGS[key] = embed_prompts(list(concepts), list(templates), encoder_dir)
    return class_distributions(_EMBEDDINGS[key], covariance)


def alignment_loss(y, logits, quadratic_y, tau):
    """Eq. 4's bound as the authors compute it: CE(τ·F) + ½·τ²·hᵀΣ_y h, mean over the batch.

    ``logits``: τ·F(h, ·) [b, K]; ``quadratic_y``: hᵀΣ_y h per example [b].
    """
    y = tf.cast(tf.reshape(y, [-1]), tf.int32)
    ce = tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
    return tf.reduce_mean(ce + 0.5 * tau ** 2 * quadratic_y)


class FedCB(Definition):
    """FedCB's frozen classifier and client objective (FedAvg otherwise).

    :meth:`model_fn` builds the server's classifier once (the concepts'
    prompt embeddings, Eq. 2) and puts it on the task model's ``features``
    (:func:`frozen_classifier_model`); the objective adds the variance term
    of Eq. 4 to the cross-entropy over its logits. A model already built with
    :func:`build_fedcb_model` is trained as it is when ``concepts`` is None.

    Hyperparameters: ``temperature`` (τ), ``use_variance`` (False: Table 5's
    embedding average), ``covariance`` ("diagonal" or "full"), ``prompts``
    ("image" or "text" templates), ``prompt_fraction`` (Table 4),
    ``concepts`` (the K class concepts, in label order; the runner passes the
    task's) and ``concept_encoder`` (a local text-encoder folder; None:
    all-MiniLM-L6-v2).
    """

    needs_features = True

    def __init__(self, hparams):
        super().__init__(hparams)
        if not self.hparams.get("temperature", 1.0) > 0:
            raise ValueError(f"{type(self).__name__}: temperature must be > 0, got "
                             f"{self.hparams['temperature']}")
        if "covariance" in self.hparams and self.hparams["covariance"] not in COVARIANCES:
            raise ValueError(f"covariance must be one of {', '.join(COVARIANCES)}, got "
                             f"{self.hparams['covariance']!r}")
        if "prompts" in self.hparams:
            prompt_templates(self.hparams["prompts"], self.hparams["prompt_fraction"])

    def class_vectors(self, num_classes):
        """(μ [K, D], Σ) of the frozen classifier (Eq. 2 from the concepts' prompts)."""
        concepts = list(self.hparams["concepts"])
        if len(concepts) != num_classes:
            raise ValueError(f"{len(concepts)} class concepts for a model of {num_classes} "
                             f"classes; give one concept per label, in label order")
        templates = prompt_templates(self.hparams["prompts"], self.hparams["prompt_fraction"])
        return concept_distributions(concepts, templates, self.hparams["concept_encoder"],
                                     self.hparams["covariance"])

    def model_fn(self, model_fn):
        if self.hparams.get("concepts") is None and type(self) is FedCB:
            return model_fn   # a model of build_fedcb_model, built by the caller
        probe = model_fn()
        mu, var = self.class_vectors(task_num_classes(probe))
        tau = self.hparams["temperature"]
        use_variance = self.hparams.get("use_variance", True)
        name = type(self).__name__.lower()

        def make():
            inputs, features = task_features(model_fn())
            return frozen_classifier_model(inputs, features, mu, var, tau, use_variance, name)
        return make

    def objective(self, ctx):
        classifier = ctx.model.keras_model.get_layer("classifier")
        h = ctx.outputs["features"]
        var = classifier.effective_var()
        y = tf.cast(tf.reshape(ctx.y, [-1]), tf.int32)
        quadratic = tf.gather(_quadratic(h, var), y, axis=1, batch_dims=1)
        # Plus the model's own regularization losses, as the model's loss would add them.
        return tf.add_n([alignment_loss(y, ctx.outputs["logits"], quadratic, classifier.tau)]
                        + list(ctx.model.keras_model.losses))


class FedETF(FedCB):
    """FedETF's frozen classifier (Li et al., ICCV 2023), the orthogonal-initialisation
    baseline of FedCB Table 2: a simplex ETF (:func:`simplex_etf`) in place of the
    language-model classifier, the same projection and normalisation, cross-entropy over
    τ·hᵀw_k (Σ = 0, so FedCB's objective is the plain cross-entropy).

    Deviations, documented: FedETF learns τ and fine-tunes locally after training; here
    τ is the ``temperature`` hyperparameter and the global model is evaluated as it is.
    Hyperparameters: ``temperature``, ``etf_dim`` (the projection's width D ≥ K),
    ``etf_seed``.
    """

    def class_vectors(self, num_classes):
        mu = simplex_etf(num_classes, int(self.hparams["etf_dim"]), int(self.hparams["etf_seed"]))
        return mu, np.zeros_like(mu)
