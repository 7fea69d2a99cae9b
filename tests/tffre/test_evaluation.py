"""The document-RE evaluation: P/R/F1 over candidate pairs against scikit-learn, the
intra/inter-sentence split and Ign F1 against hand counts, the per-pair training loss."""

import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import precision_recall_fscore_support

from tffre.data import FederatedData
from tffre.evaluation import DocREEvaluator, make_evaluator
from tffre.metrics import docre_scores
from tffre.models.document_model import DocRELoss, docre_loss, pack_targets

P, R = 5, 2


def echo_model():
    """Returns its input ``scores`` as the logits: the predictions are chosen by the test."""
    scores = tf.keras.Input((P, R), name="scores")
    logits = tf.keras.layers.Activation("linear", name="logits")(scores)
    return tf.keras.Model({"scores": scores}, {"logits": logits})


def split(n, seed):
    rng = np.random.RandomState(seed)
    mask = (rng.rand(n, P) < 0.8).astype(np.int32)
    labels = ((rng.rand(n, P, R) < 0.3) * mask[..., None]).astype(np.int32)
    scores = rng.randn(n, P, R).astype(np.float32) * 2
    intra = ((rng.rand(n, P) < 0.5) * mask).astype(np.int32)
    return ({"scores": scores}, pack_targets(labels, mask)), intra


def test_docre_scores_match_sklearn_and_hand_counts():
    rng = np.random.RandomState(0)
    gold = rng.rand(6, P, R) < 0.3
    pred = rng.rand(6, P, R) < 0.4
    mask = rng.rand(6, P) < 0.7
    intra = rng.rand(6, P) < 0.5
    got = docre_scores(gold, pred, mask, intra=intra)
    valid = np.repeat(mask[..., None], R, -1)
    want = precision_recall_fscore_support(gold[valid].astype(int), pred[valid].astype(int),
                                           average="binary", zero_division=0)
    np.testing.assert_allclose([got["precision"], got["recall"], got["f1"]], want[:3])
    for key, part in (("intra_f1", mask & intra), ("inter_f1", mask & ~intra)):
        where = np.repeat(part[..., None], R, -1)
        hits = np.sum(gold & pred & where)
        assert got[key] == pytest.approx(2 * hits / (np.sum(gold & where) + np.sum(pred & where)))
    # Ign F1 by hand: gold [1, 1, 0], pred [1, 1, 1] on one pair, the first fact seen in
    # training: P_ign = (2 - 1) / (3 - 1), R = 1, Ign F1 = 2 * 0.5 / 1.5.
    g = np.array([[[1, 1, 0]]])
    p = np.array([[[1, 1, 1]]])
    out = docre_scores(g, p, [[1]], in_train=np.array([[[1, 0, 0]]]))
    assert out["f1"] == pytest.approx(0.8) and out["ign_f1"] == pytest.approx(2 / 3)
    assert out["accuracy"] == 0.0
    with pytest.raises(ValueError, match="do not match"):
        docre_scores(g, p, [[1, 1]])


def test_evaluator_scores_the_pooled_pairs():
    clients, annotations = {}, {}
    for k, (n_train, n_test, n_dev) in enumerate([(4, 3, 2), (3, 2, 3)]):
        clients[f"c{k}"], annotations[f"c{k}"] = {}, {}
        for j, (name, n) in enumerate((("train", n_train), ("test", n_test), ("dev", n_dev))):
            (x, y), intra = split(n, 10 * k + j)
            clients[f"c{k}"][name] = (x, y)
            annotations[f"c{k}"][name] = {"pair_intra": intra}
    data = FederatedData(clients, num_classes=R, annotations=annotations)
    evaluator = make_evaluator("docre", echo_model, data, DocRELoss("bce"), batch_size=2)
    assert isinstance(evaluator, DocREEvaluator)
    got = evaluator.evaluate_model()
    for name in ("test", "dev"):
        (x, y) = data.pooled(name)
        want = docre_scores(y[..., :-1], x["scores"] > 0, y[..., -1],
                            intra=data.pooled_annotations(name)["pair_intra"])
        for key in ("precision", "recall", "f1", "accuracy", "intra_f1", "inter_f1"):
            assert got[f"{name}_{key}"] == pytest.approx(want[key]), (name, key)
    x, y = data.pooled("train")
    assert got["train_loss"] == pytest.approx(
        float(docre_loss(y[..., :-1], x["scores"], y[..., -1])), rel=1e-5)
    assert "test_ign_f1" not in got
    with pytest.raises(ValueError, match="DocRELoss"):
        DocREEvaluator(echo_model, data, tf.keras.losses.MeanSquaredError())
    with pytest.raises(ValueError, match="unknown evaluation kind"):
        make_evaluator("ranking", echo_model, data, DocRELoss("bce"))


def test_a_threshold_tuned_on_dev_is_the_grid_point_with_the_best_dev_f1():
    """``threshold="dev"``: the grid's threshold whose dev F1 (sklearn's, over the valid
    pairs) is the highest scores every split; the threshold column says which."""
    from sklearn.metrics import f1_score
    from tffre.evaluation import DOCRE_GRID
    clients = {}
    for k in range(2):
        clients[f"c{k}"] = {name: split(n, 20 * k + j)[0] for j, (name, n) in
                            enumerate((("train", 3), ("test", 6), ("dev", 7)))}
    data = FederatedData(clients, num_classes=R)
    evaluator = make_evaluator("docre", echo_model, data, DocRELoss("bce"), batch_size=3,
                               threshold="dev")
    got = evaluator.evaluate_model()
    # The training loss alone (a personal evaluation's last pass) needs no dev split.
    alone = evaluator.evaluate_model(("train",))
    assert alone["train_loss"] == pytest.approx(got["train_loss"])

    def f1_at(name, t):
        x, y = data.pooled(name)
        valid = np.repeat(y[..., -1:].astype(bool), R, -1)
        prob = 1 / (1 + np.exp(-x["scores"].astype(np.float64)))
        return f1_score(y[..., :-1][valid].astype(int), (prob > t)[valid].astype(int),
                        zero_division=0)
    dev = [f1_at("dev", t) for t in DOCRE_GRID]
    best = max(dev)
    # Ties go to the threshold nearest 0.5.
    want = min((t for t, f in zip(DOCRE_GRID, dev) if f == pytest.approx(best)),
               key=lambda t: abs(t - 0.5))
    assert got["threshold"] == pytest.approx(want)
    assert got["dev_f1"] == pytest.approx(best)
    assert got["test_f1"] == pytest.approx(f1_at("test", want))
    # Tuned on dev, its dev F1 is at least the fixed 0.5's.
    fixed = make_evaluator("docre", echo_model, data, DocRELoss("bce")).evaluate_model()
    assert fixed["threshold"] == 0.5 and got["dev_f1"] >= fixed["dev_f1"]
    with pytest.raises(ValueError, match="bce"):
        make_evaluator("docre", echo_model, data, DocRELoss("softmax"), threshold="dev")
    with pytest.raises(ValueError, match="needs a dev split"):
        evaluator.evaluate_model(("train", "test"))


def test_each_client_is_scored_on_its_own_documents_at_the_pooled_threshold():
    """DocREEvaluator.site_scores: a client's P/R/F1 are sklearn's over its own documents'
    valid pairs at the threshold the pooled dev chose, its unscorable gold pairs added as
    misses (BioCreative's every gold pair), its intra-sentence F1 by hand; num_test its valid
    test pairs."""
    from tffre.evaluation import DocREEvaluator
    assert DocREEvaluator.per_site
    sizes = [(3, 4, 3), (2, 2, 4), (3, 5, 2)]
    clients, annotations, own = {}, {}, {}
    for k, split_sizes in enumerate(sizes):
        cid = f"c{k}"
        clients[cid], annotations[cid], own[cid] = {}, {}, {}
        for j, (name, n) in enumerate(zip(("train", "test", "dev"), split_sizes)):
            (x, y), intra = split(n, 30 * k + j)
            missed = np.random.RandomState(40 + 3 * k + j).randint(0, 3, n)
            clients[cid][name] = (x, y)
            annotations[cid][name] = {"pair_intra": intra, "unscored_gold": missed,
                                      "unscored_gold_intra": missed // 2}
            own[cid][name] = (x["scores"], y, intra, missed)
    data = FederatedData(clients, num_classes=R, annotations=annotations)
    evaluator = make_evaluator("docre", echo_model, data, DocRELoss("bce"), batch_size=3,
                               threshold="dev")
    pooled = evaluator.evaluate_model()
    t = pooled["threshold"]
    rows = evaluator.site_scores({s: data.sizes(s) for s in ("test", "dev")})
    assert len(rows) == 3
    f1s = []
    for row, cid in zip(rows, clients):
        for name in ("test", "dev"):
            scores, y, intra, missed = own[cid][name]
            valid = np.repeat(y[..., -1:].astype(bool), R, -1)
            gold = y[..., :-1][valid].astype(int)
            pred = (1 / (1 + np.exp(-scores.astype(np.float64))) > t)[valid].astype(int)
            # Each unscorable gold pair: one more gold relation, predicted absent.
            gold = np.concatenate([gold, np.ones(int(missed.sum()), int)])
            pred = np.concatenate([pred, np.zeros(int(missed.sum()), int)])
            p, r, f, _ = precision_recall_fscore_support(gold, pred, average="binary",
                                                         zero_division=0)
            assert (row[f"{name}_precision"], row[f"{name}_recall"], row[f"{name}_f1"]) == \
                pytest.approx((p, r, f)), (cid, name)
            where = np.repeat((intra * y[..., -1]).astype(bool)[..., None], R, -1)
            g, q = y[..., :-1].astype(bool) & where, \
                (1 / (1 + np.exp(-scores.astype(np.float64))) > t) & where
            hits = np.sum(g & q)
            assert row[f"{name}_intra_f1"] == pytest.approx(
                2 * hits / (g.sum() + (missed // 2).sum() + q.sum()))
        assert row["num_test"] == int(own[cid]["test"][1][..., -1].sum())
        f1s.append(row["test_f1"])
    assert len(set(np.round(f1s, 6))) > 1   # the sites differ
    # The sites' counts add up to the pooled ones: the pooled F1 is not the sites' mean here.
    assert pooled["test_f1"] != pytest.approx(np.mean(f1s))


def binary_echo_model():
    """Returns its input as the two classes' logits."""
    scores = tf.keras.Input((2,))
    return tf.keras.Model(scores, tf.keras.layers.Activation("linear")(scores))


def binary_data(sizes=(("train", 5), ("test", 40), ("dev", 60)), seed=0):
    """Two clients' splits of (logits [n, 2], labels), the relation (label 1) in about 55%."""
    rng = np.random.RandomState(seed)
    clients = {}
    for k in range(2):
        clients[f"c{k}"] = {}
        for name, n in sizes:
            y = (rng.rand(n) < 0.55).astype(np.int32)
            x = np.stack([np.zeros(n), rng.randn(n) + 0.6 * (2 * y - 1) - 0.4], 1)
            clients[f"c{k}"][name] = (x.astype(np.float32), y)
    return FederatedData(clients, num_classes=2)


SCCE = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def sklearn_f1_at(data, name, t):
    from sklearn.metrics import f1_score
    x, y = data.pooled(name)
    prob = 1 / (1 + np.exp(x[:, 0].astype(np.float64) - x[:, 1]))   # the softmax's class 1
    return f1_score(y, (prob > t).astype(int), zero_division=0), prob


def test_a_binary_threshold_tuned_on_dev_is_the_grid_point_with_the_best_dev_f1():
    """``threshold="dev"`` on a binary relation set: the grid's threshold with the best dev F1
    (sklearn's, the relation as the positive class; ties nearest 0.5) scores every split, and
    the per-class table's predictions are the final model's at it."""
    from tffre.evaluation import DOCRE_GRID, BinaryThresholdEvaluator
    data = binary_data()
    evaluator = make_evaluator("binary", binary_echo_model, data, SCCE, negative_label=0,
                               threshold="dev", batch_size=7)
    assert isinstance(evaluator, BinaryThresholdEvaluator)
    got = evaluator.evaluate_model()
    dev = [sklearn_f1_at(data, "dev", t)[0] for t in DOCRE_GRID]
    best = max(dev)
    want = min((t for t, f in zip(DOCRE_GRID, dev) if f == pytest.approx(best)),
               key=lambda t: abs(t - 0.5))
    assert got["threshold"] == pytest.approx(want) and want != 0.5
    assert got["dev_f1"] == pytest.approx(best)
    test_f1, prob = sklearn_f1_at(data, "test", want)
    assert got["test_f1"] == pytest.approx(test_f1)
    y = data.pooled("test")[1]
    assert got["test_accuracy"] == pytest.approx(np.mean((prob > want) == y))
    np.testing.assert_array_equal(evaluator.predictions("test")[1], (prob > want).astype(int))
    # The loss is the training loss's, whatever the threshold.
    x, y = data.pooled("train")
    assert got["train_loss"] == pytest.approx(float(SCCE(y, x)), rel=1e-5)
    # Tuned on dev, its dev F1 is at least the argmax's (the classification kind's).
    argmax = make_evaluator("classification", binary_echo_model, data, SCCE,
                            negative_label=0).evaluate_model()
    assert got["dev_f1"] >= argmax["dev_f1"]
    assert (got["test_f1_argmax"], got["dev_f1_argmax"]) == pytest.approx(
        (argmax["test_f1"], argmax["dev_f1"]))


def test_a_given_binary_threshold_and_its_limits():
    """A number: the relation above it; 0.5 is the argmax (the classification kind, column
    for column); and a threshold needs two labels, and "dev" a dev split."""
    data = binary_data(seed=1)
    argmax = make_evaluator("classification", binary_echo_model, data, SCCE,
                            negative_label=0).evaluate_model()
    half = make_evaluator("binary", binary_echo_model, data, SCCE, negative_label=0,
                          threshold=0.5).evaluate_model()
    assert half.pop("threshold") == 0.5
    assert half.pop("test_f1_argmax") == half["test_f1"]
    assert half.pop("dev_f1_argmax") == half["dev_f1"]
    assert half == pytest.approx(argmax)
    low = make_evaluator("binary", binary_echo_model, data, SCCE, negative_label=0,
                         threshold=0.3).evaluate_model()
    assert low["test_f1"] == pytest.approx(sklearn_f1_at(data, "test", 0.3)[0])
    assert low["test_f1"] != pytest.approx(half["test_f1"])
    three = FederatedData({"c0": {"train": (np.zeros((2, 3), np.float32), np.zeros(2, np.int32)),
                                  "test": (np.zeros((2, 3), np.float32), np.zeros(2, np.int32))}},
                          num_classes=3)
    with pytest.raises(ValueError, match="binary relation set"):
        make_evaluator("binary", lambda: tf.keras.Sequential([tf.keras.layers.Dense(3)]),
                       three, SCCE, negative_label=0, threshold=0.3)
    no_dev = binary_data((("train", 4), ("test", 6)))
    with pytest.raises(ValueError, match="needs a dev split"):
        make_evaluator("binary", binary_echo_model, no_dev, SCCE, negative_label=0,
                       threshold="dev").evaluate_model()


def pair_echo_model(pairs, relations=1):
    """:func:`echo_model` for ``pairs`` pair rows."""
    scores = tf.keras.Input((pairs, relations), name="scores")
    logits = tf.keras.layers.Activation("linear", name="logits")(scores)
    return tf.keras.Model({"scores": scores}, {"logits": logits})


def test_a_gold_pair_no_candidate_pair_holds_is_a_miss(tmp_path):
    """BioCreative V's CID evaluation counts every gold pair. A document with 3 gold pairs,
    one of them (rash -> aspirin, Disease -> Chemical) no candidate pair, and a model that
    predicts the other 2 right: TP 2, FP 0, FN 1 (the unscorable one). By hand: P = 2/2,
    R = 2/3, F1 = 2TP / (2TP + FP + FN) = 4/5; intra-sentence (aspirin -> headache and the
    unscorable pair, both in the first sentence) TP 1, FN 1: F1 2/3; inter (aspirin ->
    cough) TP 1: F1 1; DocRED's Ign F1, aspirin -> headache seen in training: P (2 - 1) /
    (2 - 1) = 1 with the same R 2/3: 4/5. Before (the unscorable pair left out) R was 1."""
    from tffre.data.document_schema import Document, Mention, Relation
    from tffre.tasks.documents import encode_splits
    from tffre.text.document_features import DocREFeaturizer
    from tiny_encoder import VOCAB, make_encoder_folder
    folder = make_encoder_folder(str(tmp_path / "tok"), vocab=VOCAB + ["*"])[0]
    text = "aspirin was given for headache . the patient improved after morphine with a " \
           "severe cough ."
    cut = text.index("the")   # sentence 1 starts here

    def mention(word, kind, eid):
        start = text.index(word)
        return Mention(start, start + len(word), word, kind, (eid,), int(start >= cut))
    doc = Document("d1", text, [mention("aspirin", "Chemical", "C1"),
                                mention("headache", "Disease", "D1"),
                                mention("morphine", "Chemical", "C2"),
                                mention("cough", "Disease", "D2")],
                   [Relation("CID", "C1", "D1"), Relation("CID", "C1", "D2"),
                    Relation("CID", "D1", "C1")], [(0, cut - 1), (cut, len(text))])
    featurizer = DocREFeaturizer(folder, ["CID"], max_length=40, max_mentions=4,
                                 max_entities=4, max_mentions_per_entity=1, max_pairs=4,
                                 pair_types=[("Chemical", "Disease")])
    assert featurizer.pair_ids(doc) == [("C1", "D1"), ("C1", "D2"), ("C2", "D1"), ("C2", "D2")]
    arrays, _ = encode_splits(featurizer, {name: [doc] for name in ("train", "test", "dev")})
    clients, notes = {"c0": {}}, {"c0": {}}
    for name, (_, y, annotations) in arrays.items():
        gold = y[..., :-1]
        assert gold[0, :, 0].tolist() == [1, 1, 0, 0]
        assert annotations["unscored_gold"].tolist() == [1]
        assert annotations["unscored_gold_intra"].tolist() == [1]
        # The model's scores: +10 on the two gold candidate pairs, -10 elsewhere.
        clients["c0"][name] = ({"scores": np.where(gold > 0, 10.0, -10.0).astype(np.float32)},
                               y)
        notes["c0"][name] = {**annotations,
                             "pair_in_train": np.array([[[1], [0], [0], [0]]], np.int8)}
    data = FederatedData(clients, num_classes=1, annotations=notes)
    evaluator = make_evaluator("docre", lambda: pair_echo_model(4), data, DocRELoss("bce"))
    assert evaluator.unscored == {"test": 1, "dev": 1}
    got = evaluator.evaluate_model()
    for name in ("test", "dev"):
        assert got[f"{name}_precision"] == pytest.approx(1.0)
        assert got[f"{name}_recall"] == pytest.approx(2 / 3)
        assert got[f"{name}_f1"] == pytest.approx(4 / 5)
        assert got[f"{name}_intra_f1"] == pytest.approx(2 / 3)
        assert got[f"{name}_inter_f1"] == pytest.approx(1.0)
        assert got[f"{name}_ign_f1"] == pytest.approx(4 / 5)
        assert got[f"{name}_accuracy"] == pytest.approx(1.0)   # over the candidate pairs


def test_a_threshold_tuned_on_dev_counts_dev_s_unscorable_gold_pairs():
    """One document, 4 candidate pairs, gold [1, 1, 0, 0], probabilities [0.9, 0.2, 0.3, 0.25].
    By hand, ``prob > t`` at the grid's t: t <= 0.19 predicts all 4 (TP 2, FP 2, FN 0), 0.30
    <= t <= 0.89 the first (TP 1, FP 0, FN 1); 0.20-0.29 score less. With U more gold pairs
    missed, F1 = 2TP / (2TP + FP + FN + U): U = 0 gives 4/6 and 2/3, a tie that goes to the
    threshold nearest 0.5, 0.5; U = 2 gives 4/8 against 2/5, so t = 0.19 (nearest 0.5 of
    t <= 0.19)."""
    from tffre.evaluation import best_threshold
    gold = np.array([[[1], [1], [0], [0]]])
    prob = np.array([[[0.9], [0.2], [0.3], [0.25]]])
    mask = np.ones((1, 4), np.int32)
    assert best_threshold(gold, prob, mask) == 0.5
    assert best_threshold(gold, prob, mask, missed=2) == pytest.approx(0.19)
    # Through the evaluator: dev's annotation says 2 gold pairs no candidate holds.
    logits = np.log(prob / (1 - prob)).astype(np.float32)
    y = pack_targets(gold, mask)
    clients = {"c0": {name: ({"scores": logits}, y) for name in ("train", "test", "dev")}}
    notes = {"c0": {name: {"unscored_gold": np.array([2 if name == "dev" else 0])}
                    for name in ("train", "test", "dev")}}
    data = FederatedData(clients, num_classes=1, annotations=notes)
    got = make_evaluator("docre", lambda: pair_echo_model(4), data, DocRELoss("bce"),
                         threshold="dev").evaluate_model()
    assert got["threshold"] == pytest.approx(0.19)
    assert got["dev_f1"] == pytest.approx(4 / 8)     # TP 2, FP 2, FN 0 + 2
    assert got["test_f1"] == pytest.approx(4 / 6)    # the same predictions, no unscorable
