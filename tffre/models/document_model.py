"""Document-level relation extraction, the ATLOP model FedLCC trains (FedLCC 3.2, Eq. 1-13).

The model takes the dict of :class:`tffre.text.document_features.DocREFeaturizer`
arrays (``input_ids``, ``attention_mask``, ``mention_pos``,
``entity_mentions``, ``pairs``; the featurizer's ``labels`` and ``pair_mask``
are for the loss: :func:`model_inputs` drops them, and a whole featurizer dict
also works, Keras ignoring the extra keys with a warning) and returns a dict::

    {"logits":   [batch, max_pairs, num_relations]     (loss="bce")
                 [batch, max_pairs, num_relations + 1] (loss="softmax", class 0 = no relation)
     "context":  [batch, max_pairs, d]                 the localized context c (Eq. 5)
     "features": [batch, max_pairs, 2 * emb_size]}     [z_s; z_o] (Eq. 6-7), the classifier's
                                                       input, which MOON contrasts

``logits`` and ``context`` are zero on padded pairs. The forward pass:

1. Encoder (Eq. 1): H = the last hidden state [L, d], A = the last layer's
   attention [heads, L, L]. Inputs longer than ``window`` (512) tokens go
   through two overlapping windows, as ATLOP's ``process_long_input`` (which
   the authors' code copies) does: see :func:`split_long_input` and
   :func:`merge_long_input`.
2. Mention embedding: H at the mention's leading ``*``; entity embedding
   h_e = logsumexp over its mentions (Eq. 2), :func:`entity_embeddings`.
3. Entity attention A^e = the mean over its mentions of A's rows at their
   ``*`` [heads, L]; localized context (Eq. 3-5) c = Hᵀ a with
   a = q / (1ᵀq + 1e-5), q = mean over heads of A^s ∘ A^o,
   :func:`entity_attention` and :func:`localized_context`. (Eq. 3 sums over
   the heads, ATLOP averages them; the normalisation makes the two the same
   up to the epsilon, which is ATLOP's 1e-5 applied to the mean.)
4. z_s = tanh(W_s [h_s; c]), z_o = tanh(W_o [h_o; c]) (Eq. 6-7): the Dense
   layers "head_extractor" and "tail_extractor", 2d -> ``num_groups * group_size``.
5. Grouped bilinear (Eq. 8-10): z_s, z_o split into k = ``num_groups``
   groups of g = ``group_size``; logit_r = Σ_i z_s^iᵀ W_r^i z_o^i + b_r, the
   layer "bilinear" (:class:`GroupedBilinear`). Mapping to the paper's "k
   groups": ATLOP (and the authors' ``Model(emb_size=768, block_size=64)``)
   project to emb_size = 768 and split it into blocks of 64, i.e. k = 12
   groups of g = 64, W_r^i ∈ R^{64×64}; the paper's "d/k" is emb_size / k, not
   the encoder's hidden size (all-MiniLM-L6-v2 has d = 384; z is still 768).

Losses: ``loss="bce"`` is the paper's Eq. 10-11, a sigmoid per relation and
binary cross-entropy (a pair with no relation is all zeros).
``loss="softmax"`` is the authors' code (``nn.CrossEntropyLoss`` over the
2-class ``{NR: 0, CID: 1}`` labels): one extra logit, class 0 = "no
relation"; with several relation types, a softmax over "no relation" and the
types. :func:`docre_loss` computes either from the featurizer's multi-hot
labels, :func:`predict_relations` turns logits back into multi-hot
predictions. The localized context contrast (Eq. 12) is FedLCC's objective:
:func:`tffre.algorithms.fedlcc.lcc_loss`.

Training through the federated client loop: the loop passes ``(x, y)``
batches and calls the Keras loss as ``loss(y, outputs["logits"])``. So ``x``
is the dict of :data:`MODEL_INPUTS` arrays, ``y`` packs the labels and the
pair mask into one float32 ``[batch, P, R + 1]`` array (:func:`pack_targets`,
:func:`unpack_targets`), and :class:`DocRELoss` is the Keras loss that unpacks
it and returns :func:`docre_loss`; its ``row_mask(y)`` hands the pair mask to
objectives that average over pairs (MOON, FedLCC).

The model is driven by :class:`DocREModelConfig` and built from the
encoder's ``config.json`` only, with random weights (:func:`build_docre_model`
is cheap and safe as a TFF ``model_fn``); pretrained weights enter afterwards
through :func:`tffre.models.relation_model.load_pretrained_encoder` (the encoder layer is
named "encoder", as in the sentence-level model), or all at once with
:func:`from_pretrained`. Everything is tf ops on whole batches (no Python loop
over documents), so the model traces inside ``tf.function`` and TFF
computations. Transformers is imported inside the functions only.
"""

import dataclasses
import os
from typing import Optional, Tuple

import numpy as np
import tensorflow as tf

from tffre.models.partial import (HIDDEN, PartialTraining, as_partial, encoder_top,  # noqa: F401
                                  has_prefix)
from tffre.models.relation_model import (as_config, build_encoder, check_encoder_folder, config_from_dict,
                             hf_encoder_config, load_pretrained_encoder)
from tffre.text.document_features import DocREFeaturizer, template_tokens

LOSSES = ("bce", "softmax")
MODEL_INPUTS = ("input_ids", "attention_mask", "mention_pos", "entity_mentions", "pairs")
ATTENTION_EPS = 1e-5   # ATLOP's epsilon in a = q / (1ᵀq + eps) (Eq. 4)
WINDOW_EPS = 1e-10     # ATLOP's epsilon when renormalising merged window attention

__all__ = ["DocRELoss", "DocREModelConfig", "GroupedBilinear", "LOSSES", "LongInputMerge",
           "LongInputSplit", "MODEL_INPUTS", "PairPooling", "build_docre_model",
           "build_docre_prefix", "has_prefix", "pack_windows", "unpack_windows",
           "docre_config_for", "docre_loss", "entity_attention", "entity_embeddings",
           "from_pretrained", "grouped_bilinear", "load_pretrained_encoder",
           "localized_context", "merge_long_input", "model_inputs", "pack_targets",
           "predict_relations", "process_long_input", "split_long_input", "unpack_targets"]


# ---------------------------------------------------------------------- configuration

def _tokens(value, name):
    if value is None:
        return None
    if isinstance(value, (int, np.integer)):
        value = (value,)
    out = tuple(int(v) for v in value)
    if not out or any(v < 0 for v in out):
        raise ValueError(f"{name} must be a non-empty sequence of token ids, got {value!r}")
    return out


@dataclasses.dataclass
class DocREModelConfig:
    """Everything :func:`build_docre_model` needs; JSON-able with :meth:`to_dict`.

    Attributes:
      encoder_dir: the Hugging Face encoder folder (its ``config.json`` shapes the encoder).
      num_relations: relation types (the featurizer's ``num_relations``).
      max_length: tokens per document (the featurizer's ``max_length``; ATLOP: 1024).
      loss: "bce" (the paper, Eq. 10-11: ``num_relations`` sigmoid logits) or "softmax"
        (the authors' code: ``num_relations + 1`` logits, class 0 = no relation).
      num_layers: keep only the encoder's first ``num_layers`` layers; None keeps all.
      group_size: g, the size of a bilinear group (ATLOP's block_size, 64).
      num_groups: k, the groups (ATLOP's emb_size 768 / block_size 64 = 12); z_s and z_o
        have ``num_groups * group_size`` units.
      dropout: dropout on z_s and z_o before the bilinear (ATLOP has none: default 0).
      window: the encoder's input window (ATLOP: 512). Longer inputs are read as two
        overlapping windows, so ``max_length`` may be up to ``2 * window``.
      start_tokens, end_tokens: the ids that open and close a window ([CLS] and [SEP] for
        BERT: the featurizer's ``start_tokens``/``end_tokens``); None reads them from the
        folder's tokenizer when the model is built (only needed when
        ``max_length > window``).
      vocab_size: token-embedding rows; None keeps the encoder config's (the featurizer
        adds no tokens).
      freeze_embeddings: freeze the encoder's embedding layer.
      partial: which part of the encoder trains (:class:`tffre.models.partial.PartialTraining`
        or its dict); None: all. When the encoder splits, :func:`build_docre_model` builds
        the top on cached prefix activations (input "hidden") and
        :func:`build_docre_prefix` the prefix.
    """

    encoder_dir: str
    num_relations: int
    max_length: int = 1024
    loss: str = "bce"
    num_layers: Optional[int] = None
    group_size: int = 64
    num_groups: int = 12
    dropout: float = 0.0
    window: int = 512
    start_tokens: Optional[Tuple[int, ...]] = None
    end_tokens: Optional[Tuple[int, ...]] = None
    vocab_size: Optional[int] = None
    freeze_embeddings: bool = False
    partial: Optional[PartialTraining] = None

    def __post_init__(self):
        self.encoder_dir = os.fspath(self.encoder_dir)
        self.partial = as_partial(self.partial)
        for name in ("num_relations", "max_length", "group_size", "num_groups", "window") + tuple(
                n for n in ("vocab_size", "num_layers") if getattr(self, n) is not None):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
            setattr(self, name, int(value))
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        if not 0.0 <= float(self.dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        self.dropout = float(self.dropout)
        self.start_tokens = _tokens(self.start_tokens, "start_tokens")
        self.end_tokens = _tokens(self.end_tokens, "end_tokens")
        if self.max_length > 2 * self.window:
            raise ValueError(f"max_length {self.max_length} exceeds two windows of "
                             f"{self.window} tokens")
        self.freeze_embeddings = bool(self.freeze_embeddings)

    @property
    def emb_size(self):
        """The units of z_s and z_o: ``num_groups * group_size`` (ATLOP's emb_size)."""
        return self.num_groups * self.group_size

    @property
    def num_outputs(self):
        """Logits per pair: ``num_relations`` (bce) or ``num_relations + 1`` (softmax)."""
        return self.num_relations + (1 if self.loss == "softmax" else 0)

    def to_dict(self):
        """The config as a JSON-able dict (token tuples become lists)."""
        out = dataclasses.asdict(self)
        for key in ("start_tokens", "end_tokens"):
            if out[key] is not None:
                out[key] = list(out[key])
        out["partial"] = None if self.partial is None else self.partial.to_dict()
        return out

    def full(self):
        """The same model trained whole: the config a split model is saved as."""
        return dataclasses.replace(self, partial=None)

    @classmethod
    def from_dict(cls, data):
        """The config of a :meth:`to_dict` dict; unknown keys raise ValueError."""
        return config_from_dict(cls, data)


def _as_config(config):
    return as_config(DocREModelConfig, config)


# ---------------------------------------------------------------------- long inputs

def _window_parts(attention_mask, window):
    """Per document: its length, whether it needs two windows, the long rows, their starts."""
    lengths = tf.reduce_sum(tf.cast(attention_mask, tf.int32), axis=1)
    is_long = lengths > window
    long_rows = tf.where(is_long)[:, 0]
    starts = tf.gather(lengths, long_rows) - window   # second window: [L - 512, L)
    return is_long, long_rows, starts


def _gather_rows(params, index, axis):
    """``tf.gather(params, index, axis=axis, batch_dims=1)`` for ``index [n, L]``, done as one
    flat gather: TF 2.14's gradient of a ``batch_dims`` gather has the wrong shape when n is 0
    (a batch without long documents), which breaks training."""
    rank = len(params.shape)
    perm = [0, axis] + [i for i in range(1, rank) if i != axis]
    moved = tf.transpose(params, perm)                                     # [n, W, ...]
    shape = tf.shape(moved)
    flat = tf.reshape(moved, tf.concat([[-1], shape[2:]], axis=0))         # [n * W, ...]
    offsets = tf.range(shape[0], dtype=index.dtype) * tf.cast(shape[1], index.dtype)
    out = tf.gather(flat, index + offsets[:, None])                        # [n, L, ...]
    return tf.transpose(out, np.argsort(perm).tolist())


def _constant_row(width, values, at_end):
    row = [0] * (width - len(values)) + list(values) if at_end else \
        list(values) + [0] * (width - len(values))
    return tf.constant(row, tf.int32)


def split_long_input(input_ids, attention_mask, window=512, start_tokens=(101,),
                     end_tokens=(102,)):
    """The encoder inputs of ATLOP's two-window reading (the first half of ``process_long_input``).

    Every document gets a first window, its tokens ``[0, window)``; documents
    with more than ``window`` real tokens (L = the attention mask's sum) also
    get a second window, ``[L - window, L)``, stacked after all the first
    windows. As in ATLOP, a long document's first window ends with
    ``end_tokens`` (its last ``len(end_tokens)`` tokens replaced) and its
    second starts with ``start_tokens`` (the first ``len(start_tokens)``
    replaced), so each window reads as a whole sequence ([CLS] ... [SEP]).

    Args:
      input_ids: int ``[batch, max_length]``, ``max_length > window``.
      attention_mask: int ``[batch, max_length]``.

    Returns ``(ids, mask)``, ``[batch + n_long, window]`` each.
    """
    input_ids = tf.convert_to_tensor(input_ids)
    attention_mask = tf.convert_to_tensor(attention_mask)
    start_tokens, end_tokens = tuple(start_tokens), tuple(end_tokens)
    is_long, long_rows, starts = _window_parts(attention_mask, window)
    positions = tf.range(window)
    ids1 = input_ids[:, :window]
    tail = positions >= window - len(end_tokens)
    ids1 = tf.where(is_long[:, None] & tail[None],
                    tf.cast(_constant_row(window, end_tokens, True), ids1.dtype)[None], ids1)
    taken = tf.gather(input_ids, long_rows)
    ids2 = tf.gather(taken, starts[:, None] + positions[None], batch_dims=1)
    head = positions < len(start_tokens)
    ids2 = tf.where(head[None], tf.cast(_constant_row(window, start_tokens, False),
                                        ids2.dtype)[None], ids2)
    mask2 = tf.ones_like(ids2, dtype=attention_mask.dtype)  # [L - 512, L) is all real tokens
    return (tf.concat([ids1, ids2], axis=0),
            tf.concat([attention_mask[:, :window], mask2], axis=0))


def merge_long_input(hidden, attention, attention_mask, window=512, start_tokens=(101,),
                     end_tokens=(102,)):
    """Merges the windows of :func:`split_long_input` back into document coordinates.

    ATLOP's ``process_long_input``, second half: a short document's window is
    padded to ``max_length``. A long document's first window keeps positions
    ``[0, window - len(end_tokens))``, its second ``[L - window +
    len(start_tokens), L)`` (the replaced [SEP]/[CLS] rows and columns are
    dropped); hidden states are averaged where the two overlap (each position
    divided by the number of windows covering it), attentions added and each
    row renormalised to sum to 1 (÷ (sum + 1e-10)), which over the overlap is
    the average of the two windows' attention, renormalised. With
    ``max_length = 2 * window`` and L > 2 * window - 2, ATLOP's windows leave
    the positions between them uncovered: there the hidden state and
    attention are 0, as in ATLOP.

    Args:
      hidden: ``[batch + n_long, window, d]`` (first windows, then second windows).
      attention: ``[batch + n_long, heads, window, window]``.
      attention_mask: the documents' ``[batch, max_length]`` mask (gives L).

    Returns ``(hidden [batch, max_length, d], attention [batch, heads, max_length, max_length])``.
    """
    hidden = tf.convert_to_tensor(hidden)
    attention = tf.convert_to_tensor(attention)
    attention_mask = tf.convert_to_tensor(attention_mask)
    length = attention_mask.shape[1]
    if length is None:
        raise ValueError("merge_long_input needs a static max_length")
    dtype = hidden.dtype
    len_start, len_end = len(tuple(start_tokens)), len(tuple(end_tokens))
    batch = tf.shape(attention_mask)[0]
    is_long, long_rows, starts = _window_parts(attention_mask, window)
    pad = length - window
    positions = tf.range(length)

    # First windows, padded to max_length; a long document's last (end token) row/column dropped.
    keep1 = tf.cast(tf.where(is_long[:, None], positions[None] < window - len_end,
                             positions[None] < window), dtype)                  # [b, L]
    h1 = tf.pad(hidden[:batch], [[0, 0], [0, pad], [0, 0]]) * keep1[..., None]
    a1 = tf.pad(attention[:batch], [[0, 0], [0, 0], [0, pad], [0, pad]])
    a1 = a1 * keep1[:, None, :, None] * keep1[:, None, None, :]

    # Second windows: document position p is window position p - (L - window).
    local = positions[None] - starts[:, None]                                     # [n, L]
    keep2 = tf.cast((local >= len_start) & (local < window), dtype)
    local = tf.clip_by_value(local, 0, window - 1)
    h2 = _gather_rows(hidden[batch:], local, 1) * keep2[..., None]                # [n, L, d]
    a2 = _gather_rows(attention[batch:], local, 2)                                # [n, h, L, w]
    a2 = _gather_rows(a2, local, 3)                                               # [n, h, L, L]
    a2 = a2 * keep2[:, None, :, None] * keep2[:, None, None, :]
    rows = long_rows[:, None]
    h2 = tf.scatter_nd(rows, h2, tf.shape(h1, out_type=tf.int64))
    a2 = tf.scatter_nd(rows, a2, tf.shape(a1, out_type=tf.int64))
    keep2 = tf.scatter_nd(rows, keep2, tf.shape(keep1, out_type=tf.int64))

    count = keep1 + keep2
    merged_hidden = (h1 + h2) / tf.maximum(count, 1.0)[..., None]
    merged = a1 + a2
    renormalised = merged / (tf.reduce_sum(merged, axis=-1, keepdims=True) + WINDOW_EPS)
    merged_attention = tf.where(is_long[:, None, None, None], renormalised, merged)
    merged_hidden.set_shape(h1.shape)
    merged_attention.set_shape(a1.shape)
    return merged_hidden, merged_attention


def process_long_input(encode, input_ids, attention_mask, window=512, start_tokens=(101,),
                       end_tokens=(102,)):
    """ATLOP's ``process_long_input`` with any encoder: ``(hidden, attention)`` of a batch.

    Args:
      encode: a callable ``encode(ids, mask) -> (hidden [n, T, d], attention [n, h, T, T])``
        (the last layer's attention).
      input_ids: ``[batch, max_length]`` with a static ``max_length``.
      attention_mask: ``[batch, max_length]``.

    ``max_length <= window``: one encoder call on the inputs as they are.
    Longer: :func:`split_long_input`, one encoder call on all the windows,
    :func:`merge_long_input`.
    """
    length = tf.convert_to_tensor(input_ids).shape[1]
    if length is not None and length <= window:
        return encode(input_ids, attention_mask)
    ids, mask = split_long_input(input_ids, attention_mask, window, start_tokens, end_tokens)
    hidden, attention = encode(ids, mask)
    return merge_long_input(hidden, attention, attention_mask, window, start_tokens, end_tokens)


def pack_windows(hidden, attention_mask, window=512):
    """The windows' hidden states ``[batch + n_long, window, d]`` of :func:`split_long_input`
    as one row per document, ``[batch, 2, window, d]``: its first window, then its second
    (zeros for a document that fits one window). A cached prefix stores this."""
    hidden = tf.convert_to_tensor(hidden)
    batch = tf.shape(attention_mask)[0]
    _, long_rows, _ = _window_parts(attention_mask, window)
    second = tf.scatter_nd(long_rows[:, None], hidden[batch:],
                           tf.shape(hidden[:batch], out_type=tf.int64))
    return tf.stack([hidden[:batch], second], axis=1)


def unpack_windows(packed, attention_mask, window=512):
    """:func:`pack_windows` undone: ``[batch, 2, window, d]`` -> ``[batch + n_long, window, d]``."""
    _, long_rows, _ = _window_parts(attention_mask, window)
    return tf.concat([packed[:, 0], tf.gather(packed[:, 1], long_rows)], axis=0)


class _WindowLayer(tf.keras.layers.Layer):
    def __init__(self, window=512, start_tokens=(101,), end_tokens=(102,), **kwargs):
        super().__init__(**kwargs)
        self.window = int(window)
        self.start_tokens = tuple(int(t) for t in start_tokens)
        self.end_tokens = tuple(int(t) for t in end_tokens)

    def get_config(self):
        return {**super().get_config(), "window": self.window,
                "start_tokens": list(self.start_tokens), "end_tokens": list(self.end_tokens)}


@tf.keras.utils.register_keras_serializable(package="tffre")
class LongInputSplit(_WindowLayer):
    """:func:`split_long_input` as a layer: ``[ids, mask] -> [window ids, window mask]``."""

    def call(self, inputs):
        """``[ids, mask]`` of the documents -> ``[ids, mask]`` of the windows."""
        ids, mask = inputs
        return list(split_long_input(ids, mask, self.window, self.start_tokens, self.end_tokens))


@tf.keras.utils.register_keras_serializable(package="tffre")
class PackWindows(_WindowLayer):
    """``[window hidden states, mask] -> [b, 2, window, d]`` (:func:`pack_windows`)."""

    def call(self, inputs):
        hidden, mask = inputs
        return pack_windows(hidden, mask, self.window)


@tf.keras.utils.register_keras_serializable(package="tffre")
class CachedWindows(_WindowLayer):
    """``[cached [b, 2, window, d], mask] -> [b + n_long, window, d]`` (:func:`unpack_windows`):
    a split model's cached windows in :func:`split_long_input`'s row order."""

    def call(self, inputs):
        packed, mask = inputs
        return unpack_windows(packed, mask, self.window)


@tf.keras.utils.register_keras_serializable(package="tffre")
class LongInputMerge(_WindowLayer):
    """:func:`merge_long_input` as a layer: ``[hidden, attention, mask] -> [H, A]``."""

    def call(self, inputs):
        """``[hidden, attention]`` of the windows and the documents' mask -> ``[H, A]``."""
        hidden, attention, mask = inputs
        return list(merge_long_input(hidden, attention, mask, self.window, self.start_tokens,
                                     self.end_tokens))


# ---------------------------------------------------------------------- entities and pairs

def _mention_weights(mention_pos, entity_mentions, dtype):
    """[b, E, M]: 1 where mention row m is a (kept, not truncated) mention of entity e."""
    num_mentions = tf.shape(mention_pos)[1]
    valid_mention = mention_pos >= 0                                               # [b, M]
    slot_valid = (entity_mentions >= 0) & tf.gather(
        valid_mention, tf.maximum(entity_mentions, 0), batch_dims=1)               # [b, E, K]
    onehot = tf.one_hot(tf.maximum(entity_mentions, 0), num_mentions, dtype=dtype)  # [b,E,K,M]
    return tf.reduce_sum(onehot * tf.cast(slot_valid, dtype)[..., None], axis=2), slot_valid


def entity_embeddings(hidden, mention_pos, entity_mentions):
    """h_e = logsumexp over the entity's mention embeddings (Eq. 2): ``[b, E, d]``.

    Args:
      hidden: H, ``[b, L, d]``.
      mention_pos: ``[b, M]`` token index of each mention's leading ``*``, -1 pad.
      entity_mentions: ``[b, E, K]`` mention rows, -1 pad.

    Pads and truncated mentions (``mention_pos`` -1) are left out; an entity
    with no mention left gets zeros (as in ATLOP). Stable and NaN-free in the
    gradient: the max is taken over valid mentions only and held constant.
    """
    hidden = tf.convert_to_tensor(hidden)
    mention_pos = tf.convert_to_tensor(mention_pos)
    entity_mentions = tf.convert_to_tensor(entity_mentions)
    mentions = tf.gather(hidden, tf.maximum(mention_pos, 0), batch_dims=1)          # [b, M, d]
    _, slot_valid = _mention_weights(mention_pos, entity_mentions, hidden.dtype)
    per_slot = tf.gather(mentions, tf.maximum(entity_mentions, 0), batch_dims=1)    # [b,E,K,d]
    valid = slot_valid[..., None]
    any_valid = tf.reduce_any(slot_valid, axis=2)[..., None]                        # [b, E, 1]
    peak = tf.reduce_max(tf.where(valid, per_slot, tf.cast(-np.inf, hidden.dtype)), axis=2)
    peak = tf.stop_gradient(tf.where(any_valid, peak, tf.zeros_like(peak)))
    shifted = tf.where(valid, per_slot - peak[:, :, None], tf.cast(-np.inf, hidden.dtype))
    total = tf.reduce_sum(tf.exp(shifted), axis=2)
    total = tf.where(any_valid, total, tf.ones_like(total))
    return tf.where(any_valid, peak + tf.math.log(total), tf.zeros_like(total))


def entity_attention(attention, mention_pos, entity_mentions):
    """A^e = the mean over the entity's mentions of A's rows at their ``*`` (3.2): ``[b, E, h, L]``.

    Args:
      attention: A, the last layer's ``[b, heads, L, L]``.
      mention_pos: as in :func:`entity_embeddings`.
      entity_mentions: as in :func:`entity_embeddings`.

    An entity with no mention left gets zeros (ATLOP).
    """
    attention = tf.convert_to_tensor(attention)
    mention_pos = tf.convert_to_tensor(mention_pos)
    entity_mentions = tf.convert_to_tensor(entity_mentions)
    rows = tf.gather(attention, tf.maximum(mention_pos, 0), axis=2, batch_dims=1)  # [b, h, M, L]
    weights, _ = _mention_weights(mention_pos, entity_mentions, attention.dtype)   # [b, E, M]
    weights = weights / tf.maximum(tf.reduce_sum(weights, axis=-1, keepdims=True), 1.0)
    return tf.einsum("bem,bhml->behl", weights, rows)


def _pair_gather(values, pairs):
    """values [b, E, ...] at the pairs' subjects and objects: two [b, P, ...] tensors."""
    index = tf.maximum(pairs, 0)
    return (tf.gather(values, index[..., 0], batch_dims=1),
            tf.gather(values, index[..., 1], batch_dims=1))


def localized_context(hidden, entity_att, pairs):
    """The localized context c^(s,o) = Hᵀ a^(s,o) of each pair (Eq. 3-5): ``[b, P, d]``.

    q = mean over heads of A^s ∘ A^o (Eq. 3), a = q / (1ᵀq + 1e-5) (Eq. 4),
    c = Hᵀ a (Eq. 5). Padded pairs (-1) get zeros.

    Args:
      hidden: H, ``[b, L, d]``.
      entity_att: A^e of :func:`entity_attention`, ``[b, E, heads, L]``.
      pairs: ``[b, P, 2]`` (subject, object) entity rows, -1 pad.
    """
    hidden = tf.convert_to_tensor(hidden)
    pairs = tf.convert_to_tensor(pairs)
    subject, obj = _pair_gather(tf.convert_to_tensor(entity_att), pairs)            # [b,P,h,L]
    q = tf.reduce_mean(subject * obj, axis=2)                                       # [b, P, L]
    a = q / (tf.reduce_sum(q, axis=-1, keepdims=True) + ATTENTION_EPS)
    context = tf.einsum("bpl,bld->bpd", a, hidden)
    return context * tf.cast(pairs[..., 0] >= 0, hidden.dtype)[..., None]


@tf.keras.utils.register_keras_serializable(package="tffre")
class PairPooling(tf.keras.layers.Layer):
    """``[H, A, mention_pos, entity_mentions, pairs] -> [h_s, h_o, c]``, each ``[b, P, d]``.

    h_s, h_o: the pair's subject and object embeddings (Eq. 2); c: the
    localized context (Eq. 3-5). All zero on padded pairs.
    """

    def call(self, inputs):
        """``[H, A, mention_pos, entity_mentions, pairs] -> [h_s, h_o, c]``."""
        hidden, attention, mention_pos, entity_mentions, pairs = inputs
        entities = entity_embeddings(hidden, mention_pos, entity_mentions)
        valid = tf.cast(pairs[..., 0] >= 0, hidden.dtype)[..., None]
        h_s, h_o = _pair_gather(entities, pairs)
        context = localized_context(
            hidden, entity_attention(attention, mention_pos, entity_mentions), pairs)
        return [h_s * valid, h_o * valid, context]


# ---------------------------------------------------------------------- grouped bilinear

def grouped_bilinear(z_s, z_o, kernel, bias, num_groups):
    """logit_r = Σ_i z_s^iᵀ W_r^i z_o^i + b_r (Eq. 8-10), without forming the outer products.

    Args:
      z_s: ``[..., k * g]``.
      z_o: ``[..., k * g]``.
      kernel: ``[k * g * g, R]``, laid out as ATLOP's ``Linear(emb_size * block_size, R)``
        over the flattened outer products (row ``(i * g + x) * g + y`` multiplies
        z_s^i[x] · z_o^i[y]), i.e. ``kernel.reshape(k, g, g, R)[i, :, :, r]`` is W_r^i.
      bias: ``[R]``.
      num_groups: k.

    Returns ``[..., R]``. Computing (z_s^i W^i) · z_o^i keeps memory at
    ``[..., k, g, R]`` instead of ATLOP's ``[..., k * g * g]`` outer products.
    """
    z_s = tf.convert_to_tensor(z_s)
    z_o = tf.convert_to_tensor(z_o, dtype=z_s.dtype)
    width = z_s.shape[-1]
    group = width // num_groups
    lead = tf.shape(z_s)[:-1]
    s = tf.reshape(z_s, tf.concat([lead, [num_groups, group]], 0))
    o = tf.reshape(z_o, tf.concat([lead, [num_groups, group]], 0))
    w = tf.reshape(kernel, [num_groups, group, group, -1])
    left = tf.einsum("...kx,kxyr->...kyr", s, w)
    return tf.einsum("...kyr,...ky->...r", left, o) + bias


@tf.keras.utils.register_keras_serializable(package="tffre")
class GroupedBilinear(tf.keras.layers.Layer):
    """The grouped bilinear classifier (Eq. 8-10): ``[z_s, z_o] -> logits [..., units]``.

    Its kernel ``[k * g * g, units]`` and bias ``[units]`` are ATLOP's
    ``nn.Linear(emb_size * block_size, num_class)`` (see :func:`grouped_bilinear`).
    """

    def __init__(self, units, num_groups=12, group_size=64, **kwargs):
        super().__init__(**kwargs)
        self.units = int(units)
        self.num_groups = int(num_groups)
        self.group_size = int(group_size)

    def build(self, input_shape):
        """Creates the kernel and bias with ``nn.Linear``'s default U(±1/sqrt(fan_in)) init."""
        width = self.num_groups * self.group_size
        for shape in input_shape:
            if shape[-1] is not None and shape[-1] != width:
                raise ValueError(f"GroupedBilinear expects {width} features ({self.num_groups} "
                                 f"groups of {self.group_size}), got {shape[-1]}")
        fan_in = width * self.group_size
        limit = 1.0 / np.sqrt(fan_in)  # nn.Linear's default init range
        self.kernel = self.add_weight(
            "kernel", (fan_in, self.units),
            initializer=tf.keras.initializers.RandomUniform(-limit, limit))
        self.bias = self.add_weight(
            "bias", (self.units,), initializer=tf.keras.initializers.RandomUniform(-limit, limit))
        super().build(input_shape)

    def call(self, inputs):
        """``[z_s, z_o] -> logits``: :func:`grouped_bilinear` with this layer's weights."""
        z_s, z_o = inputs
        return grouped_bilinear(z_s, z_o, self.kernel, self.bias, self.num_groups)

    def get_config(self):
        """The layer's constructor arguments (Keras serialization)."""
        return {**super().get_config(), "units": self.units, "num_groups": self.num_groups,
                "group_size": self.group_size}


@tf.keras.utils.register_keras_serializable(package="tffre")
class _PairMask(tf.keras.layers.Layer):
    """``[values [b, P, n], pairs] -> values`` with padded pairs zeroed."""

    def call(self, inputs):
        values, pairs = inputs
        return values * tf.cast(pairs[..., 0] >= 0, values.dtype)[..., None]


# ---------------------------------------------------------------------- the model

def _start_end_tokens(config):
    if config.start_tokens is not None and config.end_tokens is not None:
        return config.start_tokens, config.end_tokens
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(check_encoder_folder(config.encoder_dir),
                                              use_fast=True, local_files_only=True)
    start, end = template_tokens(tokenizer)
    return config.start_tokens or start, config.end_tokens or end


def _encoder_config(config):
    """The HF config of the encoder; its positions must hold one window (ATLOP: 512)."""
    reading = min(config.max_length, config.window)
    try:
        hf_config = hf_encoder_config(config.encoder_dir, reading, config.vocab_size,
                                      config.num_layers)
    except ValueError as err:
        if "max_position_embeddings" in str(err):
            raise ValueError(f"the encoder reads windows of {reading} tokens (min(max_length, "
                             f"window)), more than its max_position_embeddings: {err}") from None
        raise
    hf_config.output_attentions = True  # Eq. 3 needs the last layer's attention
    return hf_config


def build_docre_model(config):
    """Builds the document-level RE Keras model of ``config``, with random weights.

    Args:
      config: a :class:`DocREModelConfig` (or its dict).

    Returns a functional ``tf.keras.Model`` with the int32 inputs of
    :data:`MODEL_INPUTS` (``input_ids``/``attention_mask`` ``[batch,
    max_length]``, ``mention_pos`` ``[batch, M]``, ``entity_mentions``
    ``[batch, E, K]``, ``pairs`` ``[batch, P, 2]``; M, E, K and P may be any
    size) and the output dict ``{"logits", "context", "features"}``. Layers: "encoder"
    (the ``TFAutoModel`` of the folder's config.json; BERT's unused pooler frozen;
    with ``freeze_embeddings`` its embeddings too), with ``max_length > window``
    "long_input_split"/"long_input_merge" around it, "pair_pooling",
    "head_extractor", "tail_extractor", "dropout", "bilinear", "logits".
    Only reads config.json (and, for windows without ``start_tokens``, the tokenizer):
    cheap, and safe as a TFF ``model_fn``.
    """
    config = _as_config(config)
    hf_config = _encoder_config(config)
    length = config.max_length
    inputs = _document_inputs(length)
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    if has_prefix(config):
        # The top on the cached prefix activations (input "hidden"), in window coordinates.
        top, _ = encoder_top(hf_config, config.partial, output_attentions=True)
        inputs[HIDDEN] = tf.keras.Input(_cached_shape(config, hf_config.hidden_size),
                                        dtype=tf.float32, name=HIDDEN)

        def encode(win_ids, win_mask):
            cached = inputs[HIDDEN]
            if length > config.window:
                cached = CachedWindows(name="cached_windows", window=config.window)(
                    [cached, mask])
            return top([cached, win_mask])
    else:
        encoder = build_encoder(hf_config, config.freeze_embeddings)

        def encode(win_ids, win_mask):
            out = encoder(input_ids=win_ids, attention_mask=win_mask, output_attentions=True)
            return out.last_hidden_state, out.attentions[-1]
    if length > config.window:
        start, end = _start_end_tokens(config)
        window = dict(window=config.window, start_tokens=start, end_tokens=end)
        win_ids, win_mask = LongInputSplit(name="long_input_split", **window)([ids, mask])
        last, last_attention = encode(win_ids, win_mask)
        hidden, attention = LongInputMerge(name="long_input_merge", **window)(
            [last, last_attention, mask])
    else:
        hidden, attention = encode(ids, mask)

    h_s, h_o, context = PairPooling(name="pair_pooling")(
        [hidden, attention, inputs["mention_pos"], inputs["entity_mentions"], inputs["pairs"]])
    # Eq. 6-7: tanh(W_s h_s + W_c1 c) is one Dense over [h_s; c] (ATLOP's head_extractor).
    z_s = tf.keras.layers.Dense(config.emb_size, activation="tanh", name="head_extractor")(
        tf.keras.layers.Concatenate(axis=-1, name="subject_context")([h_s, context]))
    z_o = tf.keras.layers.Dense(config.emb_size, activation="tanh", name="tail_extractor")(
        tf.keras.layers.Concatenate(axis=-1, name="object_context")([h_o, context]))
    dropout = tf.keras.layers.Dropout(config.dropout, name="dropout")
    raw = GroupedBilinear(config.num_outputs, config.num_groups, config.group_size,
                          name="bilinear")([dropout(z_s), dropout(z_o)])
    logits = _PairMask(name="logits")([raw, inputs["pairs"]])
    # "features": the pair representation the classifier reads (MOON's z; no new weights).
    features = tf.keras.layers.Concatenate(axis=-1, name="features")([z_s, z_o])
    return tf.keras.Model(inputs, {"logits": logits, "context": context, "features": features},
                          name="docre_model")


def _document_inputs(length):
    """The Keras inputs of :data:`MODEL_INPUTS` for documents of ``length`` tokens."""
    return {
        "input_ids": tf.keras.Input((length,), dtype=tf.int32, name="input_ids"),
        "attention_mask": tf.keras.Input((length,), dtype=tf.int32, name="attention_mask"),
        "mention_pos": tf.keras.Input((None,), dtype=tf.int32, name="mention_pos"),
        "entity_mentions": tf.keras.Input((None, None), dtype=tf.int32, name="entity_mentions"),
        "pairs": tf.keras.Input((None, 2), dtype=tf.int32, name="pairs"),
    }


def _cached_shape(config, hidden_size):
    """A document's cached prefix activations: ``[max_length, d]``, or ``[2, window, d]``
    (:func:`pack_windows`) for documents read as two windows."""
    if config.max_length > config.window:
        return (2, config.window, hidden_size)
    return (config.max_length, hidden_size)


def build_docre_prefix(config):
    """The frozen prefix of a split ``config`` (:mod:`tffre.models.partial`), random weights:
    a model from the document inputs (``input_ids``, ``attention_mask``) to the hidden states
    below the top, ``[batch, max_length, d]`` or, for two windows, ``[batch, 2, window, d]``.
    Its Transformers layer is "encoder" (load the checkpoint with
    :func:`load_pretrained_encoder`)."""
    config = _as_config(config)
    hf_config = _encoder_config(config)
    hf_config.output_attentions = False
    hf_config.num_hidden_layers = config.partial.first_top_layer(hf_config.num_hidden_layers)
    encoder = build_encoder(hf_config, freeze_embeddings=True)
    encoder.trainable = False
    length = config.max_length
    inputs = {k: v for k, v in _document_inputs(length).items()
              if k in ("input_ids", "attention_mask")}
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    if length > config.window:
        start, end = _start_end_tokens(config)
        window = dict(window=config.window, start_tokens=start, end_tokens=end)
        win_ids, win_mask = LongInputSplit(name="long_input_split", **window)([ids, mask])
        hidden = encoder(input_ids=win_ids, attention_mask=win_mask).last_hidden_state
        hidden = PackWindows(name="pack_windows", **window)([hidden, mask])
    else:
        hidden = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
    return tf.keras.Model(inputs, hidden, name="docre_prefix")


def model_inputs(batch):
    """The model's inputs of a featurizer dict (drops ``labels`` and ``pair_mask``)."""
    return {key: batch[key] for key in MODEL_INPUTS}


def docre_config_for(featurizer, encoder_dir, *, loss="bce", **kwargs):
    """The :class:`DocREModelConfig` of a model that takes ``featurizer``'s arrays.

    ``num_relations``, ``max_length`` and the window tokens come from the
    featurizer; other fields (``num_layers``, ``dropout``, ...) from ``kwargs``.
    """
    return DocREModelConfig(encoder_dir=os.fspath(encoder_dir),
                            num_relations=featurizer.num_relations,
                            max_length=featurizer.max_length, loss=loss,
                            start_tokens=featurizer.start_tokens,
                            end_tokens=featurizer.end_tokens, **kwargs)


def from_pretrained(encoder_dir, relation_types, *, loss="bce", pretrained=True,
                    featurizer_kwargs=None, **config_kwargs):
    """The model and its featurizer for a local encoder folder: ``(model, featurizer)``.

    Args:
      encoder_dir: the encoder folder; None = all-MiniLM-L6-v2 (``default_encoder_dir``).
      relation_types: the relation types (label columns).
      loss: "bce" or "softmax".
      pretrained: copy the checkpoint's weights into the encoder (else random weights).
      featurizer_kwargs: :class:`DocREFeaturizer` arguments (``max_length``, ``pair_types``, ...).
      config_kwargs: other :class:`DocREModelConfig` fields.
    """
    from tffre.text.relation_tokenizer import default_encoder_dir
    encoder_dir = default_encoder_dir() if encoder_dir is None else os.fspath(encoder_dir)
    featurizer = DocREFeaturizer(encoder_dir, relation_types, **(featurizer_kwargs or {}))
    model = build_docre_model(docre_config_for(featurizer, encoder_dir, loss=loss,
                                               **config_kwargs))
    if pretrained:
        load_pretrained_encoder(model, encoder_dir)
    return model, featurizer


# ---------------------------------------------------------------------- losses

def _check_kind(kind):
    if kind not in LOSSES:
        raise ValueError(f"kind must be one of {', '.join(LOSSES)}, got {kind!r}")


def docre_loss(labels, logits, pair_mask, kind="bce"):
    """The classification loss, averaged over the valid pairs: a scalar.

    Args:
      labels: the featurizer's multi-hot ``[b, P, R]`` (all zeros = no relation).
      logits: the model's ``[b, P, R]`` (bce) or ``[b, P, R + 1]`` (softmax).
      pair_mask: ``[b, P]``, 1 on real pairs.
      kind: "bce": Eq. 11, Σ_r binary cross-entropy of sigmoid(logit_r) per pair.
        "softmax": cross-entropy of a softmax over [no relation, r_1..r_R]; the target
        is "no relation" for an all-zero label, else the pair's relations, equally
        weighted (one relation, e.g. CDR's CID: the authors' 2-class CrossEntropyLoss).

    A batch without valid pairs gives 0.
    """
    _check_kind(kind)
    logits = tf.convert_to_tensor(logits)
    labels = tf.cast(labels, logits.dtype)
    mask = tf.cast(pair_mask, logits.dtype)
    if kind == "bce":
        per_pair = tf.reduce_sum(
            tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits), axis=-1)
    else:
        none = 1.0 - tf.reduce_max(labels, axis=-1, keepdims=True)
        target = tf.concat([none, labels], axis=-1)
        target = target / tf.reduce_sum(target, axis=-1, keepdims=True)
        per_pair = tf.nn.softmax_cross_entropy_with_logits(labels=target, logits=logits)
    return tf.reduce_sum(per_pair * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)


def predict_relations(logits, kind="bce", threshold=0.5):
    """Multi-hot int32 predictions ``[..., R]`` from the model's logits.

    "bce": relation r where sigmoid(logit_r) > ``threshold``. "softmax": the
    argmax class, none when it is class 0 ("no relation"); ``threshold`` is
    not used. Padded pairs should be masked by the caller (``pair_mask``).
    """
    _check_kind(kind)
    logits = tf.convert_to_tensor(logits)
    if kind == "bce":
        return tf.cast(tf.sigmoid(logits) > threshold, tf.int32)
    best = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return tf.one_hot(best, tf.shape(logits)[-1], dtype=tf.int32)[..., 1:]


# ---------------------------------------------------------------------- targets for the client loop

def pack_targets(labels, pair_mask):
    """float32 ``[..., P, R + 1]``: the multi-hot ``labels [..., P, R]`` and, as the last
    column, ``pair_mask [..., P]``: the ``y`` of the client loop's ``(x, y)`` batches."""
    labels = np.asarray(labels)
    pair_mask = np.asarray(pair_mask)
    if labels.shape[:-1] != pair_mask.shape:
        raise ValueError(f"labels {labels.shape} and pair_mask {pair_mask.shape} do not share "
                         f"their [..., pairs] shape")
    return np.concatenate([labels.astype(np.float32),
                           pair_mask.astype(np.float32)[..., None]], axis=-1)


def unpack_targets(y):
    """``(labels [..., P, R], pair_mask [..., P])`` of :func:`pack_targets`' ``y`` (tensors)."""
    y = tf.convert_to_tensor(y)
    return y[..., :-1], y[..., -1]


@tf.keras.utils.register_keras_serializable(package="tffre")
class DocRELoss(tf.keras.losses.Loss):
    """The document RE loss as a Keras loss on packed targets: ``loss(y, logits)``.

    ``y`` is :func:`pack_targets`' ``[b, P, R + 1]`` (labels ⊕ pair mask);
    the value is :func:`docre_loss` (``kind`` "bce", Eq. 11, or "softmax",
    the authors' code), already averaged over the batch's valid pairs (a
    scalar, so Keras' reduction leaves it as it is).
    """

    def __init__(self, kind="bce", name="docre_loss", **kwargs):
        _check_kind(kind)
        super().__init__(name=name, **kwargs)
        self.kind = kind

    def call(self, y_true, y_pred):
        """:func:`docre_loss` of the unpacked targets and the logits."""
        labels, pair_mask = unpack_targets(y_true)
        return docre_loss(labels, y_pred, pair_mask, self.kind)

    def row_mask(self, y_true):
        """The pair mask ``[b, P]`` packed in ``y_true`` (see :meth:`ObjectiveContext.row_mask
        <tffre.definition.ObjectiveContext.row_mask>`)."""
        return unpack_targets(y_true)[1]

    def get_config(self):
        """The loss's constructor arguments (Keras serialization)."""
        return {**super().get_config(), "kind": self.kind}
