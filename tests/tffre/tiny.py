"""Small models and client data shared by the tffre tests."""

import numpy as np
import tensorflow as tf

NUM_FEATURES, NUM_CLASSES = 6, 3


def tiny_model():
    """A seeded two-layer Keras model, so every call starts from the same weights."""
    return tf.keras.Sequential([
        tf.keras.Input((NUM_FEATURES,)),
        tf.keras.layers.Dense(5, activation="tanh",
                              kernel_initializer=tf.keras.initializers.GlorotUniform(seed=1)),
        tf.keras.layers.Dense(NUM_CLASSES, activation="softmax",
                              kernel_initializer=tf.keras.initializers.GlorotUniform(seed=2))])


def client_arrays(sizes, seed=0):
    rng = np.random.RandomState(seed)
    out = []
    for n in sizes:
        x = rng.randn(n, NUM_FEATURES).astype(np.float32)
        y = (x[:, 0] + x[:, 1] > 0).astype(np.int32) + (x[:, 2] > 1).astype(np.int32)
        out.append((x, y))
    return out


def to_datasets(arrays, batch_size=4):
    return [tf.data.Dataset.from_tensor_slices(a).batch(batch_size) for a in arrays]


INPUT_SPEC = (tf.TensorSpec((None, NUM_FEATURES), tf.float32), tf.TensorSpec((None,), tf.int32))


def initial_weights(seed=5):
    """Weights for ``tiny_model`` away from its initialisation."""
    rng = np.random.RandomState(seed)
    return [0.3 * rng.randn(*w.shape).astype(np.float32) for w in tiny_model().get_weights()]


def poisoned(arrays, which):
    """Copies of ``arrays`` where the clients in ``which`` have one NaN feature."""
    out = []
    for i, (x, y) in enumerate(arrays):
        if i in which:
            x = x.copy()
            x[0, 0] = np.nan
        out.append((x, y))
    return out


def tiny_named_model():
    """``tiny_model``'s layers with named outputs ``features`` (the hidden layer) and ``logits``
    (no softmax), as the relation models have: for algorithms that read features or logits."""
    inputs = tf.keras.Input((NUM_FEATURES,))
    features = tf.keras.layers.Dense(
        5, activation="tanh", name="features",
        kernel_initializer=tf.keras.initializers.GlorotUniform(seed=1))(inputs)
    logits = tf.keras.layers.Dense(
        NUM_CLASSES, name="classifier",
        kernel_initializer=tf.keras.initializers.GlorotUniform(seed=2))(features)
    return tf.keras.Model(inputs, {"features": features, "logits": logits})


def tiny_context_model():
    """``tiny_named_model`` with its hidden layer named ``context`` (what FedLCC contrasts)."""
    model = tiny_named_model()
    return tf.keras.Model(model.input, {"context": model.output["features"],
                                        "logits": model.output["logits"]})


NAMED_LOSS = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def tiny_fedcb_model(use_variance=True, tau=2.0):
    """``tiny_model``'s hidden layer as the extractor of a FedCB model over fixed Gaussian
    class distributions (mu, var of a seeded draw), with named outputs."""
    from tffre.algorithms.fedcb import class_distributions
    from tffre.models.heads import build_fedcb_model
    inputs = tf.keras.Input((NUM_FEATURES,))
    hidden = tf.keras.layers.Dense(
        5, activation="tanh", kernel_initializer=tf.keras.initializers.GlorotUniform(seed=1))(inputs)
    extractor = tf.keras.Model(inputs, hidden)
    # D = NUM_CLASSES: the trainable shapes are tiny_model's, so initial_weights() fits.
    mu, var = class_distributions(np.random.RandomState(8).randn(NUM_CLASSES, 4, NUM_CLASSES))
    return build_fedcb_model(extractor, mu, var, tau, use_variance)


def assert_weights_close(got, want):
    """Two lists of weights agree elementwise (rtol 1e-5, atol 1e-6)."""
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def run_experiment(data, model_fn, *, loss, algorithm_names, out_dir, hparams=None,
                   save_model=None, reference=None, **settings):
    """:func:`tffre.runner.run_experiment` in one call: a
    :class:`tffre.runner.PreparedTask` of
    ``data`` and a :class:`tffre.runner.TaskModel` of ``model_fn`` and ``loss`` (and the
    TaskModel's and PreparedTask's fields among ``settings``), each
    algorithm's hyperparameters resolved from ``hparams`` (names or aliases), and the
    other ``settings`` as :class:`tffre.runner.RunSettings` (no progress bar)."""
    import dataclasses
    from tffre import registry, runner
    model_fields = {f.name for f in dataclasses.fields(runner.TaskModel)}
    task_fields = {f.name for f in dataclasses.fields(runner.PreparedTask)} - {"data", "model"}
    model = runner.TaskModel(model_fn, loss, **{k: settings.pop(k) for k in list(settings)
                                               if k in model_fields})
    prepared = runner.PreparedTask(data, model, **{k: settings.pop(k) for k in list(settings)
                                                  if k in task_fields})
    resolved = {registry.get_spec(n).name: registry.resolve_hparams(
        n, registry.algorithm_hparams(n, hparams or {})) for n in algorithm_names}
    settings.setdefault("no_progress", True)
    run = runner.RunSettings.resolve(dict(settings, out=out_dir))
    return runner.run_experiment(prepared, resolved, run, save_model=save_model,
                                 reference=reference)


def tiny_clients(sizes=(8, 6, 9, 7), seed=5):
    """A :class:`tffre.data.FederatedData` of ``client_arrays(sizes)``, each client's training
    arrays its test split too."""
    from tffre.data import FederatedData
    arrays = client_arrays(list(sizes), seed=seed)
    return FederatedData({f"c{i}": {"train": a, "test": a} for i, a in enumerate(arrays)},
                         num_classes=3, name="tiny")


def full_and_resumed(data, out, *, rounds=4, cut=2, model_fn=None, **common):
    """A run of ``rounds`` in ``out/full`` and one cut after ``cut`` rounds then resumed to
    ``rounds`` in ``out/cut`` (checkpoints every round): the two run folders."""
    model_fn = model_fn or tiny_model
    common = dict(common, checkpoint_every=1)
    full, resumed = out / "full", out / "cut"
    run_experiment(data, model_fn, num_rounds=rounds, out_dir=str(full), **common)
    run_experiment(data, model_fn, num_rounds=cut, out_dir=str(resumed), **common)
    run_experiment(data, model_fn, num_rounds=rounds, out_dir=str(resumed), resume=True,
                   **common)
    return full, resumed


class PersonalProcessFake:
    """A stateful process evaluated as personal models (FedRep's kind), for evaluate_state:
    clients a and b trained personal heads 0.2 and 0.6; c has not trained."""
    stateful, evaluation, personal_indices = True, "personal", (0,)
    client_states = {"a": {"personal": [np.float32(0.2)], "seen": np.float32(1.0)},
                     "b": {"personal": [np.float32(0.6)], "seen": np.float32(1.0)},
                     "c": {"personal": [np.float32(9.0)], "seen": np.float32(0.0)}}

    @staticmethod
    def get_model_weights(state):
        return state
