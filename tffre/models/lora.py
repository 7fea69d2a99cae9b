"""LoRA adapters on a transformer's projections (Hu et al. 2021, "LoRA: Low-Rank Adaptation of
Large Language Models", Eq. 3).

A frozen projection ``W₀`` (with its bias ``b``) gains a trainable low-rank update::

    h = x W₀ + b + (α / r) · (x A) B          A: [d_in, r], B: [r, d_out]

(the paper writes ``h = W₀x + ΔWx = W₀x + BAx`` with column vectors; Keras kernels are
``[d_in, d_out]``, so our ``A`` and ``B`` are the paper's transposed). ``B`` starts at zero,
so training starts from the pretrained model exactly. ``A`` starts Gaussian (the paper:
"a random Gaussian initialization for A"; std 1/r, as Hugging Face PEFT reads it),
or ``init="kaiming"``: He-uniform with a = √5, what the authors' ``loralib`` does for a
``Linear``. The update is scaled by α/r; with ``alpha`` None, α = r (the paper sets α to the
first r it tries and does not tune it). No dropout on the adapter's input.

:class:`LoRADense` is a Keras ``Dense`` whose own kernel and bias are non-trainable and
whose ``lora_a`` and ``lora_b`` train. :func:`add_lora` swaps it in for the named
projections of BERT-family layers before they are built, so the kernel and bias keep their
checkpoint names (``.../attention/self/query/kernel``) and load as usual;
:func:`merged_kernel` folds the update into a plain kernel, for a saved model without
adapters.
"""

import numpy as np
import tensorflow as tf

#: ``--lora-targets`` names and the attribute path of that projection in a BERT-family layer
#: (BERT, RoBERTa, ELECTRA share these names in Transformers' TF code).
TARGETS = {
    "query": ("attention", "self_attention", "query"),
    "key": ("attention", "self_attention", "key"),
    "value": ("attention", "self_attention", "value"),
    "attention_output": ("attention", "dense_output", "dense"),
    "intermediate": ("intermediate", "dense"),
    "output": ("bert_output", "dense"),
}
#: The paper's choice (Hu et al. 2021, Sect. 7.1: adapting W_q and W_v).
DEFAULT_TARGETS = ("query", "value")
INITS = ("gaussian", "kaiming")


def check_targets(targets):
    """``targets`` as a tuple of :data:`TARGETS` names; ValueError naming a wrong one."""
    targets = tuple(targets)
    unknown = [t for t in targets if t not in TARGETS]
    if unknown or not targets:
        raise ValueError(f"LoRA targets must be among {', '.join(TARGETS)}, got "
                         f"{', '.join(targets) or 'none'}")
    return targets


@tf.keras.utils.register_keras_serializable(package="tffre")
class LoRADense(tf.keras.layers.Dense):
    """A ``Dense`` with a frozen kernel and bias and a trainable rank-``rank`` update (Eq. 3).

    Args:
      rank: r.
      alpha: α (the update is scaled by α / r); None: α = r.
      init: "gaussian" (the paper) or "kaiming" (loralib's ``Linear``) for ``lora_a``.
      **kwargs: ``Dense``'s arguments.
    """

    def __init__(self, units, rank=8, alpha=None, init="gaussian", **kwargs):
        super().__init__(units, **kwargs)
        if isinstance(rank, bool) or int(rank) != rank or rank < 1:
            raise ValueError(f"LoRA rank must be a positive integer, got {rank!r}")
        if init not in INITS:
            raise ValueError(f"LoRA init must be one of {', '.join(INITS)}, got {init!r}")
        self.rank = int(rank)
        self.alpha = float(rank if alpha is None else alpha)
        self.init = init

    @property
    def scale(self):
        """α / r."""
        return self.alpha / self.rank

    def build(self, input_shape):
        """The frozen kernel and bias (checkpoint names), then ``lora_a`` and ``lora_b``."""
        last = tf.compat.dimension_value(tf.TensorShape(input_shape)[-1])
        self.input_spec = tf.keras.layers.InputSpec(min_ndim=2, axes={-1: last})
        self.kernel = self.add_weight("kernel", shape=[last, self.units],
                                      initializer=self.kernel_initializer, dtype=self.dtype,
                                      trainable=False)
        self.bias = self.add_weight("bias", shape=[self.units], initializer=self.bias_initializer,
                                    dtype=self.dtype, trainable=False) if self.use_bias else None
        if self.init == "gaussian":
            a_init = tf.keras.initializers.RandomNormal(stddev=1.0 / self.rank)
        else:   # torch's kaiming_uniform_(a=√5) on [r, d_in]: U(±1/√d_in)
            a_init = tf.keras.initializers.RandomUniform(-1.0 / np.sqrt(last), 1.0 / np.sqrt(last))
        self.lora_a = self.add_weight("lora_a", shape=[last, self.rank], initializer=a_init,
                                      dtype=self.dtype, trainable=True)
        self.lora_b = self.add_weight("lora_b", shape=[self.rank, self.units],
                                      initializer="zeros", dtype=self.dtype, trainable=True)
        self.built = True

    def call(self, inputs):
        base = super().call(inputs)     # x W₀ + b (Dense's own arithmetic; no activation)
        low = tf.tensordot(tf.tensordot(tf.cast(inputs, self.lora_a.dtype), self.lora_a,
                                        [[-1], [0]]), self.lora_b, [[-1], [0]])
        return base + self.scale * low

    def get_config(self):
        return {**super().get_config(), "rank": self.rank, "alpha": self.alpha,
                "init": self.init}


def merged_kernel(layer):
    """W₀ + (α / r) A B of a :class:`LoRADense` (numpy): the kernel of the same map without
    an adapter."""
    return layer.kernel.numpy() + layer.scale * (layer.lora_a.numpy() @ layer.lora_b.numpy())


def _parent_and_name(hf_layer, path):
    parent = hf_layer
    for name in path[:-1]:
        parent = getattr(parent, name, None)
        if parent is None:
            break
    if parent is None or not isinstance(getattr(parent, path[-1], None), tf.keras.layers.Dense):
        raise ValueError(f"{type(hf_layer).__name__} has no Dense at {'.'.join(path)}: LoRA "
                         f"targets need a BERT-family encoder (BERT, RoBERTa, ELECTRA)")
    return parent, path[-1]


def add_lora(hf_layers, targets=DEFAULT_TARGETS, rank=8, alpha=None, init="gaussian"):
    """Puts a :class:`LoRADense` in place of each target projection of every (unbuilt)
    Hugging Face transformer layer in ``hf_layers``, and freezes everything else in them
    (LayerNorms included), as LoRA trains only the adapters. Returns the new layers."""
    added = []
    for hf_layer in hf_layers:
        if hf_layer.built:
            raise ValueError("add LoRA adapters before the layers are built")
        for target in check_targets(targets):
            parent, name = _parent_and_name(hf_layer, TARGETS[target])
            dense = getattr(parent, name)
            if dense.activation not in (None, tf.keras.activations.linear):
                raise ValueError(f"LoRA target {target} has an activation inside its Dense")
            config = dense.get_config()
            config.pop("activation", None)
            lora = LoRADense(rank=rank, alpha=alpha, init=init, **config)
            setattr(parent, name, lora)
            added.append(lora)
    for hf_layer in hf_layers:
        for leaf in _leaves(hf_layer):
            if not isinstance(leaf, LoRADense):
                leaf.trainable = False
    return added


def _leaves(layer):
    """The layers under ``layer`` that have no sublayers."""
    children = [child for child in layer._flatten_layers(include_self=False, recursive=False)]
    if not children:
        return [layer]
    return [leaf for child in children for leaf in _leaves(child)]
