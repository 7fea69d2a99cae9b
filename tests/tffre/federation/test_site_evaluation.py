"""A site's evaluation counts (:class:`tffre.federation.site_evaluation.SiteEvaluator`):
document RE's TP/FP/FN at the job's threshold, counted by hand in numpy."""

import numpy as np
import pytest
import tensorflow as tf

from tffre.federation.site_evaluation import SiteEvaluator
from tffre.models.document_model import DocRELoss, pack_targets

P, R = 5, 2


def echo_model():
    """Returns its input ``scores`` as the logits: the test chooses the probabilities."""
    scores = tf.keras.Input((P, R), name="scores")
    logits = tf.keras.layers.Activation("linear", name="logits")(scores)
    return tf.keras.Model({"scores": scores}, {"logits": logits})


def weights_of(model):
    import tensorflow_federated as tff
    return tff.learning.models.ModelWeights.from_model(model)


def test_document_counts_follow_the_given_threshold():
    rng = np.random.RandomState(0)
    n = 7
    mask = (rng.rand(n, P) < 0.8).astype(np.int32)
    labels = ((rng.rand(n, P, R) < 0.4) * mask[..., None]).astype(np.int32)
    scores = rng.randn(n, P, R).astype(np.float32)
    splits = {"test": ({"scores": scores}, pack_targets(labels, mask))}
    prob = 1 / (1 + np.exp(-scores.astype(np.float64)))
    valid = mask[..., None].astype(bool)
    gold = labels.astype(bool)
    counted = {}
    for threshold in (None, 0.3, 0.7):
        evaluator = SiteEvaluator(echo_model, DocRELoss("bce"), splits, batch_size=3,
                                  kind="docre", threshold=threshold)
        got = evaluator.counts(weights_of(evaluator.model), R)
        pred = prob > (0.5 if threshold is None else threshold)
        want = {"tp": np.sum(gold & pred & valid), "fp": np.sum(~gold & pred & valid),
                "fn": np.sum(gold & ~pred & valid)}
        counted[threshold] = tuple(int(got[f"docre/{k}/test"]) for k in want)
        assert counted[threshold] == tuple(int(v) for v in want.values()), threshold
    # The thresholds give different counts on these scores: the option is not ignored.
    assert len(set(counted.values())) == 3


def test_a_threshold_is_refused_for_the_classification_counts():
    splits = {"test": (np.zeros((2, 3), np.float32), np.zeros(2, np.int32))}
    with pytest.raises(ValueError, match="threshold applies to the docre evaluation"):
        SiteEvaluator(lambda: tf.keras.Sequential([tf.keras.layers.Dense(2)]),
                      tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), splits,
                      threshold=0.3)
