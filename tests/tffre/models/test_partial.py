"""A frozen, cached prefix and a trained top (tffre.models.partial) against the whole model.

The references are the full encoder's own hidden states (``output_hidden_states``) and the
plain full model: a split model must compute what the full model computes, its prefix's
activations must be the full encoder's hidden states below the top, and the saved model
(:func:`graft`) must be the plain full model with the trained weights in it.
"""

import json

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from tiny_documents import document
from tiny_encoder import VOCAB, make_encoder_folder
from tffre.models import document_model as D
from tffre.models import relation_model as R
from tffre.models.partial import (ActivationStore, PartialTraining, activations, graft,
                                  has_prefix, with_hidden)
from tffre.text.document_features import DocREFeaturizer

TOP_1 = PartialTraining(trainable_layers=1)
LORA = PartialTraining(lora_rank=2, lora_targets=("query", "value", "intermediate"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A tiny BERT folder without dropout (the split and the full model must agree)."""
    path = tmp_path_factory.mktemp("enc")
    make_encoder_folder(str(path), weights="tf", vocab=VOCAB + ["*"])
    settings = json.loads((path / "config.json").read_text())
    settings.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (path / "config.json").write_text(json.dumps(settings))
    return str(path)


@pytest.fixture(scope="module")
def packed(folder):
    tokenizer = R.RETokenizer.from_pretrained(folder, max_length=16)
    rows = [("the patient was given aspirin for headache", "aspirin", "headache"),
            ("fever and chest pain improved", "fever", "chest pain"),
            ("severe cough after morphine", "cough", "morphine"),
            ("no history of diabetes", "diabetes", "no")]
    frame = pd.DataFrame([{"text": t, "e1_start": t.index(a), "e1_end": t.index(a) + len(a),
                           "e2_start": t.index(b), "e2_end": t.index(b) + len(b),
                           "e1_type": "a", "e2_type": "b", "label": i % 2}
                          for i, (t, a, b) in enumerate(rows)])
    return tokenizer, tokenizer.encode(frame)


def split_pair(folder, tokenizer, partial, seed=3):
    """(full model, prefix, top) of one seed: the full model's new embedding rows are the
    prefix's, both hold the checkpoint, and the top's head is the full model's."""
    full_config = R.config_for(tokenizer, folder, 3, dropout=0.0)
    config = R.config_for(tokenizer, folder, 3, dropout=0.0, partial=partial)
    full = R.build_re_model(full_config)
    R.load_pretrained_encoder(full, folder)
    tf.keras.utils.set_random_seed(seed)
    prefix = R.build_re_prefix(config)
    R.load_pretrained_encoder(prefix, folder)
    top = R.build_re_model(config)
    R.load_pretrained_encoder(top, folder)
    full.get_layer("encoder").get_input_embeddings().weight.assign(
        prefix.get_layer("encoder").get_input_embeddings().weight)
    top.get_layer("classifier").set_weights(full.get_layer("classifier").get_weights())
    return full, prefix, top


@pytest.mark.parametrize("partial,first", [(TOP_1, 1), (LORA, 0)])
def test_cached_activations_are_the_frozen_layers_outputs(folder, packed, partial, first):
    tokenizer, x = packed
    full, prefix, _ = split_pair(folder, tokenizer, partial)
    want = full.get_layer("encoder")(input_ids=x[:, 0], attention_mask=x[:, 1],
                                     output_hidden_states=True,
                                     training=False).hidden_states[first].numpy()
    for batch_size in (1, 3, 64):    # the batch a client computes them in does not matter
        np.testing.assert_allclose(activations(prefix, x, batch_size), want, atol=1e-5)
    assert prefix.trainable_weights == []


@pytest.mark.parametrize("partial", [TOP_1, LORA])
def test_the_split_model_computes_the_full_model(folder, packed, partial):
    tokenizer, x = packed
    full, prefix, top = split_pair(folder, tokenizer, partial)
    assert sorted(top.input_names) == ["hidden", "inputs"]
    want = full(x, training=False)
    got = top(with_hidden(x, activations(prefix, x)), training=False)
    for key in ("features", "logits"):
        np.testing.assert_allclose(got[key].numpy(), want[key].numpy(), atol=1e-5)


def test_what_trains_top_layers_or_adapters(folder, packed):
    tokenizer, _ = packed
    _, _, top = split_pair(folder, tokenizer, TOP_1)
    names = {v.name.split("/")[2] for v in top.trainable_weights if "encoder_top" in v.name}
    assert names == {"layer_._0"}                      # the last of two layers only
    assert {v.name.split("/")[0] for v in top.trainable_weights} == {"encoder_top", "classifier"}
    _, _, lora_top = split_pair(folder, tokenizer, LORA)
    encoder = [v.name for v in lora_top.trainable_weights if "encoder_top" in v.name]
    assert len(encoder) == 2 * 3 * 2 and all("/lora_" in n for n in encoder)
    assert not any("lora_" in v.name for v in lora_top.non_trainable_weights)


@pytest.mark.parametrize("partial", [TOP_1, LORA])
def test_graft_saves_the_plain_full_model_with_the_trained_weights(folder, packed, partial):
    tokenizer, x = packed
    _, prefix, top = split_pair(folder, tokenizer, partial)
    rng = np.random.RandomState(0)
    for v in top.trainable_weights:             # "train": every trainable weight moves
        v.assign(v.numpy() + 0.05 * rng.normal(size=v.shape).astype(np.float32))
    want = top(with_hidden(x, activations(prefix, x)), training=False)["logits"].numpy()
    config = R.config_for(tokenizer, folder, 3, dropout=0.0)
    saved = graft(R.build_re_model(config), top, prefix.get_layer("encoder"))
    assert not any("lora" in v.name for v in saved.weights)
    np.testing.assert_allclose(saved(x, training=False)["logits"].numpy(), want, atol=1e-5)


def test_all_layers_without_lora_is_full_fine_tuning(folder, packed):
    tokenizer, _ = packed
    config = R.config_for(tokenizer, folder, 3, partial=PartialTraining(trainable_layers=2))
    assert not has_prefix(config)
    plain = R.build_re_model(R.config_for(tokenizer, folder, 3))
    model = R.build_re_model(config)
    assert [v.name for v in model.weights] == [v.name for v in plain.weights]
    assert not has_prefix(R.config_for(tokenizer, folder, 3, partial=PartialTraining(3)))
    assert R.REModelConfig.from_dict(
        R.config_for(tokenizer, folder, 3, partial=LORA).to_dict()).partial == LORA


def test_activation_store_reads_back_what_it_wrote(tmp_path):
    calls = []

    def compute(x):
        calls.append(1)
        return x * 2.0

    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    store = ActivationStore(tmp_path, identity="prefix-a")
    first = store.get(x, compute)
    again = ActivationStore(tmp_path, identity="prefix-a").get(x, compute)
    other = ActivationStore(tmp_path, identity="prefix-b").get(x, compute)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, other)
    assert len(calls) == 2                       # the second prefix's activations are its own
    assert ActivationStore(None).get(x, compute) is not None and len(calls) == 3


# ---------------------------------------------------------------------- documents

LONG = "the patient was given morphine for his fever . " * 4 + "no history of diabetes ."
DOCS = [
    document("1", "the patient was given aspirin for his headache .",
             [("aspirin", "Chemical", "C1", 0), ("headache", "Disease", "D1", 0)],
             [("C1", "D1")]),
    document("2", LONG, [("morphine", "Chemical", "C2", 0), ("fever", "Disease", "D4", 0),
                         ("diabetes", "Disease", "D5", 0)], [("C2", "D4")]),
]


@pytest.mark.parametrize("partial", [TOP_1, LORA])
def test_document_split_model_reads_two_windows_like_the_full_model(folder, partial):
    feat = DocREFeaturizer(folder, ["CID"], max_length=40, max_mentions=4, max_entities=3,
                           max_mentions_per_entity=2, max_pairs=4)
    out = feat.encode(DOCS)
    assert out["attention_mask"].sum(1).max() > 24        # the long document: two windows
    kwargs = dict(window=24, group_size=4, num_groups=3)
    full = D.build_docre_model(D.docre_config_for(feat, folder, **kwargs))
    D.load_pretrained_encoder(full, folder)
    config = D.docre_config_for(feat, folder, partial=partial, **kwargs)
    prefix = D.build_docre_prefix(config)
    D.load_pretrained_encoder(prefix, folder)
    top = D.build_docre_model(config)
    D.load_pretrained_encoder(top, folder)
    for name in ("head_extractor", "tail_extractor", "bilinear"):
        top.get_layer(name).set_weights(full.get_layer(name).get_weights())
    x = D.model_inputs(out)
    hidden = activations(prefix, x)
    assert hidden.shape == (2, 2, 24, 32)                  # [documents, windows, window, d]
    want = full(x, training=False)
    got = top(with_hidden(x, hidden), training=False)
    for key in ("logits", "context", "features"):
        np.testing.assert_allclose(got[key].numpy(), want[key].numpy(), atol=1e-5)
    saved = graft(D.build_docre_model(config.full()), top, prefix.get_layer("encoder"))
    np.testing.assert_allclose(saved(x, training=False)["logits"].numpy(),
                               want["logits"].numpy(), atol=1e-5)
