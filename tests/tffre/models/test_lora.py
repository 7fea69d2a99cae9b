"""LoRA adapters (Hu et al. 2021, Eq. 3) against a numpy transcription of the forward pass."""

import numpy as np
import pytest
import tensorflow as tf

from tffre.models import lora
from tffre import tasks


def numpy_lora(x, w0, b, a, bb, alpha, r):
    """h = x W₀ + b + (α / r) (x A) B, written out in numpy (rows are examples)."""
    return x @ w0 + b + (alpha / r) * ((x @ a) @ bb)


@pytest.mark.parametrize("alpha", [None, 16.0])
def test_lora_dense_forward_matches_numpy(alpha):
    layer = lora.LoRADense(5, rank=3, alpha=alpha)
    x = np.random.RandomState(0).normal(size=(2, 4, 6)).astype(np.float32)
    layer(x)
    rng = np.random.RandomState(1)
    values = [rng.normal(size=v.shape).astype(np.float32)
              for v in (layer.kernel, layer.bias, layer.lora_a, layer.lora_b)]
    for v, value in zip((layer.kernel, layer.bias, layer.lora_a, layer.lora_b), values):
        v.assign(value)
    want = numpy_lora(x, *values, alpha=3 if alpha is None else alpha, r=3)
    np.testing.assert_allclose(layer(x).numpy(), want, rtol=1e-5, atol=1e-5)
    # The merged kernel is the same map without an adapter.
    merged = lora.merged_kernel(layer)
    np.testing.assert_allclose(x @ merged + values[1], want, rtol=1e-5, atol=1e-5)


def test_lora_starts_at_the_base_map_and_trains_only_the_adapters():
    layer = lora.LoRADense(4, rank=2)
    x = np.random.RandomState(0).normal(size=(3, 5)).astype(np.float32)
    out = layer(x).numpy()
    np.testing.assert_allclose(out, x @ layer.kernel.numpy() + layer.bias.numpy(), atol=1e-6)
    assert [v.name.split("/")[-1] for v in layer.trainable_weights] == ["lora_a:0", "lora_b:0"]
    assert [v.name.split("/")[-1] for v in layer.non_trainable_weights] == ["kernel:0", "bias:0"]
    assert not np.any(layer.lora_b.numpy())            # B = 0 (the paper)
    assert np.any(layer.lora_a.numpy())


def test_lora_inits_differ_as_documented():
    gauss = lora.LoRADense(8, rank=4, init="gaussian", kernel_initializer="zeros")
    gauss.build((None, 400))
    assert abs(gauss.lora_a.numpy().std() - 1 / 4) < 0.02          # std 1/r
    kaiming = lora.LoRADense(8, rank=4, init="kaiming")
    kaiming.build((None, 400))
    assert np.abs(kaiming.lora_a.numpy()).max() <= 1 / np.sqrt(400) + 1e-7


def test_lora_rejects_bad_settings():
    with pytest.raises(ValueError, match="rank"):
        lora.LoRADense(3, rank=0)
    with pytest.raises(ValueError, match="init"):
        lora.LoRADense(3, rank=2, init="uniform")
    with pytest.raises(ValueError, match="among"):
        lora.check_targets(["query", "keys"])


def test_the_flag_lists_the_layer_targets():
    assert tasks.LORA_TARGETS == tuple(lora.TARGETS)


def test_add_lora_puts_adapters_in_bert_layers_and_freezes_the_rest():
    from transformers import BertConfig, TFBertModel
    config = BertConfig(hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=12, vocab_size=20)
    model = TFBertModel(config)
    added = lora.add_lora(model.bert.encoder.layer, ("query", "intermediate"), rank=2)
    assert len(added) == 4
    model(tf.constant([[1, 2, 3]]))
    names = sorted(v.name.split("/", 3)[-1] for v in model.bert.encoder.trainable_weights)
    assert names == sorted(f"layer_._{i}/{p}/{w}:0" for i in (0, 1)
                           for p in ("attention/self/query", "intermediate/dense")
                           for w in ("lora_a", "lora_b"))
    with pytest.raises(ValueError, match="before the layers are built"):
        lora.add_lora(model.bert.encoder.layer, ("value",), rank=2)
