"""FedCB (Zhu et al., MICCAI, "Stealing Knowledge from Pre-trained Language Models for
Federated Classifier Debiasing"): a frozen classifier.

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

τ is a hyperparameter (``classifier_temperature``, alias ``temperature``): the
paper gives none; the authors' README uses 17.5 for OCT-C8 and 12.5 for
Kvasir-v2. ``use_variance=False`` is the "embedding average" ablation (Table
5): μ_k only. The class concepts and the prompt set (image or text) are the
task's (:class:`tffre.definition.TaskContext`).
"""

import dataclasses


from tffre import definition
from tffre.definition import Definition
from tffre.hparams import (boolean, choice, existing_folder, optional, param, positive_float,
                           positive_int, seed, unit_interval)
from tffre.lazy import np, tf

#: FedCB's tau and FedETF's: the logit scale of the frozen classifier (FedCB Eq. 5).
CLASSIFIER_TEMPERATURE = dict(parse=positive_float, aliases=("temperature",),
                              help="temperature tau of the frozen classifier's logits (the "
                              "authors' README: 17.5 for OCT-C8, 12.5 for Kvasir-v2)",
                              paper="FedCB Eq. 5")

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
    from tffre.models.relation_model import load_tf_encoder
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


def simplex_etf(num_classes, dim, seed=0):
    """[K, D] class vectors of a simplex equiangular tight frame (FedETF's frozen classifier).

    W = sqrt(K / (K - 1)) · U (I − 11ᵀ/K), U a seeded random D x K matrix with orthonormal
    columns (D ≥ K): unit vectors whose pairwise inner products are all −1/(K − 1). As a
    :class:`tffre.models.heads.GaussianClassifier` with Σ = 0 it is the orthogonal-initialisation baseline of
    FedCB Table 2.
    """
    if dim < num_classes:
        raise ValueError(f"a simplex ETF of {num_classes} classes needs dim >= {num_classes}, "
                         f"got {dim}")
    u, _ = np.linalg.qr(np.random.RandomState(seed).randn(dim, num_classes))
    k = num_classes
    w = np.sqrt(k / (k - 1)) * u @ (np.eye(k) - np.ones((k, k)) / k)
    return w.T.astype(np.float32)


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

    The class concepts (K, in label order) and the prompt set come from the task
    context (:class:`tffre.definition.TaskContext`: ``concepts``, ``prompts``).
    """

    @dataclasses.dataclass(frozen=True)
    class Hparams(definition.Hparams):
        classifier_temperature: float = param(12.5, **CLASSIFIER_TEMPERATURE)
        use_variance: bool = param(True, boolean, "FedCB: use the class variances (false: "
                                   "Table 5's embedding average, the means only)",
                                   paper="FedCB Table 5")
        covariance: str = param("diagonal", choice(*COVARIANCES), "FedCB: the class "
                                "distributions' covariance: diagonal (the authors' code) or "
                                "full (Eq. 2 as written)", paper="FedCB Eq. 2")
        prompt_fraction: float = param(1.0, unit_interval, "FedCB: use the first fraction of "
                                       "the 20 prompt templates (Table 4: 0.25, 0.5, 1)",
                                       paper="FedCB Table 4")
        concept_encoder: str = param(None, optional(existing_folder), "FedCB: a local Hugging "
                                     "Face text encoder folder for the prompts (default "
                                     "all-MiniLM-L6-v2; the paper: BiomedCLIP's text tower)")

    needs_features = True

    def __init__(self, hparams, context=None):
        super().__init__(hparams, context)
        if self.context.prompts not in PROMPT_SETS:
            raise ValueError(f"prompts must be one of {', '.join(PROMPT_SETS)}, got "
                             f"{self.context.prompts!r}")

    def class_vectors(self, num_classes):
        """(μ [K, D], Σ) of the frozen classifier (Eq. 2 from the concepts' prompts)."""
        concepts = list(self.context.concepts)
        if len(concepts) != num_classes:
            raise ValueError(f"{len(concepts)} class concepts for a model of {num_classes} "
                             f"classes; give one concept per label, in label order")
        templates = prompt_templates(self.context.prompts, self.hparams.prompt_fraction)
        return concept_distributions(concepts, templates, self.hparams.concept_encoder,
                                     self.hparams.covariance)

    def model_fn(self, model_fn):
        from tffre.models.heads import frozen_classifier_model, task_features, task_num_classes
        if self.context.concepts is None and type(self) is FedCB:
            return model_fn   # a model of build_fedcb_model, built by the caller
        probe = model_fn()
        mu, var = self.class_vectors(task_num_classes(probe))
        tau = self.hparams.classifier_temperature
        use_variance = getattr(self.hparams, "use_variance", True)
        name = type(self).__name__.lower()

        def make():
            inputs, features = task_features(model_fn())
            return frozen_classifier_model(inputs, features, mu, var, tau, use_variance, name)
        return make

    def objective(self, ctx):
        from tffre.models.heads import quadratic
        classifier = ctx.model.keras_model.get_layer("classifier")
        h = ctx.outputs["features"]
        var = classifier.effective_var()
        y = tf.cast(tf.reshape(ctx.y, [-1]), tf.int32)
        quadratic_y = tf.gather(quadratic(h, var), y, axis=1, batch_dims=1)
        # Plus the model's own regularization losses, as the model's loss would add them.
        return tf.add_n([alignment_loss(y, ctx.outputs["logits"], quadratic_y, classifier.tau)]
                        + list(ctx.model.keras_model.losses))


class FedETF(FedCB):
    """FedETF's frozen classifier (Li et al., ICCV 2023), the orthogonal-initialisation
    baseline of FedCB Table 2: a simplex ETF (:func:`simplex_etf`) in place of the
    language-model classifier, the same projection and normalisation, cross-entropy over
    τ·hᵀw_k (Σ = 0, so FedCB's objective is the plain cross-entropy).

    Deviations, documented: FedETF learns τ and fine-tunes locally after training; here
    τ is the ``classifier_temperature`` hyperparameter and the global model is evaluated as
    it is.
    """

    @dataclasses.dataclass(frozen=True)
    class Hparams(definition.Hparams):
        classifier_temperature: float = param(12.5, **CLASSIFIER_TEMPERATURE)
        etf_dim: int = param(128, positive_int, "FedETF: the projection's width (>= the number "
                             "of classes)", paper="FedETF")
        etf_seed: int = param(0, seed, "FedETF: the seed of the simplex ETF's random basis")

    def class_vectors(self, num_classes):
        mu = simplex_etf(num_classes, self.hparams.etf_dim, self.hparams.etf_seed)
        return mu, np.zeros_like(mu)
