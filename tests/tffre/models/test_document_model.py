"""The document-level RE model (FedLCC Eq. 1-13) against numpy transcriptions of the equations."""

import json

import numpy as np
import pytest
import tensorflow as tf

from tiny_documents import document
from tiny_encoder import VOCAB, make_encoder_folder
from tffre.models.document_model import (DocRELoss, DocREModelConfig, GroupedBilinear, build_docre_model,
                                docre_config_for, docre_loss, entity_attention, entity_embeddings,
                                load_pretrained_encoder, localized_context,
                                model_inputs, pack_targets, predict_relations,
                                process_long_input, unpack_targets)
from tffre.text.document_features import DocREFeaturizer


# ---------------------------------------------------------------------- numpy references

def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_pair_features(hidden, attention, mention_pos, entity_mentions, pairs):
    """ATLOP's get_hrt, loop by loop: (h_s, h_o, c) per pair, zeros on padded pairs."""
    b, P = pairs.shape[:2]
    d, heads, L = hidden.shape[-1], attention.shape[1], hidden.shape[1]
    h_s, h_o, ctx = (np.zeros((b, P, d)) for _ in range(3))
    for i in range(b):
        embs, atts = [], []
        for row in entity_mentions[i]:
            where = [mention_pos[i, m] for m in row if m >= 0 and mention_pos[i, m] >= 0]
            if where:
                stack = hidden[i, where]                                  # [n, d]
                top = stack.max(axis=0)
                embs.append(top + np.log(np.exp(stack - top).sum(axis=0)))  # Eq. 2
                atts.append(attention[i][:, where].mean(axis=1))          # [heads, L]
            else:
                embs.append(np.zeros(d))
                atts.append(np.zeros((heads, L)))
        for p, (s, o) in enumerate(pairs[i]):
            if s < 0:
                continue
            q = (atts[s] * atts[o]).mean(axis=0)                          # Eq. 3 (head mean)
            a = q / (q.sum() + 1e-5)                                      # Eq. 4
            h_s[i, p], h_o[i, p], ctx[i, p] = embs[s], embs[o], hidden[i].T @ a   # Eq. 5
    return h_s, h_o, ctx


def np_process_long_input(encode, ids, mask, window, start, end):
    """ATLOP's process_long_input (utils/long_seq.py), transcribed to numpy line by line."""
    n, c = ids.shape
    start, end = np.array(start), np.array(end)
    ls, le = len(start), len(end)
    new_ids, new_mask, num_seg = [], [], []
    seq_len = mask.sum(1).astype(int).tolist()
    for i, l_i in enumerate(seq_len):
        if l_i <= window:
            new_ids.append(ids[i, :window])
            new_mask.append(mask[i, :window])
            num_seg.append(1)
        else:
            new_ids += [np.concatenate([ids[i, :window - le], end]),
                        np.concatenate([start, ids[i, l_i - window + ls:l_i]])]
            new_mask += [mask[i, :window], mask[i, l_i - window:l_i]]
            num_seg.append(2)
    mask = np.stack(new_mask)               # as in ATLOP: from here on, the windows' masks
    out, att = (np.asarray(t) for t in encode(np.stack(new_ids), mask))
    d, heads = out.shape[-1], att.shape[1]
    i, outs, atts = 0, [], []
    for n_s, l_i in zip(num_seg, seq_len):
        if n_s == 1:
            o = np.zeros((c, d))
            o[:window] = out[i]
            a = np.zeros((heads, c, c))
            a[:, :window, :window] = att[i]
        else:
            o1, o2 = np.zeros((c, d)), np.zeros((c, d))
            m1, m2 = np.zeros(c), np.zeros(c)
            a1, a2 = np.zeros((heads, c, c)), np.zeros((heads, c, c))
            o1[:window - le] = out[i][:window - le]
            m1[:window - le] = mask[i][:window - le]
            a1[:, :window - le, :window - le] = att[i][:, :window - le, :window - le]
            lo = l_i - window + ls
            o2[lo:l_i] = out[i + 1][ls:]
            m2[lo:l_i] = mask[i + 1][ls:]
            a2[:, lo:l_i, lo:l_i] = att[i + 1][:, ls:, ls:]
            o = (o1 + o2) / (m1 + m2 + 1e-10)[:, None]
            a = a1 + a2
            a = a / (a.sum(-1, keepdims=True) + 1e-10)
        outs.append(o)
        atts.append(a)
        i += n_s
    return np.stack(outs), np.stack(atts)


def fake_encoder(calls):
    """A deterministic stand-in encoder: features of the token ids and window positions, and a
    masked softmax attention whose heads differ."""
    def encode(ids, mask):
        x = tf.cast(ids, tf.float32)
        calls.append(x.shape[0])   # None when traced
        pos = tf.cast(tf.range(tf.shape(x)[1]), tf.float32)[None] + 0.0 * x
        hidden = tf.stack([x, pos, x * pos / 10.0], axis=-1)
        scale = tf.constant([1.0, -2.0])[None, :, None, None]
        scores = 0.01 * scale * x[:, None, :, None] * x[:, None, None, :] + 0.1 * pos[:, None, None]
        scores += (1.0 - tf.cast(mask, tf.float32))[:, None, None, :] * -1e4
        return hidden, tf.nn.softmax(scores, axis=-1)
    return encode


# ---------------------------------------------------------------------- pooling and context

RNG = np.random.RandomState(0)
HIDDEN = (2.0 * RNG.randn(2, 6, 3)).astype(np.float32)
ATTENTION = np_softmax(RNG.randn(2, 2, 6, 6)).astype(np.float32)
MENTION_POS = np.array([[1, 3, 4, -1], [2, 5, -1, -1]], np.int32)        # doc 0 row 3: truncated
ENTITY_MENTIONS = np.array([[[0, 2, -1], [1, -1, -1], [3, -1, -1]],      # entity 2: none left
                            [[0, -1, -1], [1, -1, -1], [-1, -1, -1]]], np.int32)
PAIRS = np.array([[[0, 1], [1, 0], [0, 2], [-1, -1]],
                  [[0, 1], [1, 0], [-1, -1], [-1, -1]]], np.int32)


def test_entity_embeddings_are_logsumexp_over_mentions():
    got = entity_embeddings(HIDDEN, MENTION_POS, ENTITY_MENTIONS).numpy()
    h_s, h_o, _ = np_pair_features(HIDDEN, ATTENTION, MENTION_POS, ENTITY_MENTIONS, PAIRS)
    np.testing.assert_allclose(got[0, 0], np.log(np.exp(HIDDEN[0, [1, 4]]).sum(axis=0)),
                               rtol=1e-5)
    np.testing.assert_allclose(got[0, 1], HIDDEN[0, 3], rtol=1e-6)   # one mention: itself
    np.testing.assert_array_equal(got[0, 2], 0.0)                    # no mention left
    np.testing.assert_array_equal(got[1, 2], 0.0)                    # padded entity
    np.testing.assert_allclose(got[0, PAIRS[0, :3, 0]], h_s[0, :3], rtol=1e-5)
    np.testing.assert_allclose(got[1, PAIRS[1, :2, 1]], h_o[1, :2], rtol=1e-5)


def test_localized_context_matches_eq_3_to_5():
    entity_att = entity_attention(ATTENTION, MENTION_POS, ENTITY_MENTIONS)
    np.testing.assert_allclose(entity_att[0, 0], ATTENTION[0][:, [1, 4]].mean(axis=1),
                               rtol=1e-6)
    got = localized_context(HIDDEN, entity_att, PAIRS).numpy()
    _, _, want = np_pair_features(HIDDEN, ATTENTION, MENTION_POS, ENTITY_MENTIONS, PAIRS)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.abs(got[0, :2]).min() > 0 and (got[0, 2:] == 0).all()  # entity 2 / pad: zero


def test_pooling_gradients_are_finite_with_empty_entities():
    hidden = tf.Variable(HIDDEN)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(entity_embeddings(hidden, MENTION_POS, ENTITY_MENTIONS) ** 2)
    grad = tape.gradient(loss, hidden).numpy()
    assert np.isfinite(grad).all() and np.abs(grad).sum() > 0


# ---------------------------------------------------------------------- grouped bilinear

def test_grouped_bilinear_is_eq_10():
    k, g, units = 3, 4, 2
    layer = GroupedBilinear(units, num_groups=k, group_size=g)
    z_s, z_o = RNG.randn(2, 5, k * g).astype(np.float32), RNG.randn(2, 5, k * g).astype(np.float32)
    got = layer([z_s, z_o]).numpy()
    kernel, bias = (w.numpy() for w in layer.weights)
    assert kernel.shape == (k * g * g, units) and bias.shape == (units,)
    s, o = z_s.reshape(2, 5, k, g), z_o.reshape(2, 5, k, g)
    w = kernel.reshape(k, g, g, units)                        # w[i, :, :, r] = W_r^i
    want = np.einsum("bpkx,kxyr,bpky->bpr", s, w, o) + bias   # Σ_i z_s^iᵀ W_r^i z_o^i + b_r
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    outer = (s[..., :, None] * o[..., None, :]).reshape(2, 5, k * g * g)   # ATLOP's bl
    np.testing.assert_allclose(got, outer @ kernel + bias, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------- long inputs

def window_batch(lengths, max_length, seed=1):
    rng = np.random.RandomState(seed)
    ids = np.zeros((len(lengths), max_length), np.int32)
    mask = np.zeros_like(ids)
    for i, n in enumerate(lengths):
        ids[i, :n] = rng.randint(5, 30, n)
        mask[i, :n] = 1
    return ids, mask


@pytest.mark.parametrize("start, end", [((2,), (3,)), ((0,), (2, 2))])
def test_long_inputs_are_read_as_two_windows_like_atlop(start, end):
    window, max_length = 8, 14
    ids, mask = window_batch([5, 14, 11, 8], max_length)   # short, long, long padded, = window
    calls = []
    hidden, attention = process_long_input(fake_encoder(calls), ids, mask, window, start, end)
    assert calls == [6]                                    # one call: 4 first + 2 second windows
    want_h, want_a = np_process_long_input(fake_encoder([]), ids, mask, window, start, end)
    np.testing.assert_allclose(hidden.numpy(), want_h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(attention.numpy(), want_a, rtol=1e-5, atol=1e-6)
    # Document 2 (11 tokens): window 1 keeps [0, 8 - len(end)), window 2 starts at 11 - 8 = 3
    # and keeps [3 + len(start), 11); over the overlap the window positions p and p - 3 average.
    lo, hi = 3 + len(start), window - len(end)
    p = np.arange(lo, hi)
    np.testing.assert_allclose(hidden.numpy()[2, lo:hi, 1], (p + (p - 3)) / 2, rtol=1e-6)
    np.testing.assert_allclose(hidden.numpy()[2, :11, 0], ids[2, :11], rtol=1e-6)
    np.testing.assert_allclose(attention.numpy()[2, :, :11].sum(-1), 1.0, rtol=1e-5)


def test_long_input_windows_trace_and_handle_batches_without_long_documents():
    window, max_length = 8, 14
    encode = fake_encoder([])
    run = tf.function(lambda i, m: process_long_input(encode, i, m, window, (2,), (3,)),
                      input_signature=[tf.TensorSpec((None, max_length), tf.int32)] * 2)
    for lengths in ([5, 14, 11], [3, 8]):
        ids, mask = window_batch(lengths, max_length)
        hidden, attention = run(ids, mask)
        want_h, want_a = np_process_long_input(encode, ids, mask, window, (2,), (3,))
        np.testing.assert_allclose(hidden.numpy(), want_h, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(attention.numpy(), want_a, rtol=1e-5, atol=1e-6)
    short = window_batch([5, 7], 8)
    calls = []
    hidden, _ = process_long_input(fake_encoder(calls), *short, window, (2,), (3,))
    assert calls == [2] and hidden.shape == (2, 8, 3)       # max_length <= window: one pass


# ---------------------------------------------------------------------- losses

def test_docre_loss_bce_and_softmax_against_numpy():
    labels = np.array([[[1, 0], [0, 0], [1, 1]], [[0, 1], [1, 0], [0, 0]]], np.int32)
    mask = np.array([[1, 1, 1], [1, 0, 0]], np.int32)
    logits = RNG.randn(2, 3, 2).astype(np.float32)
    p = 1.0 / (1.0 + np.exp(-logits))
    per = -(labels * np.log(p) + (1 - labels) * np.log(1 - p)).sum(-1)     # Eq. 11
    np.testing.assert_allclose(docre_loss(labels, logits, mask, "bce"),
                               (per * mask).sum() / mask.sum(), rtol=1e-5)
    logits3 = RNG.randn(2, 3, 3).astype(np.float32)
    target = np.concatenate([1 - labels.max(-1, keepdims=True), labels], -1).astype(float)
    target /= target.sum(-1, keepdims=True)   # [NR, r1, r2]: NR alone, or the relations shared
    per = -(target * np.log(np_softmax(logits3))).sum(-1)
    np.testing.assert_allclose(docre_loss(labels, logits3, mask, "softmax"),
                               (per * mask).sum() / mask.sum(), rtol=1e-5)
    assert float(docre_loss(labels, logits, np.zeros_like(mask), "bce")) == 0.0
    with pytest.raises(ValueError, match="kind must be one of"):
        docre_loss(labels, logits, mask, "focal")


def test_docre_keras_loss_on_packed_targets_is_docre_loss():
    labels = (RNG.rand(3, 4, 2) < 0.4).astype(np.int32)
    mask = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], np.int32)
    labels *= mask[..., None]
    y = pack_targets(labels, mask)
    assert y.dtype == np.float32 and y.shape == (3, 4, 3)
    back_labels, back_mask = unpack_targets(y)
    np.testing.assert_array_equal(back_labels, labels)
    np.testing.assert_array_equal(back_mask, mask)
    for kind, width in (("bce", 2), ("softmax", 3)):
        logits = RNG.randn(3, 4, width).astype(np.float32)
        loss = DocRELoss(kind)
        np.testing.assert_allclose(loss(y, logits), docre_loss(labels, logits, mask, kind),
                                   rtol=1e-6)
        # Serializable, and Keras' per-example form ("none") still gives the pooled mean.
        again = DocRELoss.from_config({**loss.get_config(), "reduction": "none"})
        assert again.kind == kind
        np.testing.assert_allclose(again(y, logits), loss(y, logits), rtol=1e-6)
        restored = tf.keras.losses.deserialize(tf.keras.losses.serialize(loss))
        assert isinstance(restored, DocRELoss) and restored.kind == kind
    np.testing.assert_array_equal(DocRELoss().row_mask(y), mask)
    with pytest.raises(ValueError, match="pair_mask"):
        pack_targets(labels, mask[:, :3])
    with pytest.raises(ValueError, match="kind"):
        DocRELoss("focal")


def test_predict_relations():
    logits = np.array([[0.3, -2.0], [-0.1, 4.0]], np.float32)
    assert predict_relations(logits, "bce").numpy().tolist() == [[1, 0], [0, 1]]
    assert predict_relations(logits, "bce", threshold=0.6).numpy().tolist() == [[0, 0], [0, 1]]
    three = np.array([[2.0, 1.0, 0.0], [0.0, 1.0, 3.0], [0.0, 2.0, 1.0]], np.float32)
    assert predict_relations(three, "softmax").numpy().tolist() == [[0, 0], [0, 1], [1, 0]]


# ---------------------------------------------------------------------- the tiny model

MAX_LENGTH, WINDOW = 48, 32


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_encoder_folder(str(tmp_path_factory.mktemp("docre_enc")), weights="tf",
                               vocab=VOCAB + ["*"])


LONG = "the patient was given morphine for his fever . " * 5 + "no history of diabetes ."
DOCS = [
    document("1", "the patient was given aspirin for his headache .",
         [("aspirin", "Chemical", "C1", 0), ("headache", "Disease", "D1", 0)], [("C1", "D1")]),
    document("2", "her chest pain improved after morphine .",
         [("chest pain", "Disease", "D2", 0), ("morphine", "Chemical", "C2", 0)], []),
    document("3", "a severe cough and fever with diabetes after aspirin .",
         [("cough", "Disease", "D3", 0), ("fever", "Disease", "D4", 0),
          ("diabetes", "Disease", "D5", 0), ("aspirin", "Chemical", "C1", 0)],
         [("C1", "D4")]),
    # Longer than one window (32) and truncated at 48: "fever" keeps a mention in each window
    # and loses its 5th, "diabetes" loses its only mention (a zero embedding, as in ATLOP).
    document("4", LONG, [("morphine", "Chemical", "C2", 0), ("fever", "Disease", "D4", 0),
                     ("fever", "Disease", "D4", 3), ("fever", "Disease", "D4", 4),
                     ("diabetes", "Disease", "D5", 0)],
         [("C2", "D4")]),
]


@pytest.fixture(scope="module")
def batch(folder):
    feat = DocREFeaturizer(folder[0], ["CID"], max_length=MAX_LENGTH, max_mentions=6,
                           max_entities=4, max_mentions_per_entity=3, max_pairs=12)
    out = feat.encode(DOCS)
    lengths = out["attention_mask"].sum(1)
    assert lengths[:3].max() <= WINDOW < lengths[3] == MAX_LENGTH
    assert feat.last_stats["truncated_mentions"] == 2      # the 5th "fever", "diabetes"
    return feat, out


def make_model(folder, feat, **kwargs):
    kwargs = {"window": WINDOW, "group_size": 4, "num_groups": 3, **kwargs}
    return build_docre_model(docre_config_for(feat, folder[0], **kwargs))


def test_outputs_and_their_wiring(folder, batch):
    feat, out = batch
    model = make_model(folder, feat, window=MAX_LENGTH)            # one window: no split
    assert sorted(i.name for i in model.inputs) == sorted(
        ["input_ids", "attention_mask", "mention_pos", "entity_mentions", "pairs"])
    result = model(model_inputs(out), training=False)
    assert sorted(result) == ["context", "features", "logits"]
    assert result["logits"].shape == (4, 12, 1) and result["context"].shape == (4, 12, 32)
    encoded = model.get_layer("encoder")(input_ids=out["input_ids"],
                                         attention_mask=out["attention_mask"],
                                         output_attentions=True, training=False)
    hidden, attention = encoded.last_hidden_state.numpy(), encoded.attentions[-1].numpy()
    h_s, h_o, ctx = np_pair_features(hidden, attention, out["mention_pos"],
                                     out["entity_mentions"], out["pairs"])
    np.testing.assert_allclose(result["context"].numpy(), ctx, rtol=1e-4, atol=1e-5)
    wh, bh = model.get_layer("head_extractor").get_weights()
    wt, bt = model.get_layer("tail_extractor").get_weights()
    z_s = np.tanh(np.concatenate([h_s, ctx], -1) @ wh + bh)            # Eq. 6
    z_o = np.tanh(np.concatenate([h_o, ctx], -1) @ wt + bt)            # Eq. 7
    kernel, bias = model.get_layer("bilinear").get_weights()
    s, o = z_s.reshape(4, 12, 3, 4), z_o.reshape(4, 12, 3, 4)
    logits = np.einsum("bpkx,kxyr,bpky->bpr", s, kernel.reshape(3, 4, 4, 1), o) + bias
    logits *= out["pair_mask"][..., None]
    np.testing.assert_allclose(result["logits"].numpy(), logits, rtol=1e-4, atol=1e-5)
    # "features": the classifier's input [z_s; z_o], what MOON contrasts.
    np.testing.assert_allclose(result["features"].numpy(), np.concatenate([z_s, z_o], -1),
                               rtol=1e-4, atol=1e-5)


def test_windowed_model_matches_atlop_and_the_single_window_model(folder, batch):
    feat, out = batch
    single = make_model(folder, feat, window=MAX_LENGTH)
    windowed = make_model(folder, feat)
    assert "long_input_split" in [layer.name for layer in windowed.layers]
    windowed.set_weights(single.get_weights())
    x = model_inputs(out)
    got = windowed(x, training=False)
    ref = single(x, training=False)
    for key in ("logits", "context"):                      # short documents: the same
        np.testing.assert_allclose(got[key].numpy()[:3], ref[key].numpy()[:3],
                                   rtol=1e-4, atol=1e-5)
    encoder = windowed.get_layer("encoder")

    def encode(ids, mask):
        res = encoder(input_ids=ids, attention_mask=mask, output_attentions=True,
                      training=False)
        return res.last_hidden_state.numpy(), res.attentions[-1].numpy()

    hidden, attention = np_process_long_input(encode, out["input_ids"], out["attention_mask"],
                                              WINDOW, feat.start_tokens, feat.end_tokens)
    _, _, ctx = np_pair_features(hidden, attention, out["mention_pos"], out["entity_mentions"],
                                 out["pairs"])
    np.testing.assert_allclose(got["context"].numpy(), ctx, rtol=1e-4, atol=1e-5)


def test_adam_steps_reduce_the_loss_with_finite_gradients(folder, batch):
    feat, out = batch
    model = make_model(folder, feat)
    x, labels, mask = model_inputs(out), out["labels"], out["pair_mask"]
    optimizer = tf.keras.optimizers.Adam(3e-3)

    @tf.function
    def step(x, labels, mask):
        with tf.GradientTape() as tape:
            loss = docre_loss(labels, model(x, training=True)["logits"], mask, "bce")
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss, grads

    def evaluate():
        return float(docre_loss(labels, model(x, training=False)["logits"], mask, "bce"))

    before = evaluate()
    _, grads = step(x, labels, mask)
    assert all(g is not None for g in grads)
    assert all(np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)
    for _ in range(7):
        step(x, labels, mask)
    after = evaluate()
    assert after < 0.8 * before, (before, after)
    frozen = [v.name for v in model.non_trainable_variables]
    assert frozen and all("pooler" in name for name in frozen)


def test_softmax_head_and_tf_data_batches(folder, batch):
    feat, out = batch
    model = make_model(folder, feat, loss="softmax")
    assert model.get_layer("bilinear").get_weights()[0].shape == (3 * 4 * 4, 2)
    # Batches of 3 and 1: the first has no long document (no second window: an empty gather,
    # whose gradient TF 2.14 gets wrong with batch_dims), the second only the long one.
    for b in tf.data.Dataset.from_tensor_slices(out).batch(3):
        with tf.GradientTape() as tape:
            logits = model(model_inputs(b), training=True)["logits"]
            loss = docre_loss(b["labels"], logits, b["pair_mask"], "softmax")
        assert logits.shape[1:] == (12, 2) and np.isfinite(float(loss))
        grads = tape.gradient(loss, model.trainable_variables)
        assert all(np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)
        assert predict_relations(logits, "softmax").shape[1:] == (12, 1)


def test_pretrained_weights_load_into_the_encoder(folder, batch):
    feat, out = batch
    model = make_model(folder, feat)
    assert load_pretrained_encoder(model, folder[0]) is model
    ours = {v.name.split("/", 1)[1]: v.numpy() for v in model.get_layer("encoder").weights}
    for v in folder[1].weights:
        np.testing.assert_array_equal(ours[v.name.split("/", 1)[1]], v.numpy())


def test_config_round_trips_and_validates(folder):
    cfg = DocREModelConfig(folder[0], num_relations=2, loss="softmax", num_layers=1,
                           start_tokens=[2], end_tokens=(3,))
    assert cfg.emb_size == 768 and cfg.num_outputs == 3 and cfg.start_tokens == (2,)
    assert DocREModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="loss must be one of"):
        DocREModelConfig(folder[0], 1, loss="focal")
    with pytest.raises(ValueError, match="exceeds two windows"):
        DocREModelConfig(folder[0], 1, max_length=1025)
    with pytest.raises(ValueError, match="unknown DocREModelConfig field"):
        DocREModelConfig.from_dict({**cfg.to_dict(), "emb_size": 3})
    with pytest.raises(ValueError, match="max_position_embeddings"):
        build_docre_model(DocREModelConfig(folder[0], 1, max_length=200, window=200))
    # Window tokens not given: read from the folder's tokenizer ([CLS] = 2, [SEP] = 3).
    model = build_docre_model(DocREModelConfig(folder[0], 1, max_length=40, window=32,
                                               group_size=4, num_groups=2))
    split = model.get_layer("long_input_split")
    assert (split.start_tokens, split.end_tokens) == ((2,), (3,))
