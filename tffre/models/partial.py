"""Training the top of a pretrained encoder: a frozen, cached prefix, and LoRA adapters.

Federated fine-tuning of a transformer rarely needs to move every weight. With
``trainable_layers = K`` the encoder of depth L splits at layer ``first = L - K``:

* the **prefix**, the embeddings and layers ``0 .. first-1``, is frozen. Its output on a
  client's example never changes, so the client computes it once, before its first round
  (:func:`activations`, kept in memory or in its own folder: :class:`ActivationStore`),
  and feeds it to the model every round after. The prefix never enters the federated
  model: it is neither broadcast nor uploaded, and its activations never leave the client.
  It runs in inference mode, so **dropout in the frozen layers is off** (the full model
  trains with dropout there);
* the **top**, layers ``first .. L-1`` (:class:`EncoderTop`) and the task's head, trains and
  is all that a client uploads.

``K = L`` is full fine-tuning, exactly the model without this option (the embeddings train,
or not, per ``freeze_embeddings``). With ``lora_rank = r`` (:mod:`tffre.models.lora`) the
top's layers are frozen too and only LoRA adapters on their projections (and the head)
train; the prefix is then at least the embeddings (``K`` defaults to L: adapters in every
layer).

A trained split model is saved as the plain full model (:func:`graft`): the prefix's
weights, the top's (LoRA folded into plain kernels) and the head, so a bundle and
``predict`` work on raw inputs, as for a model trained whole.

Only BERT-family encoders (BERT, RoBERTa, ELECTRA: an ``embeddings`` layer and an
``encoder`` with a ``layer`` list in Transformers' TF code) split; others raise.
"""

import dataclasses
import hashlib
import os
import re
import weakref
from typing import Optional, Tuple

import numpy as np
import tensorflow as tf

from tffre.models import lora as lora_lib

#: The model input that holds a split model's cached prefix activations.
HIDDEN = "hidden"
_LAYER = re.compile(r"(?:^|/)layer_\._(\d+)/(.+?)(?::\d+)?$")


@dataclasses.dataclass
class PartialTraining:
    """Which part of an encoder trains (see the module docstring).

    Attributes:
      trainable_layers: K, the top layers that train (None, or K at least the encoder's
        depth: all; with LoRA, adapters in all).
      lora_rank: r of LoRA adapters on the top layers' projections; None: no adapters.
      lora_alpha: α (the update is scaled by α / r); None: α = r.
      lora_targets: the projections that get adapters (:data:`tffre.models.lora.TARGETS`).
      lora_init: "gaussian" (the paper) or "kaiming" (loralib's) for the adapters' A.
    """

    trainable_layers: Optional[int] = None
    lora_rank: Optional[int] = None
    lora_alpha: Optional[float] = None
    lora_targets: Tuple[str, ...] = lora_lib.DEFAULT_TARGETS
    lora_init: str = "gaussian"

    def __post_init__(self):
        for name in ("trainable_layers", "lora_rank"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or int(value) != value
                                      or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
            if value is not None:
                setattr(self, name, int(value))
        if self.lora_alpha is not None:
            if not float(self.lora_alpha) > 0:
                raise ValueError(f"lora_alpha must be > 0, got {self.lora_alpha!r}")
            self.lora_alpha = float(self.lora_alpha)
        if isinstance(self.lora_targets, str):
            self.lora_targets = tuple(t.strip() for t in self.lora_targets.split(",") if t.strip())
        self.lora_targets = lora_lib.check_targets(self.lora_targets)
        if self.lora_init not in lora_lib.INITS:
            raise ValueError(f"lora_init must be one of {', '.join(lora_lib.INITS)}, "
                             f"got {self.lora_init!r}")

    def first_top_layer(self, depth):
        """The index of the first layer that trains, in an encoder of ``depth`` layers (0 when
        ``trainable_layers`` is None or at least ``depth``: every layer trains)."""
        k = depth if self.trainable_layers is None else min(self.trainable_layers, depth)
        return depth - k

    def splits(self, depth):
        """True when the encoder splits into a cached prefix and a top (see the module
        docstring): fewer trainable layers than ``depth``, or LoRA."""
        return self.lora_rank is not None or self.first_top_layer(depth) > 0

    def describe(self, depth):
        """A short description for reports."""
        first = self.first_top_layer(depth)
        text = f"top {depth - first} of {depth} layers"
        if self.lora_rank is not None:
            text += (f", LoRA r={self.lora_rank} alpha={self.lora_alpha or self.lora_rank:g} "
                     f"on {'+'.join(self.lora_targets)}")
        return text + (f", layers 0-{first - 1} and embeddings cached" if first else
                       ", embeddings cached")

    def to_dict(self):
        return {**dataclasses.asdict(self), "lora_targets": list(self.lora_targets)}


def as_partial(value):
    """A :class:`PartialTraining` from itself, its dict, or None (None)."""
    if value is None or isinstance(value, PartialTraining):
        return value
    if isinstance(value, dict):
        return PartialTraining(**value)
    raise TypeError(f"expected PartialTraining, a dict or None, got {type(value).__name__}")


def encoder_depth(config):
    """The transformer layers of a model config's encoder (a config with ``encoder_dir`` and
    ``num_layers``: its ``num_layers``, or the folder's ``config.json``)."""
    if config.num_layers:
        return config.num_layers
    from transformers import AutoConfig
    return AutoConfig.from_pretrained(config.encoder_dir, local_files_only=True).num_hidden_layers


def has_prefix(config):
    """True when a model config's encoder trains its top alone, on a cached prefix."""
    return config.partial is not None and config.partial.splits(encoder_depth(config))


def main_layer(hf_model):
    """The main layer of a Transformers TF model (``model.bert`` for BERT)."""
    main = getattr(hf_model, getattr(hf_model, "base_model_prefix", ""), None)
    if main is None or not hasattr(main, "embeddings") or \
            not hasattr(getattr(main, "encoder", None), "layer"):
        raise ValueError(f"{type(hf_model).__name__}: only BERT-family encoders (embeddings "
                         f"and an encoder with a layer list) can train their top layers alone")
    return main


def _top_config(hf_config, num_layers):
    config = hf_config.__class__.from_dict(hf_config.to_dict())
    config.num_hidden_layers = num_layers
    return config


@tf.keras.utils.register_keras_serializable(package="tffre")
class EncoderTop(tf.keras.layers.Layer):
    """The top ``num_layers`` transformer layers of an encoder, on cached hidden states.

    Called on ``[hidden [b, T, H], attention_mask [b, T]]``; returns the last hidden state,
    or ``[last hidden state, the last layer's attention]`` with ``output_attentions``. The
    attention mask becomes the additive mask the encoder's own main layer builds,
    (1 - mask) · -10000. The layers are the encoder's own class (``TFBertLayer`` for BERT),
    named ``layer_._0 ..``; :func:`load_pretrained_top` fills them from a checkpoint's layers
    ``first ..``.

    Args:
      hf_config: the encoder's config dict (``PretrainedConfig.to_dict()``).
      num_layers: the layers on top.
      lora: a :class:`PartialTraining` dict whose ``lora_rank`` puts adapters on them, or None.
      output_attentions: also return the last layer's attention (document RE, Eq. 3).
    """

    def __init__(self, hf_config, num_layers, lora=None, output_attentions=False, **kwargs):
        super().__init__(**kwargs)
        from transformers import AutoConfig, TFAutoModel
        self.hf_config = dict(hf_config)
        self.num_layers = int(num_layers)
        self.lora = None if lora is None else as_partial(lora).to_dict()
        self.output_attentions = bool(output_attentions)
        config = AutoConfig.for_model(**self.hf_config)
        config.num_hidden_layers = self.num_layers
        probe = TFAutoModel.from_config(_top_config(config, 0))   # unbuilt: its classes only
        self.stack = type(main_layer(probe).encoder)(config, name="encoder")
        self.adapters = []
        partial = as_partial(self.lora)
        if partial is not None and partial.lora_rank is not None:
            self.adapters = lora_lib.add_lora(self.stack.layer, partial.lora_targets,
                                              partial.lora_rank, partial.lora_alpha,
                                              partial.lora_init)

    @tf.autograph.experimental.do_not_convert   # the Transformers layers are graph-safe
    def call(self, inputs, training=None):
        hidden, mask = inputs
        extended = tf.cast(mask, hidden.dtype)[:, None, None, :]
        extended = tf.multiply(tf.subtract(tf.constant(1.0, hidden.dtype), extended),
                               tf.constant(-10000.0, hidden.dtype))
        out = self.stack(hidden_states=hidden, attention_mask=extended,
                         head_mask=[None] * self.num_layers, encoder_hidden_states=None,
                         encoder_attention_mask=None, past_key_values=None, use_cache=False,
                         output_attentions=self.output_attentions, output_hidden_states=False,
                         return_dict=True, training=bool(training))
        if self.output_attentions:
            return [out.last_hidden_state, out.attentions[-1]]
        return out.last_hidden_state

    def get_config(self):
        return {**super().get_config(), "hf_config": self.hf_config,
                "num_layers": self.num_layers, "lora": self.lora,
                "output_attentions": self.output_attentions}


def encoder_top(hf_config, partial, output_attentions=False, name="encoder_top"):
    """(the :class:`EncoderTop` of ``partial``'s trainable layers, the index of its first
    layer in the full encoder) for a Hugging Face config of the full depth."""
    depth = hf_config.num_hidden_layers
    first = partial.first_top_layer(depth)
    lora = partial if partial.lora_rank is not None else None
    return EncoderTop(hf_config.to_dict(), depth - first, lora,
                      output_attentions=output_attentions, name=name), first


def _layer_key(name):
    """(layer index, the rest of the name) of a transformer-layer variable, else None."""
    match = _LAYER.search(name)
    return None if match is None else (int(match.group(1)), match.group(2))


def load_pretrained_top(top, pretrained, first):
    """Copies a checkpoint's layers ``first ..`` (a loaded Transformers TF model) into the
    :class:`EncoderTop` ``top`` (its layers ``0 ..``); LoRA adapters keep their values.
    A variable without its checkpoint twin, or of another shape, raises ValueError."""
    source = {}
    for variable in pretrained.weights:
        key = _layer_key(variable.name)
        if key is not None:
            source[key] = variable
    for variable in top.weights:
        if variable.name.split(":")[0].rsplit("/", 1)[-1].startswith("lora_"):
            continue
        index, rest = _layer_key(variable.name)
        twin = source.get((index + first, rest))
        if twin is None or tuple(twin.shape) != tuple(variable.shape):
            raise ValueError(f"{variable.name}: no checkpoint variable layer_._{index + first}/"
                             f"{rest} of shape {tuple(variable.shape)}")
        variable.assign(twin)
    return top


def top_values(top):
    """{(layer index, rest of name): numpy value} of a trained :class:`EncoderTop`, with each
    LoRA adapter folded into its kernel (W₀ + α/r · A B) and the adapters left out."""
    merged = {id(layer.kernel): lora_lib.merged_kernel(layer) for layer in top.adapters}
    values = {}
    for variable in top.weights:
        index, rest = _layer_key(variable.name)
        if rest.rsplit("/", 1)[-1].startswith("lora_"):
            continue
        values[(index, rest)] = merged.get(id(variable), None)
        if values[(index, rest)] is None:
            values[(index, rest)] = variable.numpy()
    return values


def graft(full, trained, prefix_encoder, top_name="encoder_top"):
    """Fills ``full`` (the plain model: its Transformers layer "encoder" has every layer)
    with a trained split model's weights: the embeddings, the pooler and layers below the
    top from ``prefix_encoder`` (the prefix's Transformers layer), the top's layers from
    ``trained``'s :class:`EncoderTop` (LoRA folded in), every other layer from ``trained``'s
    layer of the same name. Returns ``full``. Anything left unmatched raises ValueError."""
    top = trained.get_layer(top_name)
    first = prefix_encoder.config.num_hidden_layers
    top_weights = top_values(top)
    prefix = {}
    for variable in prefix_encoder.weights:
        prefix[_encoder_key(variable.name)] = variable
    encoder = full.get_layer("encoder")
    for variable in encoder.weights:
        key = _layer_key(variable.name)
        if key is not None and key[0] >= first:
            value = top_weights.pop((key[0] - first, key[1]), None)
        else:
            twin = prefix.get(_encoder_key(variable.name))
            value = None if twin is None else twin.numpy()
        if value is None or value.shape != tuple(variable.shape):
            raise ValueError(f"{variable.name}: no trained or prefix value of shape "
                             f"{tuple(variable.shape)}")
        variable.assign(value)
    if top_weights:
        raise ValueError(f"{len(top_weights)} top-layer weights have no place in the full "
                         f"model, e.g. {next(iter(top_weights))}")
    for layer in full.layers:
        if layer is encoder or not layer.weights:
            continue
        try:
            source = trained.get_layer(layer.name)
        except ValueError:
            raise ValueError(f"the trained model has no layer {layer.name!r}") from None
        layer.set_weights(source.get_weights())
    return full


def exporter(full_model_fn, prefix):
    """``export(trained, wrap=None)``: the plain model of ``full_model_fn`` (as the algorithm
    wraps a task model: ``wrap``, e.g. FedCB's frozen head) with :func:`graft`'s weights from
    a trained split model and the prefix model ``prefix``
    (:attr:`tffre.runner.TaskModel.export`)."""
    def export(trained, wrap=None):
        full = (wrap or (lambda fn: fn))(full_model_fn)()
        return graft(full, trained, prefix.get_layer("encoder"))
    return export


def _encoder_key(name):
    """A Transformers variable's name from its main layer on ("bert/embeddings/...")."""
    parts = name.split(":")[0].split("/")
    for anchor in ("embeddings", "encoder", "pooler"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor):])
    return "/".join(parts)


#: The traced inference step of each prefix model (kept as long as the model lives).
_STEPS = weakref.WeakKeyDictionary()


def with_hidden(x, hidden):
    """A split model's input: ``x`` (a dict of arrays, or the one array named "inputs")
    plus the cached prefix activations ``hidden``."""
    if isinstance(x, dict):
        return {**x, HIDDEN: hidden}
    return {HIDDEN: hidden, "inputs": x}


def activations(prefix, x, batch_size=64):
    """The frozen prefix's outputs on ``x`` (an array or a dict of arrays), float32 numpy.

    ``prefix`` is a Keras model on one batch of ``x``; it runs in inference mode, batch by
    batch, in one traced function per prefix (short batches are padded with zero rows, so
    every call reuses the trace), and the rows come back in order.
    """
    names = getattr(prefix, "input_names", None)
    if isinstance(x, dict) and names:   # only the inputs the prefix reads (ids, mask)
        x = {k: x[k] for k in names}
    n = len(tf.nest.flatten(x)[0])
    step = _STEPS.get(prefix)
    if step is None:
        model = weakref.ref(prefix)   # the step must not keep its prefix alive
        step = _STEPS[prefix] = tf.function(lambda batch: model()(batch, training=False),
                                            autograph=False)
    parts = []
    for start in range(0, n, batch_size):
        rows = min(batch_size, n - start)

        def take(a, start=start, rows=rows):
            part = np.asarray(a[start:start + rows])
            if rows < batch_size:
                pad = np.zeros((batch_size - rows,) + part.shape[1:], part.dtype)
                part = np.concatenate([part, pad])
            return part

        out = step(tf.nest.map_structure(take, x))
        parts.append(np.asarray(out, np.float32)[:rows])
    if not parts:
        shape = prefix.output_shape if hasattr(prefix, "output_shape") else (None,)
        return np.zeros((0,) + tuple(shape[1:]), np.float32)
    return np.concatenate(parts)


def fingerprint(*parts):
    """A short hash of arrays (their dtype, shape and bytes) and strings."""
    digest = hashlib.sha256()
    for part in parts:
        for leaf in tf.nest.flatten(part):
            if isinstance(leaf, str):
                digest.update(leaf.encode())
            else:
                a = np.ascontiguousarray(leaf)
                digest.update(f"{a.dtype}{a.shape}".encode())
                digest.update(a.tobytes())
    return digest.hexdigest()[:16]


class ActivationStore:
    """Cached prefix activations kept in a client's own folder, or only in memory.

    ``get(x, compute)`` returns ``compute(x)``: from ``<folder>/<hash>.npy`` when a run with
    the same prefix (``identity``) and inputs wrote it before (memory-mapped), else computed
    and written there (atomically). Without a folder, it just computes.

    Args:
      folder: the folder, or None.
      identity: what identifies the prefix (e.g. :func:`fingerprint` of its weights).
    """

    def __init__(self, folder=None, identity=""):
        self.folder = None if folder is None else os.fspath(folder)
        self.identity = identity
        self.hits = 0

    def get(self, x, compute):
        if self.folder is None:
            return compute(x)
        os.makedirs(self.folder, exist_ok=True)
        path = os.path.join(self.folder, f"{fingerprint(self.identity, x)}.npy")
        if os.path.exists(path):
            self.hits += 1
            return np.load(path, mmap_mode="r")
        value = compute(x)
        tmp = path + ".tmp.npy"
        np.save(tmp, value)
        os.replace(tmp, path)
        return value


def frozen_prefix(build, load_pretrained, seed, folder=None):
    """(prefix model, :class:`ActivationStore`): ``build()`` after
    ``tf.keras.utils.set_random_seed(seed)`` (its new rows, e.g. entity markers, are drawn
    from the seed: every client that builds it from the seed holds the same prefix), with
    ``load_pretrained(model)``'s checkpoint weights; activations kept in ``folder`` or memory."""
    tf.keras.utils.set_random_seed(seed)
    prefix = build()
    load_pretrained(prefix)
    return prefix, ActivationStore(folder, fingerprint(prefix.name, [w.numpy()
                                                                    for w in prefix.weights]))


def cache_clients(clients, prefix, store, batch_size=64):
    """``clients`` ({client: {split: (x, y)}}) with each input replaced by :func:`with_hidden`
    of the prefix's activations, computed client by client (each client's own examples,
    as a client would) or read from ``store``. Prints what it did."""
    import time
    start, rows = time.perf_counter(), 0
    out = {}
    for cid, splits in clients.items():
        out[cid] = {}
        for split, (x, y) in splits.items():
            hidden = store.get(x, lambda x: activations(prefix, x, batch_size))
            out[cid][split] = (with_hidden(x, hidden), y)
            rows += len(y)
    where = f" in {store.folder} ({store.hits} read back)" if store.folder else " (memory)"
    print(f"frozen prefix: activations of {rows} examples over {len(clients)} clients in "
          f"{time.perf_counter() - start:.0f} s{where}")
    return out
