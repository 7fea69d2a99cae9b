"""FedED: the distillation loss against numpy, a whole round against a plain Keras loop, the
upload's type (predictions only), and an excluded NaN client."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tffre import build_algorithm
from tffre.algorithms.feded import distillation_loss, teacher_distribution
from tffre.definition import TaskContext
from tffre.mapreduce import ModelWeights
from tiny import (INPUT_SPEC, NAMED_LOSS, NUM_CLASSES, NUM_FEATURES, client_arrays,
                  initial_weights, poisoned, tiny_model, tiny_named_model, to_datasets)

SERVER_N, SERVER_BATCH = 7, 3
TRAIN = dict(learning_rate=0.05, num_epochs=2, num_iters=None)


def server_arrays():
    x, y = client_arrays([SERVER_N], seed=21)[0]
    return x, y


def server_dataset():
    return tf.data.Dataset.from_tensor_slices(server_arrays()).batch(SERVER_BATCH)


def numpy_distillation(y, logits, q, kl_weight):
    """Eq. 6 transcribed in float64: mean_i [-log p_i[y_i] + w * sum_c q_ic log(q_ic / p_ic)]."""
    logits = np.asarray(logits, np.float64)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ce = -log_p[np.arange(len(y)), y]
    kl = (q * (np.log(q) - log_p)).sum(-1)
    return np.mean(ce + kl_weight * kl)


def test_distillation_loss_against_numpy():
    rng = np.random.RandomState(3)
    logits = rng.randn(5, 4).astype(np.float32)
    q = rng.dirichlet(np.ones(4), size=5).astype(np.float32)
    y = np.array([0, 3, 1, 1, 2])
    for w in (1.0, 0.0, 2.5):
        np.testing.assert_allclose(distillation_loss(y, logits, q, w),
                                   numpy_distillation(y, logits, q.astype(np.float64), w),
                                   rtol=1e-5)
    # A hand case: q = p makes the KL zero, leaving the cross-entropy.
    p = np.array([[0.7, 0.2, 0.1]], np.float32)
    np.testing.assert_allclose(distillation_loss([0], np.log(p), p, 1.0), -np.log(0.7),
                               rtol=1e-6)


def test_teacher_is_the_softened_mean():
    z = np.array([[0.9, 0.1, 0.0]], np.float32)
    want = np.exp(z / 0.25) / np.exp(z / 0.25).sum()
    np.testing.assert_allclose(teacher_distribution(z, 0.25), want, rtol=1e-6)


def keras_client(weights, batches, lr, epochs):
    """A client by hand: fresh Adam, cross-entropy, ``epochs`` passes."""
    model = tiny_model()
    model.set_weights(weights)
    opt = tf.keras.optimizers.Adam(lr)
    ce = tf.keras.losses.SparseCategoricalCrossentropy()
    for _ in range(epochs):
        for x, y in batches:
            with tf.GradientTape() as tape:
                loss = ce(y, model(x, training=True))
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                    model.trainable_variables))
    return model


def keras_server(weights, q, lr, kl_weight):
    """The server step by hand: from theta_t, fresh Adam, one ordered pass over D_v of
    CE + kl_weight * KL(q || p), written with Keras' own losses."""
    model = tiny_model()
    model.set_weights(weights)
    opt = tf.keras.optimizers.Adam(lr)
    ce = tf.keras.losses.SparseCategoricalCrossentropy()
    kl = tf.keras.losses.KLDivergence()
    x, y = server_arrays()
    for i in range(0, SERVER_N, SERVER_BATCH):
        xb, yb, qb = x[i:i + SERVER_BATCH], y[i:i + SERVER_BATCH], q[i:i + SERVER_BATCH]
        with tf.GradientTape() as tape:
            p = model(xb, training=True)
            loss = ce(yb, p) + kl_weight * kl(qb, p)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))
    return [v.numpy() for v in model.trainable_variables]


@pytest.mark.parametrize("teacher", ["probabilities", "logits"])
def test_round_equals_clients_then_a_keras_distillation_loop(loss, teacher):
    data = client_arrays([9, 6], seed=4)
    tau, kl_weight = 0.5, 0.7
    process = build_algorithm("FedED", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                              executor="local", context=TaskContext(server_data=server_dataset()), temperature=tau,
                              kl_weight=kl_weight, teacher=teacher, **TRAIN)
    w0 = initial_weights()
    state = process.set_model_weights(process.initialize(), ModelWeights(w0, []))
    out = process.next(state, to_datasets(data))
    # The reference: each client trained by hand, its probabilities on D_v, their mean.
    x_v, _ = server_arrays()
    preds = []
    for x, y in data:
        batches = [(x[i:i + 4], y[i:i + 4]) for i in range(0, len(y), 4)]
        p = keras_client(w0, batches, TRAIN["learning_rate"], TRAIN["num_epochs"])(x_v).numpy()
        preds.append(np.log(p) if teacher == "logits" else p)
    z = np.mean(preds, axis=0)
    q = np.exp(z / tau) / np.exp(z / tau).sum(-1, keepdims=True)
    want = keras_server(w0, q.astype(np.float32), TRAIN["learning_rate"], kl_weight)
    for got, w in zip(out.state["model"].trainable, want):
        np.testing.assert_allclose(got, w, rtol=2e-4, atol=2e-5)
    assert out.metrics["client_work"]["num_excluded_clients"] == 0
    # D_v's inputs are a server extra (broadcast), its labels are not.
    np.testing.assert_array_equal(out.state["extras"]["server_x"], x_v)
    assert list(out.state["extras"]) == ["server_x"]


def test_upload_is_the_predictions_and_a_weight(loss):
    process = build_algorithm("FedED", tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                              executor="tff", context=TaskContext(server_data=server_dataset()), **TRAIN)
    form = tff.backends.mapreduce.get_map_reduce_form_for_computation(process.tff_process.next)
    upload = form.work.type_signature.result
    # Everything a client sends (the update part; the secure-sum parts are empty).
    tensors = _tensor_types(upload)
    big = [t for t in tensors if len(t.shape) > 0]
    assert [(tuple(t.shape), t.dtype) for t in big] == [((SERVER_N, NUM_CLASSES), np.float32)]
    # Besides it only scalars: the teacher weight, the summed training metrics (loss total
    # and count, num_examples, num_batches) and the excluded flag.
    scalars = [t for t in tensors if len(t.shape) == 0]
    assert len(scalars) <= 6
    n_weights = sum(w.size for w in tiny_named_model().get_weights())
    assert process.upload_bytes_per_client == SERVER_N * NUM_CLASSES * 4 + 4 + 8 + 16 + 4
    assert process.upload_bytes_per_client < 4 * n_weights + 4 * SERVER_N * NUM_CLASSES
    # Clients receive the model and D_v's inputs (7 x 6 float32), nothing else.
    assert process.broadcast_bytes_per_client == 4 * n_weights + 4 * SERVER_N * NUM_FEATURES


def _tensor_types(type_spec):
    if isinstance(type_spec, tff.TensorType):
        return [type_spec]
    if isinstance(type_spec, tff.StructType):
        return [t for child in type_spec.children() for t in _tensor_types(child)]
    return []


def test_float16_upload_halves_the_predictions(loss):
    p32 = build_algorithm("FedED", tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                          executor="tff", context=TaskContext(server_data=server_dataset()), **TRAIN)
    p16 = build_algorithm("FedED", tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                          executor="tff", context=TaskContext(server_data=server_dataset()),
                          upload_precision="float16", **TRAIN)
    assert p32.upload_bytes_per_client - p16.upload_bytes_per_client == SERVER_N * NUM_CLASSES * 2


def test_nan_client_is_excluded_from_the_teacher(loss):
    data = client_arrays([8, 8, 8], seed=9)
    kw = dict(loss=loss, input_spec=INPUT_SPEC, executor="local", context=TaskContext(server_data=server_dataset()),
              **TRAIN)
    w0 = ModelWeights(initial_weights(), [])
    bad = build_algorithm("FedED", tiny_model, **kw)
    out_bad = bad.next(bad.set_model_weights(bad.initialize(), w0),
                       to_datasets(poisoned(data, {1})))
    good = build_algorithm("FedED", tiny_model, **kw)
    out_good = good.next(good.set_model_weights(good.initialize(), w0),
                         to_datasets([data[0], data[2]]))
    assert out_bad.metrics["client_work"]["num_excluded_clients"] == 1
    for a, b in zip(out_bad.state["model"].trainable, out_good.state["model"].trainable):
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_all_clients_excluded_keeps_the_model(loss):
    data = poisoned(client_arrays([8], seed=9), {0})
    process = build_algorithm("FedED", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                              executor="local", context=TaskContext(server_data=server_dataset()), **TRAIN)
    w0 = initial_weights()
    out = process.next(process.set_model_weights(process.initialize(), ModelWeights(w0, [])),
                       to_datasets(data))
    for got, want in zip(out.state["model"].trainable, w0):
        np.testing.assert_array_equal(got, want)


def test_tff_and_local_executors_agree(loss):
    data = client_arrays([7, 5], seed=2)
    outs = []
    for executor in ("tff", "local"):
        process = build_algorithm("FedED", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                                  executor=executor, context=TaskContext(server_data=server_dataset()), **TRAIN)
        state = process.set_model_weights(process.initialize(),
                                          ModelWeights(initial_weights(), []))
        outs.append(process.next(state, to_datasets(data)).state["model"].trainable)
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_needs_server_data_and_valid_choices(loss):
    with pytest.raises(ValueError, match="server_data"):
        build_algorithm("FedED", tiny_model, loss=loss, input_spec=INPUT_SPEC, executor="local")
    with pytest.raises(ValueError, match="teacher"):
        build_algorithm("FedED", tiny_model, loss=loss, input_spec=INPUT_SPEC, executor="local",
                        context=TaskContext(server_data=server_dataset()), teacher="votes")


# --- what secure aggregation reads: the declared upload ranges (FedED.upload_ranges) ---

#: The line a site gave before the declaration existed (secagg.range_hints named FedED).
LOGITS_REFUSAL = ("secure aggregation: extra/total reaches -50, beyond secagg-clip x "
                  "secagg-max-weight = 32; raise secagg-max-weight; FedED's teacher=logits "
                  "uploads log-probabilities, which have no lower bound: use "
                  "teacher=probabilities (in [0, 1]) with secure aggregation")


def _ranges(teacher):
    from tffre import registry
    from tffre.algorithms.feded import FedED
    return FedED.upload_ranges(registry.resolve_hparams("FedED", {"teacher": teacher}))


def _contribution(value):
    import collections
    return collections.OrderedDict(
        extra=collections.OrderedDict(total=np.full((2, 3), value, np.float32),
                                      weight=np.float32(1)))


def test_secure_aggregation_refuses_logits_beyond_its_range_in_the_same_line_as_before():
    from tffre.deploy import secagg
    with pytest.raises(ValueError) as err:
        secagg.encode(_contribution(-50.0), 16.0, 2.0,
                      hints=secagg.declared_hints(_ranges("logits")))
    assert str(err.value) == LOGITS_REFUSAL


def test_secure_aggregation_accepts_probabilities_which_are_declared_bounded():
    from tffre.deploy import secagg
    (declared,) = _ranges("probabilities")
    assert (declared.part, declared.low, declared.high) == ("extra", 0.0, 1.0)
    assert secagg.declared_hints(_ranges("probabilities")) == {}
    encoded = secagg.encode(_contribution(1.0), 16.0, 2.0,
                            hints=secagg.declared_hints(_ranges("probabilities")))
    np.testing.assert_array_equal(encoded[0], np.full((2, 3), 1 / 16))
    np.testing.assert_array_equal(encoded[1], [1 / 16])


@pytest.mark.parametrize("teacher", ["probabilities", "logits"])
def test_the_upload_keeps_its_declared_range(teacher):
    """What FedED uploads (its predictions on D_v from a tiny model) lies in the range it
    declares: [0, 1] summing to 1 for probabilities, <= 0 for log-probabilities."""
    from tffre import registry
    from tffre.algorithms.feded import FedED
    from tffre.client_model import ClientModel
    hp = registry.resolve_hparams("FedED", {"teacher": teacher})
    fed = FedED(hp, TaskContext(server_data=server_dataset()))
    model = ClientModel(tiny_model(), loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                        input_spec=INPUT_SPEC)   # softmax outputs: from_logits=False
    out = fed.predict(model, tf.constant(server_arrays()[0])).numpy()
    (declared,) = FedED.upload_ranges(hp)
    assert out.shape == (SERVER_N, NUM_CLASSES)
    assert out.max() <= declared.high
    if declared.low is not None:
        assert out.min() >= declared.low
        np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-5)
    else:
        np.testing.assert_allclose(np.exp(out).sum(-1), 1.0, rtol=1e-5)
