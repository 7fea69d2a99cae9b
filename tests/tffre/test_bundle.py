"""Model bundles: save, reload with plain Keras and with load_bundle, predict; errors."""

import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from tffre import resources
from tffre.bundle import BundleError, load_bundle, read_manifest, save_bundle
from tffre.data import imcs_dialogues as imcs
from tffre.models import LSTMConfig, logistic_regression, lstm_classifier
from tffre.text import FeatureEncoder, MedicalSegmenter, TextEncoder, Vocabulary
from tffre.text.word2vec import load_vectors

SAMPLE = resources.path("imcs_sample")
MAX_LEN = 16


@pytest.fixture(scope="module")
def imcs_bundle(tmp_path_factory):
    """An LSTM over the IMCS sample's vocabulary with random (non-initial) weights, saved."""
    splits = imcs.load_imcs(SAMPLE, verbose=False)
    texts = list(imcs.to_examples(splits["dev"], "symptom")["text"][:50])
    kv = load_vectors(os.path.join(SAMPLE, "w2v_sample.txt"))
    vocab = Vocabulary.from_vectors(kv)
    extra = tmp_path_factory.mktemp("dicts") / "extra.txt"
    extra.write_text("喘憋性支气管\n", encoding="utf-8")
    seg = MedicalSegmenter(terms=imcs.symptom_norms(splits["train"]), user_dicts=[str(extra)])
    seg.add_terms(["小儿手足口"])
    texts += ["孩子喘憋性支气管问题", "得了小儿手足口吗"]
    encoder = TextEncoder(seg, vocab, MAX_LEN)
    model = lstm_classifier(LSTMConfig(2, MAX_LEN, lstm_units=6), vocab.embedding_matrix(kv))
    rng = np.random.RandomState(7)
    model.set_weights([w + 0.3 * rng.randn(*w.shape).astype(np.float32)
                       for w in model.get_weights()])
    model.compile("adam", "sparse_categorical_crossentropy")  # the optimizer must not be saved
    folder = str(tmp_path_factory.mktemp("bundle") / "model")
    meta = {"algorithm": "FedAvgS", "dataset": "imcs_sample", "task": "symptom", "round": 3}
    assert save_bundle(folder, model, label_names=imcs.label_names("symptom"), encoder=encoder,
                       metadata=meta) == folder
    expected = model(encoder.encode(texts)).numpy()
    return {"folder": folder, "texts": texts, "expected": expected, "encoder": encoder,
            "meta": meta, "model": model}


def test_bundle_files_and_manifest(imcs_bundle):
    folder = imcs_bundle["folder"]
    assert sorted(os.listdir(folder)) == ["bundle.json", "jieba_dict.txt", "model.keras",
                                          "text_encoder.json", "vocab.txt"]
    manifest = json.loads(open(os.path.join(folder, "bundle.json"), encoding="utf-8").read())
    assert manifest["format"] == "tffre-model/1" and manifest["encoder"] == "text"
    assert manifest["label_names"] == list(imcs.label_names("symptom"))
    assert manifest["metadata"] == imcs_bundle["meta"]
    assert read_manifest(folder) == manifest
    with zipfile.ZipFile(os.path.join(folder, "model.keras")) as z:
        config = json.loads(z.read("config.json"))
    assert "compile_config" not in config       # no optimizer, no compile state
    assert "tffre" not in json.dumps(config)    # nothing but plain Keras objects


def test_plain_keras_reload_predicts_the_same(imcs_bundle):
    path = os.path.join(imcs_bundle["folder"], "model.keras")
    loaded = tf.keras.models.load_model(path)
    assert loaded.optimizer is None
    x = imcs_bundle["encoder"].encode(imcs_bundle["texts"])
    np.testing.assert_allclose(loaded(x).numpy(), imcs_bundle["expected"], atol=1e-6)


def test_load_bundle_predicts_the_same(imcs_bundle):
    bundle = load_bundle(imcs_bundle["folder"])
    assert bundle.label_names == list(imcs.label_names("symptom"))
    assert bundle.metadata == imcs_bundle["meta"] and bundle.kind == "text"
    texts = imcs_bundle["texts"]
    # The reloaded merged dictionary segments identically (user-dict and added terms included).
    assert bundle.encoder.segmenter.cut_all(texts) == imcs_bundle["encoder"].segmenter.cut_all(texts)
    assert "喘憋性支气管" in bundle.encoder.segmenter.cut(texts[-2])
    assert "小儿手足口" in bundle.encoder.segmenter.cut(texts[-1])
    probs = bundle.predict(texts)
    assert probs.shape == (len(texts), 2)
    np.testing.assert_allclose(probs, imcs_bundle["expected"], atol=1e-6)
    top = bundle.top(texts[:4], k=2)
    for row, pairs in zip(probs, top):
        # top() runs its own batch of 4: another batch shape, so the floats may differ in the
        # last bits from predict()'s on every text (seen: 6e-8 on some CPUs).
        got = [p for _, p in pairs]
        assert got == sorted(got, reverse=True)
        np.testing.assert_allclose(got, sorted(row.tolist(), reverse=True), atol=1e-6)
        if abs(row[0] - row[1]) > 1e-6:   # a near-tie may rank either way
            assert pairs[0][0] == bundle.label_names[int(np.argmax(row))]
    assert len(bundle.top(texts[:1], k=9)[0]) == 2   # k is capped at the number of labels
    assert bundle.predict([]).shape == (0, 2)


def test_fresh_process_loads_with_plain_keras(imcs_bundle):
    folder = imcs_bundle["folder"]
    np.save(os.path.join(folder, "..", "x.npy"), imcs_bundle["encoder"].encode(imcs_bundle["texts"]))
    script = ("import sys, numpy as np, tensorflow as tf\n"
              f"m = tf.keras.models.load_model({os.path.join(folder, 'model.keras')!r})\n"
              f"np.save(sys.argv[1], m(np.load({os.path.join(folder, '..', 'x.npy')!r})).numpy())\n"
              "assert 'tffre' not in sys.modules\n")
    out = os.path.join(folder, "..", "y.npy")
    proc = subprocess.run([sys.executable, "-c", script, out], capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, cwd="/",
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    np.testing.assert_allclose(np.load(out), imcs_bundle["expected"], atol=1e-6)


def test_feature_bundle_round_trip(tmp_path):
    model = logistic_regression(3, 2)
    model.set_weights([np.array([[2.0, -2.0], [0.0, 0.0], [-1.0, 1.0]], np.float32),
                       np.zeros(2, np.float32)])
    save_bundle(str(tmp_path), model, label_names=["pos", "neg"], encoder=FeatureEncoder(3))
    bundle = load_bundle(str(tmp_path))
    assert bundle.kind == "features" and bundle.metadata == {}
    rows = [[1.0, 0.0, 0.0], [0.0, 5.0, 2.0]]
    np.testing.assert_allclose(bundle.predict(rows), model(np.array(rows, np.float32)).numpy(),
                               atol=1e-6)
    assert [t[0][0] for t in bundle.top(rows)] == ["pos", "neg"]
    with pytest.raises(ValueError, match="expected 3 features"):
        bundle.predict([[1.0, 2.0]])


def test_a_saved_decision_threshold_decides_the_label(tmp_path):
    """A bundle saved with a decision rule (a run's --threshold) labels as the run scored:
    the label where its probability is above the threshold, else the most probable other;
    its ``top`` puts that label first. Hand-computed: logits (a, -a) give p(pos) =
    sigmoid(-2a)."""
    model = logistic_regression(3, 2)
    model.set_weights([np.array([[1.0, -1.0], [0.0, 0.0], [0.0, 0.0]], np.float32),
                       np.zeros(2, np.float32)])
    decision = {"label": "pos", "threshold": 0.3, "tuned_on": "dev"}
    save_bundle(str(tmp_path), model, label_names=["neg", "pos"], encoder=FeatureEncoder(3),
                metadata={"decision": decision})
    bundle = load_bundle(str(tmp_path))
    assert bundle.decision == decision
    rows = [[0.5, 0, 0], [0.25, 0, 0], [-1.0, 0, 0]]    # p(pos) 0.269, 0.378, 0.881
    probs = bundle.predict(rows)
    np.testing.assert_allclose(probs[:, 1], 1 / (1 + np.exp([1.0, 0.5, -2.0])), atol=1e-6)
    assert list(bundle.decide(probs)) == [0, 1, 1]          # the argmax would give 0, 0, 1
    top = bundle.top(rows, k=2)
    assert [[label for label, _ in t] for t in top] == [["neg", "pos"], ["pos", "neg"],
                                                        ["pos", "neg"]]
    assert top[1][0][1] == pytest.approx(1 / (1 + np.exp(0.5)), abs=1e-6)
    # Three labels: below the threshold, the most probable of the others.
    three = type(bundle)(model, bundle.encoder, ["a", "b", "c"],
                         {"decision": {"label": "b", "threshold": 0.5}})
    assert list(three.decide([[0.35, 0.4, 0.25], [0.3, 0.2, 0.5], [0.1, 0.6, 0.3]])) == [0, 2, 1]


def test_a_bad_decision_is_refused_on_save_and_on_load(tmp_path):
    model = logistic_regression(3, 2)
    with pytest.raises(ValueError, match=r"/a: metadata.decision.label must be one of "
                                         r"label_names, got '1'"):
        save_bundle(str(tmp_path / "a"), model, label_names=["neg", "pos"],
                    encoder=FeatureEncoder(3), metadata={"decision": {"label": "1",
                                                                      "threshold": 0.3}})
    assert not os.path.exists(tmp_path / "a" / "bundle.json")
    folder = save_bundle(str(tmp_path / "b"), model, label_names=["neg", "pos"],
                         encoder=FeatureEncoder(3))
    path = os.path.join(folder, "bundle.json")
    manifest = json.loads(open(path, encoding="utf-8").read())
    manifest["metadata"]["decision"] = {"label": "pos", "threshold": 1.5}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    with pytest.raises(BundleError, match=r"bundle.json: metadata.decision.threshold must be a "
                                          r"number between 0 and 1, got 1.5"):
        read_manifest(folder)


def test_label_count_must_match_the_model(tmp_path):
    with pytest.raises(ValueError, match="2 outputs but 3 label names"):
        save_bundle(str(tmp_path), logistic_regression(3, 2), label_names=["a", "b", "c"],
                    encoder=FeatureEncoder(3))
    assert not os.path.exists(tmp_path / "bundle.json")


def _one_line_error(folder, match):
    with pytest.raises(BundleError, match=match) as info:
        load_bundle(str(folder))
    assert "\n" not in str(info.value)


def test_not_a_bundle_errors(tmp_path):
    _one_line_error(tmp_path / "nowhere", "model folder not found")
    _one_line_error(tmp_path, "missing bundle.json")
    save_bundle(str(tmp_path / "b"), logistic_regression(3, 2), label_names=["a", "b"],
                encoder=FeatureEncoder(3))
    os.remove(tmp_path / "b" / "feature_encoder.json")
    _one_line_error(tmp_path / "b", "missing feature_encoder.json")
    os.remove(tmp_path / "b" / "model.keras")
    _one_line_error(tmp_path / "b", "missing model.keras")
    (tmp_path / "b" / "bundle.json").write_text("{oops")
    _one_line_error(tmp_path / "b", "bundle.json: not valid JSON")
    (tmp_path / "b" / "bundle.json").write_text('{"format": "other/2"}')
    _one_line_error(tmp_path / "b", "format is 'other/2'")


def test_missing_text_encoder_file(imcs_bundle, tmp_path):
    import shutil
    copy = shutil.copytree(imcs_bundle["folder"], tmp_path / "copy")
    os.remove(copy / "vocab.txt")
    _one_line_error(copy, "missing vocab.txt")


class _FixedLogits:
    """A stand-in document model: the given logits ``[documents, pairs, classes]``."""

    def __init__(self, logits):
        self.logits = np.asarray(logits, np.float32)

    def __call__(self, x, training=False):
        return {"logits": tf.constant(self.logits[:len(x["input_ids"])])}


def test_a_document_bundle_predicts_relations_at_its_decision(tmp_path):
    """A document model's relations (``Bundle.relations``), hand-computed from fixed logits
    over each document's candidate pairs (chemical -> disease, entities in first-mention
    order): "bce" keeps every relation whose sigmoid is above the threshold, "softmax" the
    most probable class unless it is "no relation" (class 0); padded pair rows are never
    read. The featurizer saved and loaded encodes the same arrays."""
    from tffre.bundle import Bundle
    from tffre.text.document_features import DocREFeaturizer
    from tiny_documents import document
    from tiny_encoder import VOCAB, make_encoder_folder
    folder, _ = make_encoder_folder(str(tmp_path / "enc"), vocab=VOCAB + ["*"])
    featurizer = DocREFeaturizer(folder, ["CID", "X"], max_length=32,
                                 pair_types=[("Chemical", "Disease")])
    documents = [
        document("1", "aspirin and morphine after headache",
                 [("aspirin", "Chemical", "C1", 0), ("morphine", "Chemical", "C2", 0),
                  ("headache", "Disease", "D1", 0)], [("C1", "D1")]),
        document("2", "morphine with fever", [("morphine", "Chemical", "C2", 0),
                                              ("fever", "Disease", "D2", 0)], [])]
    loaded = DocREFeaturizer.load(featurizer.save(str(tmp_path / "saved")))
    assert loaded.pair_types == featurizer.pair_types and loaded.max_length == 32
    for key, value in featurizer.encode(documents).items():
        np.testing.assert_array_equal(loaded.encode(documents)[key], value)
    assert [featurizer.pair_ids(d) for d in documents] == [[("C1", "D1"), ("C2", "D1")],
                                                           [("C2", "D2")]]

    def sig(v):
        return 1 / (1 + np.exp(-v))

    bce = [[[0.0, -2.0], [2.0, 1.0]], [[-1.0, -3.0], [5.0, 5.0]]]   # doc 2's pair 1: padding
    at = {}
    for threshold in (0.3, 0.6):
        bundle = Bundle(_FixedLogits(bce), loaded, ["CID", "X"],
                        {"decision": {"loss": "bce", "threshold": threshold}})
        at[threshold] = bundle.relations(documents)
    want = {0.3: [[("C1", "CID", "D1", sig(0.0)), ("C2", "CID", "D1", sig(2.0)),
                   ("C2", "X", "D1", sig(1.0))], []],
            0.6: [[("C2", "CID", "D1", sig(2.0)), ("C2", "X", "D1", sig(1.0))], []]}
    for threshold, got in at.items():
        assert [[f[:3] for f in facts] for facts in got] == \
            [[f[:3] for f in facts] for facts in want[threshold]]
        np.testing.assert_allclose([f[3] for facts in got for f in facts],
                                   [f[3] for facts in want[threshold] for f in facts], atol=1e-6)

    softmax = [[[2.0, 0.0, 1.0], [0.0, 1.0, 3.0]], [[0.0, 2.0, 1.0], [0.0, 9.0, 0.0]]]
    bundle = Bundle(_FixedLogits(softmax), loaded, ["CID", "X"], {"decision": {"loss": "softmax"}})
    got = bundle.relations(documents)
    assert [[f[:3] for f in facts] for facts in got] == [[("C2", "X", "D1")], [("C2", "CID", "D2")]]
    e = np.exp(1.0)
    np.testing.assert_allclose([got[0][0][3], got[1][0][3]],
                               [e ** 3 / (1 + e + e ** 3), e ** 2 / (1 + e ** 2 + e)], atol=1e-6)
    with pytest.raises(TypeError, match="is a document model"):
        bundle.predict(["aspirin"])


@pytest.mark.parametrize("decision,message", [
    (None, r"metadata.decision must be an object \(a document model's loss and threshold\)"),
    ({"loss": "hinge"}, r"metadata.decision.loss must be one of bce, softmax, got 'hinge'"),
    ({"loss": "bce"}, r"metadata.decision.threshold must be a number between 0 and 1, got None"),
])
def test_a_document_bundle_without_its_decision_rule_is_refused(tmp_path, decision, message):
    """A document model always carries its decision rule (its loss, and for "bce" the
    threshold): without it, ``read_manifest`` refuses the folder in one line."""
    folder = tmp_path / "b"
    (folder / "tokenizer").mkdir(parents=True)
    for name in ("model.keras", "doc_featurizer.json", "tokenizer/tokenizer.json"):
        (folder / name).write_text("{}")
    metadata = {} if decision is None else {"decision": decision}
    (folder / "bundle.json").write_text(json.dumps({
        "format": "tffre-model/1", "encoder": "documents", "label_names": ["CID"],
        "metadata": metadata}))
    with pytest.raises(BundleError, match=message):
        read_manifest(str(folder))
