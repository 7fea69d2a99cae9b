"""Saved models: a Keras model with what it needs to run on new inputs.

A bundle is a folder::

    model.keras          the model, plain Keras (no optimizer): tf.keras.models.load_model reads it
    bundle.json          {"format": "tffre-model/1", "encoder": "text"|"features",
                          "label_names": [...], "metadata": {algorithm, dataset, task, round, ...}}
                         metadata's optional "decision": {"label": a label name, "threshold": t,
                         "tuned_on": "dev" or null}: that label is the model's decision where
                         its probability is above t (a run's --threshold); else the argmax
    jieba_dict.txt       text encoder: the merged jieba user dictionary actually used,
    vocab.txt            the vocabulary (one token a line, index order),
    text_encoder.json    max_len;
    feature_encoder.json or, for numeric inputs, the number of features;
    tokenizer/,          a document model (encoder "documents", FedLCC's document-level RE):
    doc_featurizer.json  the Hugging Face tokenizer, the relation types (the label names),
                         the word pieces a document is read to and the candidate pair types;
                         its metadata's "decision" is {"loss": "bce", "threshold": t,
                         "tuned_on": "dev" or null} (a relation wherever its sigmoid is above
                         t) or {"loss": "softmax"} (the argmax, none for class 0).

:func:`save_bundle` writes one and :func:`load_bundle` reads it back into a
:class:`Bundle` that predicts label probabilities for raw texts (or feature
lists). TensorFlow is imported only when a model is saved or loaded, so
:func:`read_manifest` can check a folder cheaply (the predict CLI does that
before importing TensorFlow).
"""

import json
import os

import numpy as np

from tffre.jsonio import read_json_object, write_json
from tffre.text.encoder import ENCODERS

FORMAT = "tffre-model/1"
#: The encoder kind of a document-level RE model, and the losses its decision names.
DOCUMENTS = "documents"
DOCUMENT_LOSSES = ("bce", "softmax")
MANIFEST = "bundle.json"
MODEL = "model.keras"


class BundleError(ValueError):
    """The folder is not a readable model bundle; the message is one line naming the problem."""


def _one_line(text):
    return " ".join(str(text).split())


def save_bundle(folder, model, *, label_names, encoder, metadata=None):
    """Writes a model bundle into ``folder`` (created if needed) and returns ``folder``.

    Args:
      model: a Keras model whose output is [n, len(label_names)] probabilities, or a dict of
        named outputs whose "logits" are the class scores (relation models).
      label_names: the task's label names, index-aligned with the model's outputs.
      encoder: a :class:`~tffre.text.TextEncoder`, :class:`~tffre.text.FeatureEncoder` or
        :class:`~tffre.text.relation_tokenizer.RETokenizer`.
      metadata: JSON-serialisable facts to record (e.g. algorithm, dataset, task, round;
        "decision", a threshold the model's label is decided at: the module docstring).
    """
    import tensorflow as tf

    label_names = [str(n) for n in label_names]
    if encoder.kind not in ENCODERS:
        raise ValueError(f"unknown encoder kind {encoder.kind!r}")
    metadata = dict(metadata or {})
    outputs, expected = _num_label_outputs(model), _outputs_for(label_names, encoder.kind,
                                                                metadata.get("decision"))
    if outputs is not None and outputs != expected:
        raise ValueError(f"the model has {outputs} outputs but {len(label_names)} label names "
                         f"were given")
    _check_decision(folder, metadata.get("decision"), label_names, encoder.kind)
    # Hugging Face encoder layers are Keras layers from transformers: loading needs the class.
    encoder_layers = [type(layer) for layer in getattr(model, "layers", [])
                      if type(layer).__module__.startswith("transformers.")]
    if encoder_layers:
        metadata["keras_custom_objects"] = sorted({cls.__name__ for cls in encoder_layers})
    manifest = {"format": FORMAT, "encoder": encoder.kind, "label_names": label_names,
                "metadata": metadata, "tensorflow_version": tf.__version__}
    json.dumps(manifest)  # fail on non-JSON metadata before writing anything
    os.makedirs(folder, exist_ok=True)
    # Remove a stale manifest first and write the new one last: a folder left half-written by
    # an interrupted save is then not mistaken for a bundle.
    if os.path.exists(os.path.join(folder, MANIFEST)):
        os.remove(os.path.join(folder, MANIFEST))
    _plain_copy(model).save(os.path.join(folder, MODEL))
    encoder.save(folder)
    write_json(os.path.join(folder, MANIFEST), manifest)
    return folder


def _outputs_for(label_names, kind, decision):
    """The class scores a model with ``label_names`` outputs: one per label, and for a
    document model trained with the softmax loss one more, "no relation" (class 0)."""
    extra = kind == DOCUMENTS and isinstance(decision, dict) and decision.get("loss") == "softmax"
    return len(label_names) + int(extra)


def _num_label_outputs(model):
    """The number of class scores the model outputs (its ``logits`` for named outputs)."""
    output = getattr(model, "output", None)
    if isinstance(output, dict):
        from tffre.evaluation import main_output
        return main_output(output).shape[-1]
    return model.outputs[0].shape[-1] if getattr(model, "outputs", None) else None


def _plain_copy(model):
    """A copy of ``model`` that plain Keras can load: no optimizer, only built-in initializers.

    ``WordVectors`` (tffre's embedding initializer) becomes "zeros" in the copy:
    the initializer is only used before weights are loaded and the file holds
    the weights, while Keras' Embedding.from_config cannot find a custom
    initializer in a process that has not imported tffre. Cloning also drops
    any compile state, so no optimizer is saved.
    """
    import tensorflow as tf

    if any(type(layer).__module__.startswith("transformers.")
           for layer in getattr(model, "layers", [])):
        return model   # a Hugging Face layer does not clone from its config; it holds no optimizer
    try:
        copy = tf.keras.models.clone_model(model, clone_function=_clone_layer)
    except ValueError:  # subclassed models cannot be cloned: save them as they are
        if getattr(model, "optimizer", None) is not None:
            raise ValueError("cannot save a compiled subclassed model without its optimizer: "
                             "pass an uncompiled model") from None
        return model
    copy.set_weights(model.get_weights())
    return copy


def _clone_layer(layer):
    import tensorflow as tf

    from tffre.models.text import WordVectors

    if isinstance(layer, tf.keras.Model):  # a nested model: its layers need the same treatment
        return tf.keras.models.clone_model(layer, clone_function=_clone_layer)
    config = layer.get_config()
    for key in config:
        if key.endswith("_initializer") and isinstance(getattr(layer, key, None), WordVectors):
            config[key] = tf.keras.initializers.serialize(tf.keras.initializers.Zeros())
    return layer.__class__.from_config(config)


def read_manifest(folder):
    """Checks that ``folder`` holds every bundle file and returns its ``bundle.json``.

    Cheap (no TensorFlow). Raises :class:`BundleError` naming the missing file or bad field.
    """
    if not os.path.isdir(folder):
        raise BundleError(f"model folder not found: {folder}")
    path = os.path.join(folder, MANIFEST)
    if not os.path.isfile(path):
        raise BundleError(f"{folder}: not a tffre model bundle (missing {MANIFEST})")
    manifest = read_json_object(path, BundleError)
    if manifest.get("format") != FORMAT:
        raise BundleError(f"{path}: format is {manifest.get('format')!r}, expected {FORMAT!r}")
    kind = manifest.get("encoder")
    if kind not in ENCODERS:
        raise BundleError(f"{path}: unknown encoder {kind!r} (expected one of "
                          f"{', '.join(sorted(ENCODERS))})")
    names = manifest.get("label_names")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise BundleError(f"{path}: label_names must be a non-empty list of strings")
    if not isinstance(manifest.get("metadata", {}), dict):
        raise BundleError(f"{path}: metadata must be an object")
    _check_decision(path, manifest.get("metadata", {}).get("decision"), names, kind)
    for name in (MODEL,) + ENCODERS[kind].FILES:
        if not os.path.isfile(os.path.join(folder, name)):
            raise BundleError(f"{folder}: not a complete tffre model bundle (missing {name})")
    return manifest


def _check_decision(path, decision, names, kind=None):
    """BundleError unless ``decision`` is absent or a label of ``names`` with a threshold in
    (0, 1); for a document model (``kind`` "documents"), unless it is its loss and, for
    "bce", its threshold (a document model always has one)."""
    where = f"{path}: metadata.decision"
    if kind == DOCUMENTS:
        if not isinstance(decision, dict):
            raise BundleError(f"{where} must be an object (a document model's loss and "
                              f"threshold)")
        if decision.get("loss") not in DOCUMENT_LOSSES:
            raise BundleError(f"{where}.loss must be one of {', '.join(DOCUMENT_LOSSES)}, got "
                              f"{decision.get('loss')!r}")
        if decision["loss"] == "bce":
            _check_threshold(where, decision.get("threshold"))
        return
    if decision is None:
        return
    if not isinstance(decision, dict):
        raise BundleError(f"{where} must be an object")
    if decision.get("label") not in names:
        raise BundleError(f"{where}.label must be one of label_names, got "
                          f"{decision.get('label')!r}")
    _check_threshold(where, decision.get("threshold"))


def _check_threshold(where, t):
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < 1:
        raise BundleError(f"{where}.threshold must be a number between 0 and 1, got {t!r}")


class Bundle:
    """A loaded model bundle: ``model``, ``encoder``, ``label_names``, ``metadata``."""

    def __init__(self, model, encoder, label_names, metadata=None, folder=None):
        self.model = model
        self.encoder = encoder
        self.label_names = list(label_names)
        self.metadata = dict(metadata or {})
        self.folder = folder

    @property
    def kind(self):
        """The encoder kind: "text" (inputs are strings) or "features" (lists of floats)."""
        return self.encoder.kind

    def predict(self, inputs, batch_size=256):
        """Label probabilities, float32 [n, num_labels], for texts or feature lists (a document
        model: :meth:`relations`)."""
        if self.kind == DOCUMENTS:
            raise TypeError(f"{self.folder or 'this bundle'} is a document model: call "
                            f"relations(documents), which gives each document's relations")
        x = self.encoder.encode(list(inputs))
        if not len(x):
            return np.zeros((0, len(self.label_names)), np.float32)
        # Direct calls in fixed-size chunks: no tf.function retracing per input size, and
        # the same numbers as calling the in-memory model.
        parts = [self._probabilities(self.model(x[i:i + batch_size], training=False))
                 for i in range(0, len(x), batch_size)]
        return np.concatenate(parts).astype(np.float32)

    @staticmethod
    def _probabilities(output):
        """Probabilities from the model's output: a named-output model's logits go through softmax."""
        if isinstance(output, dict):
            import tensorflow as tf
            from tffre.evaluation import main_output
            scores = main_output(output)
            return np.asarray(tf.nn.softmax(scores) if "logits" in output else scores)
        return np.asarray(output)

    @property
    def decision(self):
        """The decision rule saved with the model (``metadata["decision"]``: a label and a
        threshold, from a run's ``--threshold``), or None: the most probable label."""
        return self.metadata.get("decision")

    def decide(self, probs):
        """The label index the model decides for each row of ``probs`` ([n, num_labels]), as
        the run scored it: the most probable label; with a :attr:`decision`, its label
        where that label's probability is above the threshold, else the most probable
        other label (the other one, for a binary set)."""
        if self.kind == DOCUMENTS:
            raise TypeError(f"{self.folder or 'this bundle'} is a document model: call "
                            f"relations(documents)")
        probs = np.asarray(probs)
        if self.decision is None:
            return probs.argmax(axis=1)
        j = self.label_names.index(self.decision["label"])
        others = probs.copy()
        others[:, j] = -np.inf
        return np.where(probs[:, j] > self.decision["threshold"], j, others.argmax(axis=1))

    def top(self, inputs, k=1):
        """``k`` labels per input, a list of [(label, probability), ...]: the decided label
        (:meth:`decide`) first, then the others, most probable first. Without a saved
        decision these are the ``k`` most probable labels."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        probs = self.predict(inputs)
        k = min(k, len(self.label_names))
        # A stable sort keeps the lower label index first among equal probabilities.
        order = np.argsort(-probs, axis=1, kind="stable")
        decided = self.decide(probs)
        return [[(self.label_names[j], float(row[j]))
                 for j in ([first] + [j for j in idx if j != first])[:k]]
                for row, idx, first in zip(probs, order, decided)]

    def relations(self, documents, batch_size=8):
        """The relations a document model predicts, as its run scored them (its
        :attr:`decision`): for each :class:`~tffre.data.document_schema.Document`, a list of
        ``(subject id, relation, object id, probability)`` over its candidate entity pairs,
        in pair order (subject-major over the entities in first-mention order), then relation
        order. "bce": every relation whose sigmoid is above the threshold, with that sigmoid;
        "softmax": the most probable class where it is not "no relation", with its softmax
        probability. The documents' own relations, if any, are not read."""
        import dataclasses

        import tensorflow as tf

        from tffre.evaluation import main_output
        from tffre.models.document_model import model_inputs
        if self.kind != DOCUMENTS:
            raise TypeError(f"{self.folder or 'this bundle'} is not a document model: call "
                            f"predict or top")
        documents = [dataclasses.replace(d, relations=[]) for d in documents]
        if not documents:
            return []
        featurizer = self.encoder.fitted(documents)
        x = model_inputs(featurizer.encode(documents))
        decision = self.decision
        out = []
        for i in range(0, len(documents), batch_size):
            logits = main_output(self.model({k: v[i:i + batch_size] for k, v in x.items()},
                                            training=False))
            if decision["loss"] == "bce":
                prob = tf.sigmoid(logits).numpy()
                chosen = prob > decision["threshold"]
            else:   # class 0 is "no relation"; the others are the label names in order
                full = tf.nn.softmax(logits).numpy()
                prob = full[..., 1:]
                chosen = np.eye(full.shape[-1], dtype=bool)[full.argmax(-1)][..., 1:]
            for row, doc in enumerate(documents[i:i + batch_size]):
                facts = []
                for p, (s, o) in enumerate(featurizer.pair_ids(doc)):
                    facts.extend((s, self.label_names[r], o, float(prob[row, p, r]))
                                 for r in np.flatnonzero(chosen[row, p]))
                out.append(facts)
        return out


def load_bundle(folder):
    """Loads a bundle written by :func:`save_bundle`; :class:`BundleError` if it is not one."""
    manifest = read_manifest(folder)
    import tensorflow as tf

    import tffre.models.text  # noqa: F401  (registers the embedding initializer)

    try:
        encoder = ENCODERS[manifest["encoder"]].load(folder)
    except (OSError, ValueError) as err:
        raise BundleError(f"{folder}: cannot read the {manifest['encoder']} encoder "
                          f"({_one_line(err)})") from None
    path = os.path.join(folder, MODEL)
    custom = {}
    names = manifest.get("metadata", {}).get("keras_custom_objects", [])
    if names:
        import transformers
        import tffre.models.relation_model  # noqa: F401  (registers the entity pooling layer)
        if manifest["encoder"] == DOCUMENTS:
            import tffre.models.document_model  # noqa: F401  (registers the pair pooling layers)
        custom = {name: getattr(transformers, name) for name in names}
    try:
        model = tf.keras.models.load_model(path, compile=False, custom_objects=custom)
    except Exception as err:  # Keras raises many types for a corrupt or foreign file
        raise BundleError(f"{path}: cannot load the Keras model ({_one_line(err)[:300]})") from None
    outputs = _num_label_outputs(model)
    decision = manifest.get("metadata", {}).get("decision")
    if outputs is not None and outputs != _outputs_for(manifest["label_names"],
                                                       manifest["encoder"], decision):
        raise BundleError(f"{path}: the model has {outputs} outputs but {MANIFEST} names "
                          f"{len(manifest['label_names'])} labels")
    return Bundle(model, encoder, manifest["label_names"], manifest.get("metadata", {}), folder)
