"""FedRS and FedLC: the rescaled logits and losses against hand-computed cases, and one local
round against a hand-written GradientTape loop."""

import numpy as np
import pytest
import tensorflow as tf

from tffre import build_algorithm
from tffre.definition import ObjectiveContext
from tffre.algorithms.fedlc import FedLC, calibrated_logits
from tffre.algorithms.fedrs import FedRS, restriction_scales
from tffre.registry import resolve_hparams
from tffre.client_model import ClientModel
from tffre.mapreduce import ModelWeights
from tiny import (INPUT_SPEC, NAMED_LOSS, client_arrays, initial_weights, tiny_model,
                  tiny_named_model, to_datasets)

LOGITS = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 2.0]], np.float32)
Y = np.array([2, 0], np.int32)


def context(logits=LOGITS, y=Y, counts=(3.0, 0.0, 1.0), outputs=None):
    """An ObjectiveContext with the fields the FedRS and FedLC objectives read."""
    model = ClientModel(tiny_named_model(), loss=NAMED_LOSS, input_spec=INPUT_SPEC)
    return ObjectiveContext(
        x=None, y=tf.constant(y), model=model,
        outputs=outputs if outputs is not None else {"logits": tf.constant(logits)},
        label_counts=tf.constant(counts, tf.float32), frozen={}, extras={},
        client_state=None, initial_weights=None, hparams={})


def fedlc(calibration=1.0):
    return FedLC(resolve_hparams("FedLC", calibration=calibration))


def fedrs(restriction=0.5, form="binary"):
    return FedRS(resolve_hparams("FedRS", restriction=restriction, fedrs_form=form))


def numpy_ce(logits, y):
    """Batch-mean sparse cross-entropy: mean_i (logsumexp(l_i) - l_{i, y_i})."""
    logits = np.asarray(logits, np.float64)
    lse = np.log(np.exp(logits).sum(axis=1))
    return float(np.mean(lse - logits[np.arange(len(y)), y]))


# --- FedRS ---

def test_fedrs_binary_scales_and_loss_by_hand():
    # Counts [3, 0, 1]: class 1 is missing, so s = [1, alpha, 1] = [1, 0.5, 1].
    np.testing.assert_array_equal(restriction_scales(tf.constant([3.0, 0.0, 1.0]), 0.5),
                                  [1.0, 0.5, 1.0])
    # Scaled logits: [[1, 1, 3], [0, -0.5, 2]], labels [2, 0].
    #   row 0: log(e^1 + e^1 + e^3) - 3 = log(1 + 2 e^-2)           = 0.2395448
    #   row 1: log(e^0 + e^-0.5 + e^2) - 0                           = 2.1967341
    #   mean                                                         = 1.2181394
    loss = fedrs().objective(context())
    np.testing.assert_allclose(loss, 1.2181394, rtol=1e-6)
    np.testing.assert_allclose(loss, numpy_ce([[1, 1, 3], [0, -0.5, 2]], Y), rtol=1e-6)


def test_fedrs_proportional_form_by_hand():
    # Counts [4, 0, 2], alpha 0.5: s = 0.5 + 0.5 * [4, 0, 2] / 4 = [1, 0.5, 0.75].
    np.testing.assert_allclose(
        restriction_scales(tf.constant([4.0, 0.0, 2.0]), 0.5, "proportional"),
        [1.0, 0.5, 0.75])
    # Scaled logits [[1, 1, 2.25], [0, -0.5, 1.5]], labels [2, 0]:
    #   row 0: log(e^1 + e^1 + e^2.25) - 2.25  = 0.4529907
    #   row 1: log(1 + e^-0.5 + e^1.5)          = 1.8063557
    loss = fedrs(form="proportional").objective(context(counts=(4.0, 0.0, 2.0)))
    np.testing.assert_allclose(loss, (0.4529907 + 1.8063557) / 2, rtol=1e-6)
    # A client without data (all counts 0) gets alpha everywhere, not 0/0.
    np.testing.assert_allclose(restriction_scales(tf.zeros([3]), 0.1, "proportional"),
                               [0.1, 0.1, 0.1])


def test_fedrs_with_every_class_present_is_the_models_cross_entropy():
    # s = 1: the objective is the Keras loss with its default (batch-mean) reduction,
    # also for labels of shape [B, 1].
    ctx = context(counts=(1.0, 2.0, 5.0))
    np.testing.assert_allclose(fedrs().objective(ctx), ctx.model_loss(), rtol=1e-6)
    ctx = context(y=Y[:, None], counts=(1.0, 2.0, 5.0))
    np.testing.assert_allclose(fedrs().objective(ctx), ctx.model_loss(), rtol=1e-6)
    # alpha = 1 is FedAvg's loss whatever the counts.
    ctx = context()
    np.testing.assert_allclose(fedrs(restriction=1.0).objective(ctx), ctx.model_loss(),
                               rtol=1e-6)


def test_fedrs_checks_its_hyperparameters():
    with pytest.raises(ValueError, match="fedrs_form"):
        fedrs(form="soft")
    with pytest.raises(ValueError, match="restriction"):
        fedrs(restriction=1.5)


# --- FedLC ---

def test_fedlc_calibrated_logits_and_loss_by_hand():
    # Counts [16, 0, 1] -> clamped [16, 1, 1] -> n^(-1/4) = [0.5, 1, 1]; tau = 1.
    np.testing.assert_allclose(
        calibrated_logits(tf.constant(LOGITS), tf.constant([16.0, 0.0, 1.0]), 1.0),
        [[0.5, 1.0, 2.0], [-0.5, -2.0, 1.0]])
    # Full softmax including y, labels [2, 0]:
    #   row 0: log(e^0.5 + e^1 + e^2) - 2         = 0.4643688
    #   row 1: log(e^-0.5 + e^-2 + e^1) + 0.5     = 1.7413113
    loss = fedlc(1.0).objective(context(counts=(16.0, 0.0, 1.0)))
    np.testing.assert_allclose(loss, (0.4643688 + 1.7413113) / 2, rtol=1e-6)
    # tau = 2 doubles the margins.
    np.testing.assert_allclose(
        fedlc(2.0).objective(context(counts=(16.0, 0.0, 1.0))),
        numpy_ce([[0.0, 0.0, 1.0], [-1.0, -3.0, 0.0]], Y), rtol=1e-6)
    # tau = 0: the model's cross-entropy.
    ctx = context()
    np.testing.assert_allclose(fedlc(0.0).objective(ctx), ctx.model_loss(),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="calibration"):
        fedlc(-1.0)


@pytest.mark.parametrize("definition", [fedrs(), fedlc(1.0)])
def test_a_model_without_logits_is_refused(definition):
    ctx = context(outputs={"predictions": tf.constant(LOGITS)})
    with pytest.raises(ValueError, match="'logits' output"):
        definition.objective(ctx)


# --- one local round, end to end (the label counts path) ---

def missing_class_2(n, seed):
    x, y = client_arrays([n], seed=seed)[0]
    keep = y != 2
    return x[keep], y[keep]


def hand_round(weights, arrays, transform, lr):
    """One epoch of tf.keras Adam on the mean sparse CE of transform(logits, counts)."""
    model = tiny_named_model()
    model.set_weights(weights)
    counts = tf.constant(np.bincount(arrays[1], minlength=3), tf.float32)
    optimizer = tf.keras.optimizers.Adam(lr)
    for x, y in to_datasets([arrays])[0]:
        with tf.GradientTape() as tape:
            logits = model(x, training=True)["logits"]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=transform(logits, counts)))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return [v.numpy() for v in model.trainable_variables]


CASES = {
    "FedRS": ({}, lambda z, n: tf.where(n > 0, 1.0, 0.5) * z),
    "FedRS-proportional": ({"fedrs_form": "proportional", "restriction": 0.1},
                           lambda z, n: (0.1 + 0.9 * n / tf.reduce_max(n)) * z),
    "FedLC": ({"calibration": 1.0}, lambda z, n: z - tf.maximum(n, 1.0) ** -0.25),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_local_round_equals_a_hand_written_loop(case):
    extra, transform = CASES[case]
    name = case.split("-")[0]
    arrays = missing_class_2(14, seed=4)
    assert 2 not in arrays[1] and len(arrays[1]) >= 8
    lr = 0.05
    hp = dict(learning_rate=lr, num_epochs=1, num_iters=None)
    process = build_algorithm(name, tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                              executor="local", **hp, **extra)
    state = process.set_model_weights(process.initialize(), ModelWeights(initial_weights(), []))
    got = process.next(state, to_datasets([arrays])).state["model"].trainable
    want = hand_round(initial_weights(), arrays, transform, lr)
    for g, w in zip(got, want):   # one client: the new global model is its trained model
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # The rescaling matters here: FedAvgT (plain CE, same Adam) ends elsewhere.
    fedavgt = build_algorithm("FedAvgT", tiny_named_model, loss=NAMED_LOSS,
                              input_spec=INPUT_SPEC, executor="local", **hp)
    plain = fedavgt.next(fedavgt.set_model_weights(fedavgt.initialize(),
                                                   ModelWeights(initial_weights(), [])),
                         to_datasets([arrays])).state["model"].trainable
    assert not np.allclose(plain[-1], got[-1], atol=1e-4)


@pytest.mark.parametrize("name", ["FedRS", "FedLC"])
def test_a_single_output_model_is_refused_when_built(name, loss):
    # Building traces the client work (for the upload's type), so the error comes early.
    with pytest.raises(ValueError, match="'logits' output"):
        build_algorithm(name, tiny_model, loss=loss, input_spec=INPUT_SPEC, executor="local")
