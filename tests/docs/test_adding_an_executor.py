"""docs/adding-an-executor.md's walk-through works as written: its module and registry line,
taken from the file, give an executor that the registry lists, whose round equals one SGD step
computed in numpy, and that the runner runs for two rounds of a small synthetic job as the local
executor does."""

import dataclasses
import sys

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from doc_blocks import guide_block

FEATURES, CLASSES = 3, 4


def block(marker):
    """The python code block after ``<!-- marker -->`` in the guide."""
    return guide_block("adding-an-executor.md", marker)


@pytest.fixture
def sequential(tmp_path, monkeypatch):
    """The guide's module written where Python finds it, and its registry line in place."""
    from tffre import execution
    (tmp_path / "guide_sequential.py").write_text(block("module"))
    monkeypatch.syspath_prepend(str(tmp_path))
    row = eval(block("registry").replace("tffre.execution.sequential",  # noqa: S307
                                         "guide_sequential"),
               {"Executor": execution.Executor})
    monkeypatch.setattr(execution, "EXECUTOR_REGISTRY", execution.EXECUTOR_REGISTRY + (row,))
    yield row
    sys.modules.pop("guide_sequential", None)


def linear_model():
    return tf.keras.Sequential([tf.keras.Input((FEATURES,)),
                                tf.keras.layers.Dense(CLASSES, kernel_initializer="zeros")])


LOSS = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def test_the_registry_lists_the_guides_executor(sequential):
    from tffre import execution
    from tffre.runner.run_settings import RunSettings
    assert execution.get_executor("sequential") is sequential
    assert execution.resolve_executor("sequential") == "sequential"
    assert execution.executor_help().endswith(
        "; sequential: this process, one client after another; auto: local when a GPU is "
        "visible")
    with pytest.raises(ValueError, match="executor must be one of auto, tff, local, "
                                         "sequential, got 'gpu'"):
        execution.resolve_executor("gpu")
    # The flags take their values from the same registry (read when the settings are declared).
    fields = {f.name: f.declaration.parse for f in RunSettings.declarations()}
    assert fields["executor"].choices == ("auto", "tff", "local")
    assert fields["loop"].choices == ("while", "steps", "reduce")
    assert fields["client_workers"].choices == ("threads", "processes")


def test_the_guides_executor_takes_one_sgd_step_per_client(sequential):
    from tffre import build_algorithm
    rng = np.random.RandomState(0)
    xs = [rng.randn(n, FEATURES).astype(np.float32) for n in (6, 4)]
    ys = [np.array([0, 1, 2, 3, 1, 1], np.int32), np.array([2, 2, 0, 3], np.int32)]
    datasets = [tf.data.Dataset.from_tensor_slices((x, y)).batch(len(y)) for x, y in zip(xs, ys)]
    lr = 0.5
    process = build_algorithm("FedAvg", linear_model, loss=LOSS,
                              input_spec=datasets[0].element_spec, executor="sequential",
                              learning_rate=lr, num_epochs=1)
    assert process.executor == "sequential"
    out = process.next(process.initialize(), datasets)
    w, b = process.get_model_weights(out.state).trainable
    # By hand: from zero weights p = 1/C, dL/dz = (p - onehot(y)) / B; one SGD step per client,
    # then the mean weighted by the clients' sizes (FLCMC Eq. 6).
    steps = []
    for x, y in zip(xs, ys):
        grad_z = (np.full((len(y), CLASSES), 1 / CLASSES) - np.eye(CLASSES)[y]) / len(y)
        steps.append((-lr * x.T @ grad_z, -lr * grad_z.sum(0)))
    sizes = np.array([6.0, 4.0]) / 10.0
    np.testing.assert_allclose(w, sizes[0] * steps[0][0] + sizes[1] * steps[1][0],
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(b, sizes[0] * steps[0][1] + sizes[1] * steps[1][1],
                               rtol=1e-5, atol=1e-7)
    # The bytes each way: the kernel and bias down; the delta, its weight and the metrics up.
    assert out.metrics["round"]["bytes_broadcast"] == 2 * 4 * (FEATURES * CLASSES + CLASSES)
    assert out.metrics["round"]["bytes_uploaded"] > 2 * 4 * (FEATURES * CLASSES + CLASSES)


def synthetic(seed=0):
    """Two clients of a linear 4-class problem, with test splits."""
    from tffre.data import FederatedData
    rng = np.random.RandomState(seed)
    w = rng.randn(FEATURES, CLASSES)

    def split(n):
        x = rng.randn(n, FEATURES).astype(np.float32)
        return x, np.argmax(x @ w, -1).astype(np.int32)
    return FederatedData({c: {"train": split(24), "test": split(8)} for c in ("a", "b")},
                         num_classes=CLASSES, name="synthetic")


def run(out, executor):
    from tffre import registry, runner
    job = runner.PreparedTask(synthetic(), runner.TaskModel(linear_model, LOSS))
    settings = runner.RunSettings.resolve(dict(out=str(out), num_rounds=2, clients=2,
                                               clients_per_round=2, batch_size=8,
                                               no_progress=True, executor="local"))
    # Replaced after the check: the flag's choices were read before the fixture added a row.
    settings = dataclasses.replace(settings, executor=executor)
    hparams = {"FedAvg": registry.resolve_hparams("FedAvg", dict(learning_rate=0.1,
                                                                 num_epochs=1))}
    runner.run_experiment(job, hparams, settings)
    return pd.read_csv(out / "metrics.csv")


def test_the_runner_runs_the_guides_executor_as_the_local_one(sequential, tmp_path):
    got = run(tmp_path / "sequential", "sequential")
    want = run(tmp_path / "local", "local")
    assert list(got["round"]) == [1, 2]
    numbers = [c for c in want.columns if pd.api.types.is_numeric_dtype(want[c])
               and "seconds" not in c and "time" not in c]
    assert "test_accuracy" in numbers and "bytes_uploaded" in numbers
    pd.testing.assert_frame_equal(got[numbers], want[numbers], rtol=1e-6, atol=1e-7)
