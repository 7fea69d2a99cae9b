"""The runner: empty rounds are reported as missing, strict JSON, client sampling from (seed,
round), the shared round loop's evaluation, checkpoints and resume."""

import asyncio
import json

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from tffre import runner
from tffre.evaluation import evaluate_state
from tffre.jsonio import write_json
from tffre.data import FederatedData
from tffre.models import logistic_regression
from tffre.runner import rounds
from tiny import PersonalProcessFake, run_experiment


def test_every_client_excluded_round_is_reported_missing_and_warned(tmp_path, capfd):
    rng = np.random.RandomState(0)
    clients = {}
    for k in range(3):
        x = rng.randn(12, 4).astype(np.float32)
        x[0, 0] = np.nan   # every client's update will be non-finite
        clients[f"c{k}"] = {"train": (x, rng.randint(0, 2, 12).astype(np.int32)),
                            "test": (rng.randn(5, 4).astype(np.float32),
                                     rng.randint(0, 2, 5).astype(np.int32))}
    data = FederatedData(clients, num_classes=2, name="poisoned")
    summary = run_experiment(
        data, lambda: logistic_regression(4, 2), loss=tf.keras.losses.SparseCategoricalCrossentropy(),
        algorithm_names=["fedavg"], num_rounds=2, clients_per_round=2, out_dir=str(tmp_path),
        hparams={"num_epochs": 1})
    assert "every client update had NaN/Inf; the round was empty" in capfd.readouterr().err
    frame = pd.read_csv(tmp_path / "metrics.csv")
    assert frame["local_train_loss"].isna().all()        # not a perfect 0.0
    assert frame["num_examples"].tolist() == [0, 0]
    assert summary["algorithms"]["FedAvg"]["empty_rounds"] == 2
    # The global model was kept: zero weights (logistic_regression's initialiser).
    assert frame["test_accuracy"].notna().all()


def test_summary_json_is_strict(tmp_path):
    path = write_json(tmp_path / "s.json", {"a": float("nan"), "b": [np.float32(np.inf), 1],
                                                   "c": np.int64(3)})
    text = path.read_text() if hasattr(path, "read_text") else open(path).read()
    assert json.loads(text, parse_constant=lambda t: pytest.fail(t)) == {"a": None, "b": [None, 1],
                                                                         "c": 3}


def test_client_sampling_depends_only_on_seed_and_round():
    ids = [f"c{k}" for k in range(10)]
    a = runner.sample_clients(ids, 4, 7, 3)
    assert a == runner.sample_clients(ids, 4, 7, 3)
    rng = np.random.RandomState([7, 3])   # the documented rule
    assert a == [ids[i] for i in sorted(rng.choice(10, 4, replace=False))]
    assert len(set(a)) == 4 and a != runner.sample_clients(ids, 4, 7, 4)
    with pytest.raises(ValueError, match="between 1 and the 10 clients, got 11"):
        runner.sample_clients(ids, 11, 0, 1)


def test_out_dir_with_results_is_refused(tmp_path):
    (tmp_path / "metrics.csv").write_text("algorithm,round\n")
    with pytest.raises(ValueError, match="already holds results"):
        runner.prepare_out_dir(str(tmp_path))
    runner.prepare_out_dir(str(tmp_path), overwrite=True)
    assert not (tmp_path / "metrics.csv").exists()


def small_data(seed=0):
    rng = np.random.RandomState(seed)
    clients = {}
    for k in range(3):
        x = rng.randn(10, 4).astype(np.float32)
        y = (x[:, 0] > 0).astype(np.int32)
        clients[f"c{k}"] = {"train": (x, y), "test": (x[:4], y[:4])}
    return FederatedData(clients, num_classes=2, name="small")


def test_reused_processes_give_the_runs_of_fresh_ones(tmp_path):
    """runner.reuse_processes: a later run with another seed equals a fresh build's run."""
    def run(out, seed):
        run_experiment(
            # Random initial weights: each seed must start from its own.
            small_data(), lambda: logistic_regression(4, 2, kernel_initializer="glorot_uniform"),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(), algorithm_names=["fedavg"],
            num_rounds=2, clients_per_round=2, out_dir=str(tmp_path / out), seed=seed,
            executor="local",
            hparams={"num_epochs": 1, "learning_rate": 0.5})
        return pd.read_csv(tmp_path / out / "metrics.csv").drop(columns=["round_seconds"])
    fresh = [run(f"fresh{s}", s) for s in (1, 2)]
    runner.reuse_processes()
    try:
        reused = [run(f"reused{s}", s) for s in (1, 2)]
        from tffre.runner import processes
        assert len(processes._CACHE) == 1       # built once, run twice
    finally:
        runner.reuse_processes(False)
    for a, b in zip(fresh, reused):
        pd.testing.assert_frame_equal(a, b)
    assert not fresh[0].equals(fresh[1])             # the seeds differ


def dropout_model():
    """A small model that draws dropout masks, seeded."""
    return tf.keras.Sequential([
        tf.keras.Input((4,)),
        tf.keras.layers.Dense(8, activation="tanh",
                              kernel_initializer=tf.keras.initializers.GlorotUniform(1)),
        tf.keras.layers.Dropout(0.5),
        tf.keras.layers.Dense(2, activation="softmax",
                              kernel_initializer=tf.keras.initializers.GlorotUniform(2))])


def test_a_model_with_dropout_is_not_reused_and_repeats_in_one_process(tmp_path):
    """A model that draws dropout masks is built anew for every run under
    ``runner.reuse_processes``: a reused process's traced step would go on with the last run's
    masks, so the same run would give other results after another in the same process."""
    def run(out, seed=0):
        run_experiment(small_data(), dropout_model,
                       loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                       algorithm_names=["fedavg"], num_rounds=2, clients_per_round=2,
                       out_dir=str(tmp_path / out), seed=seed, executor="local",
                       hparams={"num_epochs": 2, "learning_rate": 0.5})
        return pd.read_csv(tmp_path / out / "metrics.csv").drop(columns=["round_seconds"])
    alone = run("alone")
    runner.reuse_processes()
    try:
        run("before", seed=3)
        again = run("again")
        from tffre.runner import processes
        assert not processes._CACHE                  # nothing kept
    finally:
        runner.reuse_processes(False)
    pd.testing.assert_frame_equal(alone, again)


def test_each_algorithm_of_a_run_gives_what_it_gives_alone(tmp_path):
    """A run of several algorithms (the centralised reference with the first) gives each one
    the rows it gives run alone, dropout masks and client draws included: so the real-corpora
    benchmark may run a seed's algorithms apart (its ``Setting.parts``) and read them as one
    run."""
    def run(out, names, **settings):
        run_experiment(small_data(), dropout_model,
                       loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                       algorithm_names=names, num_rounds=3, clients_per_round=2,
                       out_dir=str(tmp_path / out), seed=4, executor="local",
                       hparams={"num_epochs": 2, "learning_rate": 0.5, "mu": 0.1}, **settings)
        return pd.read_csv(tmp_path / out / "metrics.csv").drop(columns=["round_seconds"])
    central = dict(centralised=True, centralised_learning_rates=(0.1, 0.5))
    together = run("together", ["fedavg", "fedprox"], **central)
    first, second = run("first", ["fedavg"], **central), run("second", ["fedprox"])
    assert set(together["algorithm"]) == {"FedAvg", "FedProx", "Centralised lr 0.1",
                                          "Centralised lr 0.5"}
    for alone in (first, second):
        rows = together[together["algorithm"].isin(set(alone["algorithm"]))]
        pd.testing.assert_frame_equal(rows.reset_index(drop=True), alone)
    assert not first[first["algorithm"] == "FedAvg"].drop(columns="algorithm").equals(
        second.drop(columns="algorithm"))          # the two algorithms differ


def test_no_train_loss_skips_only_the_training_pass(tmp_path):
    """--no-train-loss: the same run's held-out columns, and no train_loss."""
    def run(out, **settings):
        run_experiment(
            small_data(), lambda: logistic_regression(4, 2), algorithm_names=["fedavg"],
            loss=tf.keras.losses.SparseCategoricalCrossentropy(), num_rounds=2,
            clients_per_round=2, out_dir=str(tmp_path / out), executor="local",
            hparams={"num_epochs": 1, "learning_rate": 0.5}, **settings)
        return pd.read_csv(tmp_path / out / "metrics.csv")
    full, lean = run("full"), run("lean", no_train_loss=True)
    assert full["train_loss"].notna().all() and lean["train_loss"].isna().all()
    np.testing.assert_allclose(lean["test_accuracy"], full["test_accuracy"], atol=1e-6)
    np.testing.assert_allclose(lean["local_train_loss"], full["local_train_loss"], rtol=1e-5)


class _Evaluator:
    """Accuracy = the first trainable weight's value; loss = its negative."""
    splits = ("test", "train")

    def __call__(self, weights, splits=None):
        value = float(np.asarray(weights.trainable[0]))
        out = {}
        for split in splits or self.splits:
            out.update({"train_loss": -value} if split == "train" else {"test_accuracy": value})
        return out


class _Process(PersonalProcessFake):
    pass


def test_personal_evaluation_averages_the_clients_trained_so_far():
    from tffre.mapreduce import ModelWeights
    weights = ModelWeights([np.float32(0.5)], [])
    out = evaluate_state(_Evaluator(), _Process(), weights)
    # Clients a and b (c has not trained): the mean of their heads' accuracies; the
    # training loss is the global model's.
    assert out == {"test_accuracy": pytest.approx(0.4), "train_loss": -0.5}
    _Process.evaluation = "global"
    try:
        assert evaluate_state(_Evaluator(), _Process(), weights)["test_accuracy"] == 0.5
    finally:
        _Process.evaluation = "personal"


def test_progress_postfix_without_a_train_loss_pass():
    """--no-train-loss rows (the centralised bound's too) have no train_loss to show."""
    from tffre.runner.outputs import postfix
    assert postfix({"test_accuracy": 0.5, "test_f1": 0.25}) == {"acc": "0.500", "f1": "0.250"}


class _CountingRounds(rounds.ClientRounds):
    """Clients whose state counts the rounds (no model)."""

    columns = ("where",)

    def __init__(self):
        self.evaluated, self.reported, self.finished = [], [], None

    def train(self, state, rnd):
        metrics = {"client_work": {"train": {"num_examples": 4, "loss": 1.0 / rnd},
                                   "num_excluded_clients": 0},
                   "round": {"wall_seconds": 0.01, "bytes_broadcast": 8, "bytes_uploaded": 8}}
        return rounds.RoundOutput({"n": np.float32(state["n"] + 1)}, metrics, ["a", "b"],
                           {"where": "here"})

    def evaluate(self, state, rnd, clients):
        self.evaluated.append(rnd)
        return {"test_accuracy": float(state["n"]) / 10}

    def report(self, row, output, evaluated):
        self.reported.append((row["round"], evaluated))

    def finish(self, state):
        self.finished = float(state["n"])


def test_the_shared_loop_evaluates_checkpoints_and_resumes_with_the_old_rows(tmp_path):
    """tffre.runner.rounds: evaluation every eval_every rounds and at the last, checkpoints
    every checkpoint_every and at the last, and a resume that keeps the rows up to its
    checkpoint and trains the rest."""
    from tffre.definition import TaskContext

    def run(num_rounds, resume=False):
        # The run sequence both paths share: open_run, RunRecord, record_run, write_summary.
        settings = runner.RunSettings.resolve(dict(out=str(tmp_path), num_rounds=num_rounds,
                                                   eval_every=2, checkpoint_every=2,
                                                   clients=2, clients_per_round=2,
                                                   resume=resume, no_progress=True))
        rounds.open_run(settings, ["Counting"])
        where = _CountingRounds()
        algorithm = rounds.AlgorithmRounds("Counting", where, {"n": np.float32(0)}, settings)
        record = rounds.RunRecord(settings.out, rounds.summary_head(
            "toy", settings, clients_per_round=2,
            context=TaskContext(num_clients=2, clients_per_round=2)), resume=resume)
        rounds.record_run(record, rounds.metric_columns(extra=where.columns), [algorithm],
                          {"Counting": {"learning_rate": 0.1}})
        return where, algorithm, record.write_summary(title="toy")

    where, algorithm, summary = run(3)
    assert where.evaluated == [2, 3] and where.finished == 3.0
    assert where.reported == [(1, False), (2, True), (3, True)]
    # Round 2 (every 2) and the last; the manager keeps the newest two.
    assert sorted(asyncio.run(algorithm.checkpoints.manager.get_versions())) == [2, 3]
    assert "wall_seconds" in summary["algorithms"]["Counting"]
    first = pd.read_csv(tmp_path / "metrics.csv")
    where, algorithm, summary = run(5, resume=True)
    assert algorithm.done == 3 and where.evaluated == [4, 5] and where.finished == 5.0
    rows = pd.read_csv(tmp_path / "metrics.csv")
    assert list(rows["round"]) == [1, 2, 3, 4, 5] and set(rows["where"]) == {"here"}
    pd.testing.assert_frame_equal(rows.iloc[:3], first)   # the old rows, as written
    np.testing.assert_allclose(rows["test_accuracy"], [np.nan, 0.2, 0.3, 0.4, 0.5])
    assert "wall_seconds" not in summary["algorithms"]["Counting"]
    assert set(summary) == {"dataset", "num_rounds", "clients_per_round", "batch_size", "seed",
                            "eval_every", "task_context", "algorithms", "peak_rss_mib",
                            "wall_seconds", "provenance"}
    # No input files given: the code, packages and machine alone.
    assert summary["provenance"]["data_files"] == [] and "tensorflow" in \
        summary["provenance"]["versions"]


class _FailingRounds(_CountingRounds):
    """Clients whose third round fails."""

    def train(self, state, rnd):
        if rnd == 3:
            raise RuntimeError("site lost")
        return super().train(state, rnd)


def test_the_run_sequence_refuses_fewer_rounds_and_keeps_what_a_failed_run_wrote(tmp_path):
    """open_run refuses results without --resume or --overwrite and, on resume, fewer rounds
    than a checkpoint holds; record_run closes metrics.csv when an algorithm fails, with
    the rounds it finished written (nothing computed is lost)."""
    from tffre.definition import TaskContext
    from tffre.errors import ConfigError

    def settings(num_rounds, **flags):
        return runner.RunSettings.resolve(dict(out=str(tmp_path), num_rounds=num_rounds,
                                               checkpoint_every=2, clients=2,
                                               clients_per_round=2, no_progress=True, **flags))
    first = settings(4)
    rounds.open_run(first, ["Failing"])
    algorithm = rounds.AlgorithmRounds("Failing", _FailingRounds(), {"n": np.float32(0)},
                                       first)
    record = rounds.RunRecord(first.out, rounds.summary_head(
        "toy", first, clients_per_round=2, context=TaskContext(num_clients=2)))
    with pytest.raises(RuntimeError, match="site lost"):
        rounds.record_run(record, rounds.metric_columns(extra=("where",)), [algorithm],
                          {"Failing": {"learning_rate": 0.1}})
    assert list(pd.read_csv(tmp_path / "metrics.csv")["round"]) == [1, 2]
    with pytest.raises(ValueError, match="already holds results"):
        rounds.open_run(settings(4), ["Failing"])
    with pytest.raises(ConfigError, match="--num-rounds 1"):
        rounds.open_run(settings(1, resume=True), ["Failing"])
    rounds.open_run(settings(4, resume=True), ["Failing"])   # goes on from round 2's checkpoint


def test_the_centralised_budget_counts_the_examples_a_federated_run_sees():
    """epochs_of: num_rounds x num_epochs passes over the sampled fraction uncapped; with
    --num-iters, the examples a capped client of mean size trains (by hand)."""
    from types import SimpleNamespace
    from tffre.runner.centralised import epochs_of
    settings = SimpleNamespace(num_rounds=12, clients_per_round=10, clients=20, batch_size=10)
    free = SimpleNamespace(num_epochs=10, num_iters=None)
    assert epochs_of("x", free, settings, [650] * 20) == 60        # 12 x 10 x 10/20
    capped = SimpleNamespace(num_epochs=10, num_iters=20)
    # a round: 10 clients x min(20 x 10, 10 x 650) = 2,000 examples; 12 rounds over 13,000
    assert epochs_of("x", capped, settings, [650] * 20) == round(12 * 2000 / 13000)
    # a cap above a client's passes does not bind: 10 clients x 10 x 15 a round
    small = [15] * 20
    assert epochs_of("x", capped, settings, small) == 60
    assert epochs_of("x", capped, settings) == 60    # no sizes: the uncapped count
