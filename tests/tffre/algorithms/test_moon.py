"""MOON: the contrastive loss against a numpy transcription, a first round equal to FedAvgT,
and the previous local model kept per client across rounds and sampling gaps."""

import copy

import numpy as np
import pytest
import tensorflow as tf

from tffre import build_algorithm
from tffre.definition import ObjectiveContext
from tffre.registry import resolve_hparams
from tffre.algorithms.moon import MOON, contrastive_loss
from tffre.client_model import ClientModel
from tffre.mapreduce import ModelWeights
from tiny import (INPUT_SPEC, NAMED_LOSS, assert_weights_close, client_arrays, initial_weights,
                  tiny_named_model, to_datasets)

HP = dict(mu=1.0, temperature=0.5, projection_head=False)
TRAIN = dict(learning_rate=0.05, num_epochs=2, num_iters=None)


def moon(hp):
    """MOON with the hyperparameters ``hp`` (names or aliases)."""
    return MOON(resolve_hparams("MOON", hp))


def numpy_con(z, zg, zp, tau):
    """MOON's l_con, transcribed in float64:
    -log(e^{cos(z,zg)/tau} / (e^{cos(z,zg)/tau} + e^{cos(z,zp)/tau}))."""
    z, zg, zp = (np.asarray(a, np.float64) for a in (z, zg, zp))

    def cos(a, b):
        return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    pos, neg = np.exp(cos(z, zg) / tau), np.exp(cos(z, zp) / tau)
    return -np.log(pos / (pos + neg))


def numpy_ce(logits, y):
    lse = np.log(np.exp(logits).sum(axis=1))
    return np.mean(lse - logits[np.arange(len(y)), y])


def test_contrastive_loss_by_hand_and_against_numpy():
    # z = zg = [1, 0], zp = [0, 1]: cos 1 and 0, tau 0.5 -> -log(e^2 / (e^2 + e^0)) = log(1 + e^-2)
    one = contrastive_loss(tf.constant([[1.0, 0.0]]), tf.constant([[1.0, 0.0]]),
                           tf.constant([[0.0, 1.0]]), 0.5)
    np.testing.assert_allclose(one, [0.1269280], rtol=1e-6)
    # Reversed roles: -log(e^0 / (e^0 + e^2)) = log(1 + e^2) = 2.1269280.
    np.testing.assert_allclose(contrastive_loss(tf.constant([[1.0, 0.0]]),
                                                tf.constant([[0.0, 1.0]]),
                                                tf.constant([[1.0, 0.0]]), 0.5), [2.1269280],
                               rtol=1e-6)
    rng = np.random.RandomState(0)
    z, zg, zp = (rng.randn(6, 5).astype(np.float32) for _ in range(3))
    for tau in (0.5, 0.1, 2.0):
        np.testing.assert_allclose(contrastive_loss(z, zg, zp, tau), numpy_con(z, zg, zp, tau),
                                   rtol=1e-5, atol=1e-6)
    # A zero representation (cos undefined) gives a finite value, not NaN.
    assert np.isfinite(contrastive_loss(z, np.zeros_like(zg), zp, 0.5)).all()


def context(outputs, frozen, seen, y):
    model = ClientModel(tiny_named_model(), loss=NAMED_LOSS, input_spec=INPUT_SPEC)
    return ObjectiveContext(x=None, y=tf.constant(y), model=model, outputs=outputs,
                            frozen=frozen, extras={}, label_counts=None,
                            client_state={"seen": tf.constant(seen)}, initial_weights=None,
                            hparams={})


def crafted(rng, with_projection=False):
    def out():
        o = {"features": rng.randn(4, 5).astype(np.float32),
             "logits": rng.randn(4, 3).astype(np.float32)}
        if with_projection:
            o["projection"] = rng.randn(4, 2).astype(np.float32)
        return {k: tf.constant(v) for k, v in o.items()}
    return out(), {"global": out(), "previous": out()}


def test_objective_is_cross_entropy_plus_mu_times_the_mean_contrastive_term():
    rng = np.random.RandomState(1)
    outputs, frozen = crafted(rng)
    y = np.array([0, 2, 1, 2], np.int32)
    ce = numpy_ce(outputs["logits"].numpy().astype(np.float64), y)
    con = numpy_con(*(m["features"].numpy() for m in (outputs, frozen["global"],
                                                      frozen["previous"])), 0.5)
    for mu in (1.0, 5.0):
        got = moon(dict(HP, mu=mu)).objective(context(outputs, frozen, 1.0, y))
        np.testing.assert_allclose(got, ce + mu * con.mean(), rtol=1e-5)
    # A client's first round (seen = 0): exactly the model's loss.
    ctx = context(outputs, frozen, 0.0, y)
    np.testing.assert_array_equal(moon(HP).objective(ctx), ctx.model_loss())


def test_projection_head_option_contrasts_the_projection_output():
    rng = np.random.RandomState(2)
    outputs, frozen = crafted(rng, with_projection=True)
    y = np.array([1, 1, 0, 2], np.int32)
    ce = numpy_ce(outputs["logits"].numpy().astype(np.float64), y)
    con = numpy_con(*(m["projection"].numpy() for m in (outputs, frozen["global"],
                                                        frozen["previous"])), 0.5)
    got = moon(dict(HP, projection_head=True)).objective(context(outputs, frozen, 1.0, y))
    np.testing.assert_allclose(got, ce + con.mean(), rtol=1e-5)
    outputs, frozen = crafted(rng)
    with pytest.raises(ValueError, match="'projection'"):
        moon(dict(HP, projection_head=True)).objective(context(outputs, frozen, 1.0, y))
    with pytest.raises(ValueError, match="temperature"):
        moon(dict(HP, temperature=0.0))


# --- rounds ---

DATA = {c: client_arrays([n], seed=s)[0] for c, n, s in [("a", 10, 11), ("b", 7, 12),
                                                          ("c", 9, 13)]}


def moon_process(executor="local"):
    process = build_algorithm("MOON", tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                              executor=executor, **TRAIN, **HP)
    return process, process.set_model_weights(process.initialize(),
                                              ModelWeights(initial_weights(), []))


def run_round(process, state, ids):
    return process.next(state, to_datasets([DATA[c] for c in ids]), client_ids=ids).state


def test_first_round_equals_fedavgt():
    process, state = moon_process()
    got = run_round(process, state, ["a", "b"])["model"].trainable
    fedavgt = build_algorithm("FedAvgT", tiny_named_model, loss=NAMED_LOSS,
                              input_spec=INPUT_SPEC, executor="local", **TRAIN)
    want = fedavgt.next(fedavgt.set_model_weights(fedavgt.initialize(),
                                                  ModelWeights(initial_weights(), [])),
                        to_datasets([DATA["a"], DATA["b"]])).state["model"].trainable
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    for c in "ab":
        assert process.client_states[c]["seen"] == 1.0


def model_with(weights):
    model = tiny_named_model()
    model.set_weights(weights)
    return model


def hand_client(global_weights, previous_weights, arrays, seen=1.0):
    """One client's MOON round by hand: Adam on CE + mu * seen * mean l_con, frozen global and
    previous models in inference mode."""
    model, glob, prev = (model_with(w) for w in (global_weights, global_weights,
                                                   previous_weights))
    optimizer = tf.keras.optimizers.Adam(TRAIN["learning_rate"])
    cos = tf.keras.losses.cosine_similarity   # -cos
    for x, y in to_datasets([arrays])[0].repeat(TRAIN["num_epochs"]):
        zg = glob(x, training=False)["features"]
        zp = prev(x, training=False)["features"]
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            pos = tf.exp(-cos(out["features"], zg) / HP["temperature"])
            neg = tf.exp(-cos(out["features"], zp) / HP["temperature"])
            con = -tf.math.log(pos / (pos + neg))
            loss = NAMED_LOSS(y, out["logits"]) + HP["mu"] * seen * tf.reduce_mean(con)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return [v.numpy() for v in model.trainable_variables]


def test_previous_model_survives_rounds_and_sampling_gaps():
    # Round 1: a, b. Round 2: b, c (a not sampled). Round 3: a, c.
    process, state = moon_process()
    state = run_round(process, state, ["a", "b"])
    after1 = copy.deepcopy(process.client_states)
    state = run_round(process, state, ["b", "c"])
    # a was not sampled: its state is untouched; b's is its round-2 model.
    for g, w in zip(process.client_states["a"]["weights"], after1["a"]["weights"]):
        np.testing.assert_array_equal(g, w)
    assert not np.allclose(process.client_states["b"]["weights"][0], after1["b"]["weights"][0])
    assert process.client_states["c"]["seen"] == 1.0
    after2 = copy.deepcopy(process.client_states)
    broadcast3 = [np.asarray(w) for w in state["model"].trainable]
    state = run_round(process, state, ["a", "c"])

    # Round 3 by hand: a contrasts against its round-1 model, c against its round-2 model.
    want_a = hand_client(broadcast3, after1["a"]["weights"], DATA["a"])
    want_c = hand_client(broadcast3, after2["c"]["weights"], DATA["c"])
    assert_weights_close(process.client_states["a"]["weights"], want_a)
    assert_weights_close(process.client_states["c"]["weights"], want_c)
    n_a, n_c = len(DATA["a"][1]), len(DATA["c"][1])
    mean = [(n_a * a + n_c * c) / (n_a + n_c) for a, c in zip(want_a, want_c)]
    assert_weights_close(state["model"].trainable, mean)

    # The test can tell: a client without its previous model (seen = 0) or with another
    # round's model ends elsewhere.
    assert not np.allclose(hand_client(broadcast3, broadcast3, DATA["a"], seen=0.0)[0],
                           want_a[0], atol=1e-4)
    assert not np.allclose(hand_client(broadcast3, after2["b"]["weights"], DATA["a"])[0],
                           want_a[0], atol=1e-4)


def test_a_diverged_client_keeps_its_previous_state():
    process, state = moon_process()
    state = run_round(process, state, ["a"])
    kept = copy.deepcopy(process.client_states["a"])
    x, y = DATA["a"]
    x = x.copy()
    x[0, 0] = np.nan
    out = process.next(state, to_datasets([(x, y)]), client_ids=["a"])
    assert out.metrics["client_work"]["num_excluded_clients"] == 1
    for g, w in zip(process.client_states["a"]["weights"], kept["weights"]):
        np.testing.assert_array_equal(g, w)
    assert process.client_states["a"]["seen"] == 1.0
