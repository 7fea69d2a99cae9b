"""Relation extraction over a pretrained transformer encoder (FedCMC Eq. 1, FedED Eq. 1).

The model takes the packed int32 array ``[batch, 4, max_length]`` of
:class:`tffre.text.relation_tokenizer.RETokenizer` (ids, attention mask, e1 mask,
e2 mask) and returns a dict::

    {"features": [batch, D'],   # the relation representation h
     "logits":   [batch, num_labels]}

``representation="entity_sum"`` (FedCMC 3.1, Eq. 1): h = h_e1 ⊕ h_e2, where
h_e is the *sum* of the encoder's last hidden states over the entity's word
pieces (markers excluded), D' = 2H. ``representation="cls_entities"`` (FedED
3.2, Eq. 1): h = h_[CLS] ⊕ h_e1 ⊕ h_e2, D' = 3H, with h_[CLS] the last hidden
state at [CLS] (not BERT's pooler) and h_e the same sum ("summing the final
hidden layers corresponding to the word pieces in each entity mention").
``representation="mean"`` (a plain text, ``--dataset text --model encoder``): h is the mean
of the last hidden states over the attention mask (the sentence embedding all-MiniLM-L6-v2
was trained for), D' = H, on the packed ``[batch, 2, max_length]`` (ids, attention mask) of
:class:`tffre.text.text_tokenizer.TextTokenizer`.
Then dropout and one ``Dense(num_labels, name="classifier")`` whose kernel
columns are the class vectors (FedCMC's Θ^L transposed). The logits are not
softmaxed: train with
``tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)`` on
``outputs["logits"]``.

The model is driven by :class:`REModelConfig` and built from the encoder's
``config.json`` only, with random weights: :func:`build_re_model` is cheap
and safe to call as a TFF ``model_fn``. Pretrained weights enter afterwards
with :func:`load_pretrained_encoder` (the runner calls it after the federated
process's ``initialize`` and puts the weights into the server state). The
one way in for users::

    model, tokenizer = from_pretrained(default_encoder_dir(), num_labels=9)
    x = tokenizer.encode(train_df)          # int32 [n, 4, 128]

Transformers is imported inside the functions only.
"""

import dataclasses
import os
import re
from typing import Optional

import numpy as np
import tensorflow as tf

from tffre.models.partial import (HIDDEN, PartialTraining, as_partial,  # noqa: F401
                                  encoder_depth, encoder_top, has_prefix, load_pretrained_top)
from tffre.text.relation_tokenizer import (  # noqa: F401  (re-exported)
    REPRESENTATIONS, EncoderFolderError, RETokenizer, check_encoder_folder, default_encoder_dir)


def _drop_unused_assert_report(record):
    """False for TensorFlow's "Object was never used" report on the HF embedding's id check.

    Transformers' TF embeddings call ``tf.debugging.assert_less(input_ids, vocab_size)``;
    traced in a graph (the Keras functional model, TFF's computations) that assert op is
    left unused and TensorFlow logs a 12-line ERROR for every trace. Harmless: ids come from
    our tokenizer, whose size the embedding matches.
    """
    message = record.getMessage()
    return not ("Object was never used" in message and "assert_less" in message)


tf.get_logger().addFilter(_drop_unused_assert_report)

__all__ = ["EncoderFolderError", "EntityPooling", "REModelConfig", "REPRESENTATIONS",
           "RETokenizer", "as_config", "build_encoder", "build_re_model", "check_encoder_folder",
           "build_re_prefix", "config_from_dict", "default_encoder_dir", "from_pretrained",
           "hf_encoder_config", "has_prefix", "input_rows", "load_pretrained_encoder"]

#: A plain text's representation (one text, no entities): its input has 2 rows, not 4.
MEAN = "mean"
ALL_REPRESENTATIONS = REPRESENTATIONS + (MEAN,)


def input_rows(representation):
    """The packed input's rows: 2 (ids, attention mask) for a plain text's ``"mean"``, else 4
    (with the entity masks)."""
    return 2 if representation == MEAN else 4


@dataclasses.dataclass
class REModelConfig:
    """Everything :func:`build_re_model` needs; JSON-able with :meth:`to_dict`.

    Attributes:
      encoder_dir: the Hugging Face encoder folder (its ``config.json`` shapes the encoder).
      num_labels: relation classes.
      max_length: word pieces per example (the packed input's last dimension).
      representation: "entity_sum" (FedCMC, 2H features), "cls_entities" (FedED, 3H) or
        "mean" (a plain text's mean over its word pieces, H; input ``[b, 2, max_length]``).
      vocab_size: the token-embedding rows, i.e. the tokenizer's size with the added
        markers (``RETokenizer.vocab_size``); None keeps the encoder config's size.
      dropout: dropout on the features before the classifier.
      blind_entities: whether the tokenizer blinds entities (recorded, not used by the graph).
      num_layers: keep only the encoder's first ``num_layers`` transformer layers (a
        smaller, faster model; the pretrained weights of those layers are loaded); None
        keeps them all.
      freeze_embeddings: freeze the encoder's embedding layer (word, position and type
        embeddings and their LayerNorm). Their gradients and uploads vanish: with
        all-MiniLM-L6-v2 cut to 2 layers, 3.6M trainable parameters instead of 15.5M, and
        a local step about half as long on a CPU. The added markers keep their random rows.
      partial: which part of the encoder trains (a
        :class:`tffre.models.partial.PartialTraining` or its dict: ``trainable_layers``,
        LoRA); None: all of it. When the encoder splits, :func:`build_re_model` builds the
        top, on cached prefix activations, and :func:`build_re_prefix` the prefix.
    """

    encoder_dir: str
    num_labels: int
    max_length: int = 128
    representation: str = "entity_sum"
    vocab_size: Optional[int] = None
    dropout: float = 0.1
    blind_entities: bool = False
    num_layers: Optional[int] = None
    freeze_embeddings: bool = False
    partial: Optional[PartialTraining] = None

    def __post_init__(self):
        self.encoder_dir = os.fspath(self.encoder_dir)
        self.partial = as_partial(self.partial)
        for name in ("num_labels", "max_length") + tuple(
                n for n in ("vocab_size", "num_layers") if getattr(self, n) is not None):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
            setattr(self, name, int(value))
        if self.representation not in ALL_REPRESENTATIONS:
            raise ValueError(f"representation must be one of {', '.join(ALL_REPRESENTATIONS)}, "
                             f"got {self.representation!r}")
        if not 0.0 <= float(self.dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        self.dropout = float(self.dropout)
        self.blind_entities = bool(self.blind_entities)
        self.freeze_embeddings = bool(self.freeze_embeddings)

    def to_dict(self):
        out = dataclasses.asdict(self)
        out["partial"] = None if self.partial is None else self.partial.to_dict()
        return out

    @classmethod
    def from_dict(cls, data):
        return config_from_dict(cls, data)

    def full(self):
        """The same model trained whole: the config a split model is saved as."""
        return dataclasses.replace(self, partial=None)


def config_from_dict(cls, data):
    """The dataclass ``cls`` built from a :meth:`to_dict`-style dict; unknown keys raise
    ValueError naming them (shared by the model configs)."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s): {', '.join(unknown)}")
    return cls(**data)


def as_config(cls, config):
    """``config`` if it is a ``cls``, else ``cls.from_dict(config)`` for a dict; TypeError
    otherwise."""
    if isinstance(config, cls):
        return config
    if isinstance(config, dict):
        return cls.from_dict(config)
    raise TypeError(f"expected a {cls.__name__} or a dict, got {type(config).__name__}")


def _as_config(config):
    return as_config(REModelConfig, config)


@tf.keras.utils.register_keras_serializable(package="tffre")
class EntityPooling(tf.keras.layers.Layer):
    """The relation representation from hidden states and the packed input's entity masks.

    Called on ``[hidden [b, T, H], packed [b, 4, T]]``: "entity_sum" gives
    (Σ_e1 h) ⊕ (Σ_e2 h), "cls_entities" gives h_0 ⊕ (Σ_e1 h) ⊕ (Σ_e2 h).
    An entity with an all-zero mask (cut by truncation) contributes zeros. "mean" (a plain
    text's ``[b, 2, T]``) gives the mean of h over the attention mask (row 1).
    """

    def __init__(self, representation="entity_sum", **kwargs):
        super().__init__(**kwargs)
        if representation not in ALL_REPRESENTATIONS:
            raise ValueError(f"representation must be one of {', '.join(ALL_REPRESENTATIONS)}, "
                             f"got {representation!r}")
        self.representation = representation

    def call(self, inputs):
        hidden, packed = inputs
        if self.representation == MEAN:
            mask = tf.cast(packed[:, 1:2], hidden.dtype)             # [b, 1, T]
            total = tf.matmul(mask, hidden)[:, 0]                    # [b, H]
            return total / tf.maximum(tf.reduce_sum(mask, axis=-1), 1.0)
        masks = tf.cast(packed[:, 2:4], hidden.dtype)          # [b, 2, T]
        entities = tf.matmul(masks, hidden)                      # [b, 2, H]: masked sums
        parts = [entities[:, 0], entities[:, 1]]
        if self.representation == "cls_entities":
            parts.insert(0, hidden[:, 0])
        return tf.concat(parts, axis=-1)

    def get_config(self):
        return {**super().get_config(), "representation": self.representation}


def hf_encoder_config(encoder_dir, max_length, vocab_size=None, num_layers=None):
    """The Hugging Face config of the encoder folder, checked to read ``max_length`` positions,
    with ``vocab_size`` embedding rows and its first ``num_layers`` layers (None: the folder's)."""
    from transformers import AutoConfig
    check_encoder_folder(encoder_dir)
    hf_config = AutoConfig.from_pretrained(encoder_dir, local_files_only=True)
    positions = getattr(hf_config, "max_position_embeddings", None)
    if positions is not None and max_length > positions:
        raise ValueError(f"max_length {max_length} exceeds the encoder's "
                         f"max_position_embeddings {positions}")
    if vocab_size is not None:
        hf_config.vocab_size = vocab_size
    if num_layers is not None:
        if num_layers > hf_config.num_hidden_layers:
            raise ValueError(f"num_layers {num_layers} exceeds the encoder's "
                             f"{hf_config.num_hidden_layers} layers")
        hf_config.num_hidden_layers = num_layers
    return hf_config


def build_encoder(hf_config, freeze_embeddings=False):
    """The ``TFAutoModel`` layer "encoder" of ``hf_config``, with random weights.

    BERT's pooler, which our models do not use, is frozen so that it gets no
    (missing) gradient; ``freeze_embeddings`` freezes the embedding layer too.
    """
    from transformers import TFAutoModel
    encoder = TFAutoModel.from_config(hf_config, name="encoder")
    main = getattr(encoder, getattr(encoder, "base_model_prefix", ""), None)
    if getattr(main, "pooler", None) is not None:
        main.pooler.trainable = False
    if freeze_embeddings:
        encoder.get_input_embeddings().trainable = False
    # Transformers' TF models are graph-safe as written (they compile under XLA), so autograph
    # need not rewrite them: converting their source cost ~5 s at each process's first build.
    # do_not_convert turns autograph off for the encoder's inner layers as well.
    encoder.call = tf.autograph.experimental.do_not_convert(encoder.call)
    return encoder


def build_re_model(config):
    """Builds the relation-extraction Keras model of ``config``, with random weights.

    Args:
      config: an :class:`REModelConfig` (or its dict).

    Returns a functional ``tf.keras.Model`` with one int32 input "inputs"
    ``[batch, 4, max_length]`` (``[batch, 2, max_length]`` for "mean") and the output dict
    ``{"features", "logits"}``.
    Its layers: "encoder" (the ``TFAutoModel`` of the encoder's config, token
    embeddings sized ``vocab_size``; BERT's pooler, unused here, is frozen so
    it gets no missing gradients; with ``freeze_embeddings`` its embedding layer is
    frozen too), "features", "dropout", "classifier".
    """
    config = _as_config(config)
    hf_config = hf_encoder_config(config.encoder_dir, config.max_length, config.vocab_size,
                                  config.num_layers)
    inputs = tf.keras.Input((input_rows(config.representation), config.max_length),
                            dtype=tf.int32, name="inputs")
    if has_prefix(config):
        # The top on the cached prefix activations: inputs {"hidden", "inputs"}.
        cached = tf.keras.Input((config.max_length, hf_config.hidden_size), dtype=tf.float32,
                                name=HIDDEN)
        top, _ = encoder_top(hf_config, config.partial)
        hidden = top([cached, inputs[:, 1]])
        model_inputs = {HIDDEN: cached, "inputs": inputs}
    else:
        encoder = build_encoder(hf_config, config.freeze_embeddings)
        hidden = encoder(input_ids=inputs[:, 0], attention_mask=inputs[:, 1]).last_hidden_state
        model_inputs = inputs
    features = EntityPooling(config.representation, name="features")([hidden, inputs])
    dropped = tf.keras.layers.Dropout(config.dropout, name="dropout")(features)
    logits = tf.keras.layers.Dense(config.num_labels, name="classifier")(dropped)
    return tf.keras.Model(model_inputs, {"features": features, "logits": logits},
                          name="re_model")


def build_re_prefix(config):
    """The frozen prefix of a split ``config`` (:mod:`tffre.models.partial`), random weights:
    a model from the packed input ``[batch, 4, max_length]`` to the hidden states below the
    top ``[batch, max_length, H]``. Its Transformers layer is "encoder" (load the checkpoint
    with :func:`load_pretrained_encoder`)."""
    config = _as_config(config)
    hf_config = hf_encoder_config(config.encoder_dir, config.max_length, config.vocab_size,
                                  config.num_layers)
    first = config.partial.first_top_layer(hf_config.num_hidden_layers)
    hf_config.num_hidden_layers = first
    encoder = build_encoder(hf_config, freeze_embeddings=True)
    encoder.trainable = False
    inputs = tf.keras.Input((input_rows(config.representation), config.max_length),
                            dtype=tf.int32, name="inputs")
    hidden = encoder(input_ids=inputs[:, 0], attention_mask=inputs[:, 1]).last_hidden_state
    return tf.keras.Model(inputs, hidden, name="re_prefix")


def _key(variable_name, prefix):
    """A variable's name below the model: from the main layer (e.g. "bert/...") on, no ":0"."""
    parts = variable_name.split(":")[0].split("/")
    if prefix in parts:
        return "/".join(parts[parts.index(prefix):])
    return "/".join(parts[1:])


def _input_embedding(encoder):
    layer = encoder.get_input_embeddings()
    weight = getattr(layer, "weight", None)
    if weight is None:
        weight = getattr(layer, "embeddings", None)
    return weight


def _layer_index(key):
    """The transformer layer a variable belongs to (``.../layer_._3/...`` -> 3), else None."""
    match = re.search(r"/layer_\._(\d+)/", "/" + key)
    return int(match.group(1)) if match else None


def load_tf_encoder(encoder_dir):
    """The pretrained ``TFAutoModel`` of a local encoder folder (no download, no torch for
    safetensors).

    Reads ``tf_model.h5``, or PyTorch-format ``model.safetensors`` (no torch
    needed), or ``pytorch_model.bin`` (needs torch). A checkpoint that does
    not fit its own config raises a one-line ValueError.
    """
    from transformers import TFAutoModel
    from transformers.utils import logging as hf_logging

    encoder_dir = check_encoder_folder(encoder_dir, weights=True)
    names = set(os.listdir(encoder_dir))
    from_pt = not ({"tf_model.h5", "tf_model.h5.index.json", "model.safetensors",
                    "model.safetensors.index.json"} & names)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its "all weights were used" banner; problems raise below
    try:
        pretrained, info = TFAutoModel.from_pretrained(
            encoder_dir, local_files_only=True, from_pt=from_pt, output_loading_info=True)
    finally:
        hf_logging.set_verbosity(verbosity)
    if info.get("missing_keys") or info.get("mismatched_keys"):
        missing = list(info.get("missing_keys") or []) + list(info.get("mismatched_keys") or [])
        raise ValueError(f"{encoder_dir}: the checkpoint does not fit its own config "
                         f"({len(missing)} missing or mismatched, e.g. {missing[0]})")
    return pretrained


def load_pretrained_encoder(model, encoder_dir):
    """Copies the pretrained checkpoint of ``encoder_dir`` into ``model``'s "encoder" layer.

    Reads ``tf_model.h5``, or PyTorch-format ``model.safetensors`` (no torch
    needed), or ``pytorch_model.bin`` (needs torch) with
    ``TFAutoModel.from_pretrained(..., local_files_only=True)``, then assigns
    variable by variable, matched by name below the model prefix. The word
    embedding may have more rows than the checkpoint (the added markers): the
    pretrained rows are copied and the extra rows kept as they are. Any
    unmatched variable or other shape difference raises a one-line ValueError.
    Returns ``model``. Call it outside any TFF ``model_fn`` (eagerly).
    """
    encoder_dir = check_encoder_folder(encoder_dir, weights=True)
    pretrained = load_tf_encoder(encoder_dir)
    if "encoder" not in [layer.name for layer in model.layers]:   # a split model's top
        top = model.get_layer("encoder_top")
        # The top holds the last K of the (possibly cut) encoder's layers.
        load_pretrained_top(top, pretrained, top.hf_config["num_hidden_layers"] - top.num_layers)
        return model
    encoder = model.get_layer("encoder")

    prefix = getattr(encoder, "base_model_prefix", "")
    source = {}
    for variable in pretrained.weights:
        source[_key(variable.name, prefix)] = variable
    embedding = _input_embedding(encoder)
    targets = {_key(v.name, prefix): v for v in encoder.weights}
    kept = encoder.config.num_hidden_layers
    # A model built with num_layers keeps the checkpoint's first layers: the others are unused.
    unmatched = sorted(k for k in set(targets) ^ set(source)
                       if not (k in source and _layer_index(k) is not None
                               and _layer_index(k) >= kept))
    if unmatched:
        raise ValueError(f"{encoder_dir}: {len(unmatched)} encoder variable(s) do not match "
                         f"the checkpoint, e.g. {unmatched[0]} (is it the same architecture?)")
    for key, target in targets.items():
        value = source[key].numpy()
        if tuple(target.shape) == value.shape:
            target.assign(value)
        elif (embedding is not None and target is embedding and value.ndim == 2
              and target.shape[1] == value.shape[1] and target.shape[0] >= value.shape[0]):
            rows = target.numpy()
            rows[:value.shape[0]] = value
            target.assign(rows)
        else:
            raise ValueError(f"{encoder_dir}: {key} has shape {tuple(target.shape)} in the "
                             f"model but {value.shape} in the checkpoint")
    return model


def config_for(tokenizer, encoder_dir, num_labels, *, representation="entity_sum", dropout=0.1,
               num_layers=None, freeze_embeddings=False, partial=None):
    """The :class:`REModelConfig` of a model that takes ``tokenizer``'s packed inputs.

    The embedding gets ``max(len(tokenizer), encoder vocab)`` rows, so the
    checkpoint's matrix always fits and the added markers get new rows.
    """
    from transformers import AutoConfig
    base_vocab = AutoConfig.from_pretrained(encoder_dir, local_files_only=True).vocab_size
    return REModelConfig(encoder_dir=encoder_dir, num_labels=num_labels,
                         max_length=tokenizer.max_length, representation=representation,
                         vocab_size=max(tokenizer.vocab_size, base_vocab), dropout=dropout,
                         blind_entities=getattr(tokenizer, "blind_entities", False),
                         num_layers=num_layers,
                         freeze_embeddings=freeze_embeddings, partial=partial)


def from_pretrained(encoder_dir, num_labels, *, max_length=128,
                    representation="entity_sum", blind_entities=False, entity_types=(),
                    pretrained=True, dropout=0.1):
    """The model and its tokenizer for a local encoder folder: ``(model, tokenizer)``.

    Args:
      encoder_dir: the encoder folder; None = :func:`default_encoder_dir` (all-MiniLM-L6-v2).
      num_labels: relation classes.
      max_length: word pieces per example.
      representation: "entity_sum" or "cls_entities".
      blind_entities: FedED's entity blinding.
      entity_types: the types that get their own blinding placeholder (with blinding).
      pretrained: copy the checkpoint's weights into the encoder (else random weights).
      dropout: dropout before the classifier.

    The embedding gets ``max(len(tokenizer), encoder vocab)`` rows, so the
    checkpoint's matrix always fits and the added markers get new rows.
    """
    encoder_dir = default_encoder_dir() if encoder_dir is None else os.fspath(encoder_dir)
    tokenizer = RETokenizer.from_pretrained(encoder_dir, max_length=max_length,
                                            blind_entities=blind_entities,
                                            entity_types=entity_types)
    config = config_for(tokenizer, encoder_dir, num_labels, representation=representation,
                        dropout=dropout)
    model = build_re_model(config)
    if pretrained:
        load_pretrained_encoder(model, encoder_dir)
    return model, tokenizer
