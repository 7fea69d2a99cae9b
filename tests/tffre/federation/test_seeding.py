"""What a site's round draws depends on the job's seed, the round and the site only: a round
trained again by the same process (after other rounds), or by a new one, gives the same
upload (issue 30, a site administrator's view, item 1; across real processes:
``test_deploy_repeat``); and a site's folder hands no round an earlier run's state."""

import numpy as np
import pytest
import tensorflow as tf

from deploy_fakes import TinyTask
from deploy_tiny_task import tiny_dropout_model
from tiny import INPUT_SPEC, NUM_CLASSES, NUM_FEATURES, client_arrays

from tffre.deploy.client_app import NodeRuntime
from tffre.deploy.round_factory import make_round
from tffre.deploy.tasks import DeployJob, task_context
from tffre.federation.messages import TRAIN
from tffre.federation.split_round import to_arrays

X, Y = client_arrays([16], seed=3)[0]
HPARAMS = {"learning_rate": 0.05, "num_epochs": 2, "num_iters": 5}


class Noise(tf.keras.layers.Layer):
    """Adds uniform noise in training with ``tf.random.uniform``: a stateful random op that
    is not a Keras random generator (what seeding.SiteRandomness cannot reseed)."""

    def call(self, x, training=None):
        return x + 0.5 * tf.random.uniform(tf.shape(x)) if training else x


def noisy_model():
    return tf.keras.Sequential([
        tf.keras.Input((NUM_FEATURES,)),
        tf.keras.layers.Dense(5, activation="tanh",
                              kernel_initializer=tf.keras.initializers.GlorotUniform(seed=1)),
        Noise(),
        tf.keras.layers.Dense(NUM_CLASSES, activation="softmax",
                              kernel_initializer=tf.keras.initializers.GlorotUniform(seed=2))])


class Task(TinyTask):
    """Every site holds the same examples: uploads differ only by what the sites draw."""

    def __init__(self, model_fn):
        super().__init__(arrays={})
        self._model_fn = model_fn

    def model_fn(self):
        return self._model_fn

    def _site(self, site):
        return X, Y


def job_of(seed=0):
    return DeployJob(task="test", dataset="synthetic", algorithm="FedAvgT", hparams=HPARAMS,
                     options={}, batch_size=4, seed=seed,
                     labels=tuple(str(i) for i in range(NUM_CLASSES)), num_clients=2)


def broadcast(task, job):
    parts, _, _ = make_round(job.algorithm, task.model_fn(), loss=task.loss(),
                             input_spec=INPUT_SPEC, hparams=job.hparams,
                             context=task_context(job))
    return to_arrays(parts.prepare(parts.initialize()))


def train(runtime, job, arrays, rnd, site, tmp_path):
    reply, out = runtime.handle(TRAIN, {"job": job.to_json(), "round": rnd, "constants": "",
                                        "layout": ""},
                                arrays, {"site": site, "state-dir": str(tmp_path / site)})
    assert "error" not in reply, reply
    return out


def same(a, b):
    return all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("model_fn", [tiny_dropout_model, noisy_model],
                         ids=["keras-dropout", "stateful-op"])
def test_a_round_draws_the_same_whatever_the_process_ran_before(model_fn, tmp_path):
    task, job = Task(model_fn), job_of()
    arrays = broadcast(task, job)
    runtime = NodeRuntime(task)
    first = train(runtime, job, arrays, 1, "a", tmp_path)
    second = train(runtime, job, arrays, 2, "a", tmp_path)
    # Round 1 again in the same process, after round 2 (a run repeated on a running site).
    assert same(train(runtime, job, arrays, 1, "a", tmp_path), first)
    built = runtime.build(job, {"site": "a", "state-dir": str(tmp_path / "a")})
    if model_fn is tiny_dropout_model:
        # Keras' dropout is reset per round without a retrace; nothing else draws.
        assert len(built.randomness.generators) == 1 and built.randomness.fallback == ()
    else:
        # A stateful op tffre cannot reseed: TensorFlow's kernels are reset per round.
        assert built.randomness.fallback == ("RandomUniform",)
    # A new process's runtime (what plain Flower starts for every message) gives round 2's.
    assert same(train(NodeRuntime(task), job, arrays, 2, "a", tmp_path / "new"), second)


def test_sites_and_seeds_draw_their_own_masks(tmp_path):
    task = Task(tiny_dropout_model)
    job = job_of()
    arrays = broadcast(task, job)
    runtime = NodeRuntime(task)
    a = train(runtime, job, arrays, 1, "a", tmp_path)
    # Same examples and weights: only the masks differ between sites and between seeds.
    assert not same(train(runtime, job, arrays, 1, "b", tmp_path), a)
    assert not same(train(runtime, job_of(seed=1), arrays, 1, "a", tmp_path), a)
    assert same(train(runtime, job, arrays, 1, "a", tmp_path), a)


def test_a_sites_folder_keeps_no_later_round_of_an_earlier_run(tmp_path):
    # A repeated job (same key) at a site that trained it before: saving round r drops the
    # earlier run's states of later rounds, so a round this site misses cannot hand the next
    # one an earlier run's state.
    import os
    import types
    built = types.SimpleNamespace(folder=str(tmp_path))
    runtime = NodeRuntime(Task(tiny_dropout_model))
    for rnd in (1, 2, 3, 4):
        runtime._save_state(built, rnd, {"x": np.float32(rnd)})
    assert sorted(os.listdir(tmp_path)) == [f"state_round_{r}.npz" for r in (2, 3, 4)]
    runtime._save_state(built, 1, {"x": np.float32(10)})   # the job again, round 1
    assert sorted(os.listdir(tmp_path)) == ["state_round_1.npz"]
