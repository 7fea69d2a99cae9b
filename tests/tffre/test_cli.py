"""The command line end to end: a run, its files, refusing to overwrite, and resuming after SIGKILL."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from tffre import runner
from tffre.data.synthetic_sets import make_synthetic
from tffre.models import logistic_regression
from tiny import run_experiment

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
SMALL = ["--dataset", "synthetic", "--clients", "6", "--clients-per-round", "3",
         "--num-epochs", "1", "--num-iters", "5", "--no-progress"]


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "tffre", *args], capture_output=True, text=True,
                          env=ENV, timeout=600)


def strict_json(path):
    """Parses JSON, refusing the non-standard NaN/Infinity tokens."""
    def refuse(token):
        raise ValueError(f"{path}: invalid JSON token {token}")
    return json.loads(path.read_text(), parse_constant=refuse)


def test_cli_smoke_run(tmp_path, cli_here):
    out = tmp_path / "res"
    proc = run_cli("run", *SMALL, "--algorithm", "fedavg,FedAttS", "--num-rounds", "3",
                   "--eval-every", "2", "--stepsize", "2", "--seed", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    frame = pd.read_csv(out / "metrics.csv")
    assert list(frame.columns[:10]) == ["algorithm", "round", "train_loss", "test_accuracy",
                                        "dev_accuracy", "test_f1", "dev_f1", "round_seconds",
                                        "bytes_broadcast", "bytes_uploaded"]
    assert frame[["test_f1", "dev_f1"]].isna().all().all()   # F1 is for relation extraction
    assert len(frame) == 6 and set(frame["algorithm"]) == {"FedAvg", "FedAttS"}
    assert frame["test_accuracy"].notna().tolist() == [False, True, True] * 2  # rounds 2 and 3
    summary = strict_json(out / "summary.json")
    assert set(summary["algorithms"]) == {"FedAvg", "FedAttS"}
    assert 0 <= summary["algorithms"]["FedAttS"]["max_test_accuracy"] <= 1
    assert summary["config"]["hparams"]["FedAvg"]["num_iters"] == 5
    assert summary["paper_table"] == "Table 8"
    assert (out / "curves.png").stat().st_size > 1000
    assert strict_json(out / "config.json")["hparams"]["FedAttS"]["stepsize"] == 2.0
    assert (out / "tensorboard" / "FedAttS").is_dir()   # tensorboard --logdir shows the run
    assert "FedAttS" in proc.stdout and "paper acc" in proc.stdout
    # The same clients each round for both algorithms, drawn from (seed, round).
    assert frame[frame.algorithm == "FedAvg"]["clients"].tolist() == \
        frame[frame.algorithm == "FedAttS"]["clients"].tolist()
    ids = [f"f_{k:05d}" for k in range(6)]
    assert frame["clients"].iloc[1].split() == runner.sample_clients(ids, 3, 1, 2)
    # The final models load with plain Keras.
    model = tf.keras.models.load_model(out / "models" / "FedAttS" / "model.keras")
    assert model.output_shape == (None, 10)

    # Running into the same --out again is refused, and nothing is touched.
    before = (out / "metrics.csv").read_text()
    again = cli_here("run", *SMALL, "--num-rounds", "2", "--out", str(out))
    assert again.returncode == 2 and "already holds results" in again.stderr
    assert (out / "metrics.csv").read_text() == before
    replaced = cli_here("run", *SMALL, "--num-rounds", "1", "--overwrite", "--out", str(out))
    assert replaced.returncode == 0, replaced.stderr[-2000:]
    assert len(pd.read_csv(out / "metrics.csv")) == 1
    assert not (out / "models" / "FedAttS").exists()


def test_no_cap_on_local_steps_from_the_command_line(tmp_path, cli_here):
    proc = cli_here("run", *SMALL[:-5], "--num-epochs", "2", "--num-iters", "none",
                    "--no-progress", "--num-rounds", "1", "--checkpoint-every", "0",
                    "--out", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = strict_json(tmp_path / "o" / "summary.json")
    assert summary["algorithms"]["FedAvg"]["hparams"]["num_iters"] is None
    row = pd.read_csv(tmp_path / "o" / "metrics.csv").iloc[0]
    data = make_synthetic(0.5, 0.5, num_clients=6, seed=0)
    sizes = dict(zip(data.client_ids, data.sizes("train")))
    # Two full epochs over each sampled client: nothing capped.
    assert row["num_examples"] == 2 * sum(sizes[c] for c in row["clients"].split())


def test_resume_after_sigkill_gives_the_uninterrupted_run(tmp_path, cli_here):
    """A run killed (SIGKILL, its own process) after the second algorithm's round 3 and
    resumed gives the uninterrupted run's rows and final weights."""
    args = [*SMALL, "--algorithm", "fedavg,fedatts", "--num-rounds", "8", "--checkpoint-every",
            "1", "--stepsize", "2", "--seed", "3"]
    full = cli_here("run", *args, "--out", str(tmp_path / "full"))
    assert full.returncode == 0, full.stderr[-2000:]

    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "tffre", "run", *args, "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    deadline = time.monotonic() + 300
    rows = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "metrics.csv").exists():
            rows = len((out / "metrics.csv").read_text().splitlines()) - 1
            if rows >= 11:   # the second algorithm is at round 3
                break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 11 <= rows < 16 and not (out / "summary.json").exists(), "killed too late"

    resumed = cli_here("run", *args, "--resume", "--out", str(out))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming after round" in resumed.stderr + resumed.stdout

    want = pd.read_csv(tmp_path / "full" / "metrics.csv").drop(columns=["round_seconds"])
    got = pd.read_csv(out / "metrics.csv").drop(columns=["round_seconds"])
    assert list(got["round"]) == list(want["round"]) and list(got.algorithm) == list(want.algorithm)
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=0, atol=1e-6)
    for name in ("FedAvg", "FedAttS"):
        a = tf.keras.models.load_model(tmp_path / "full" / "models" / name / "model.keras")
        b = tf.keras.models.load_model(out / "models" / name / "model.keras")
        diff = max(float(np.max(np.abs(x - y))) for x, y in zip(a.get_weights(), b.get_weights()))
        print(f"{name}: max |resumed - uninterrupted| final weight difference {diff:.3g}")
        assert diff <= 1e-6


#: The resume tests' finished run: FedAvg, 3 rounds (:func:`finished`).
FINISHED = ["run", *SMALL, "--algorithm", "fedavg", "--seed", "2"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A copy of one finished 3-round run (``FINISHED``) for each test: its folder.
    Trained once per module, as ``python -m tffre`` trains it (``tffre.cli.main``)."""
    import shutil
    from tffre import cli
    source = tmp_path_factory.mktemp("finished") / "run"
    assert cli.main(FINISHED + ["--num-rounds", "3", "--out", str(source)]) == 0

    def copy():
        target = tmp_path_factory.mktemp("resumed") / "run"   # mktemp numbers the folders
        shutil.copytree(source, target)
        return target
    return copy


def test_resume_refuses_a_changed_configuration(finished, cli_here):
    out = finished()
    proc = cli_here(*FINISHED, "--num-rounds", "3", "--mu", "0.5", "--algorithm", "fedprox",
                    "--resume", "--out", str(out))
    assert proc.returncode == 2
    assert "options differ from the saved run: --algorithm 'FedAvg' -> 'FedProx'" in proc.stderr


def test_interrupted_run_keeps_written_rows(tmp_path, monkeypatch):
    calls = {"n": 0}
    from tffre import evaluation
    real = evaluation.GlobalModelEvaluator

    class InterruptingEvaluator(real):
        def __call__(self, weights):
            calls["n"] += 1
            if calls["n"] == 3:
                raise KeyboardInterrupt
            return super().__call__(weights)

    # The runner builds its evaluator from the kinds' table (tffre.evaluation.EVALUATORS).
    monkeypatch.setitem(evaluation.EVALUATORS, "classification", InterruptingEvaluator)
    data = make_synthetic(0.5, 0.5, num_clients=4, seed=0)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(data, lambda: logistic_regression(60, 10),
                       loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                       algorithm_names=["fedavg"], num_rounds=5, clients_per_round=2,
                       out_dir=str(tmp_path))
    frame = pd.read_csv(tmp_path / "metrics.csv")
    assert frame["round"].tolist() == [1, 2]


def test_local_executor_from_the_command_line_matches_tff(tmp_path, cli_here):
    common = ["run", *SMALL, "--algorithm", "fedatts", "--num-rounds", "2", "--seed", "2",
              "--checkpoint-every", "0"]
    tff_run = cli_here(*common, "--executor", "tff", "--out", str(tmp_path / "tff"))
    local = cli_here(*common, "--executor", "local", "--max-parallel-clients", "2",
                     "--out", str(tmp_path / "local"))
    assert tff_run.returncode == 0 and local.returncode == 0, local.stderr[-2000:]
    a = pd.read_csv(tmp_path / "tff" / "metrics.csv")
    b = pd.read_csv(tmp_path / "local" / "metrics.csv")
    cols = ["train_loss", "test_accuracy", "bytes_uploaded", "bytes_broadcast", "num_examples"]
    pd.testing.assert_frame_equal(a[cols], b[cols], check_exact=False, rtol=1e-5, atol=1e-6)
    assert strict_json(tmp_path / "local" / "config.json")["executor"] == "local"


FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")


def test_data_check_reports_what_a_run_would_load(tmp_path):
    """``data check`` on a BioBERT-style GAD fold: the empty dev.tsv is noted, dev is the run's
    seeded slice of train, exit 0; a malformed line is reported with its file and line, exit 1;
    a dataset without a check, and an option of another dataset, are one-line errors."""
    fold = os.path.join(FIXTURES, "gad_fold")
    proc = run_cli("data", "check", "--dataset", "gad", "--data", fold)
    assert proc.returncode == 0, proc.stderr
    assert "dev.tsv: empty file" in proc.stdout and "no problems" in proc.stdout
    assert "split" in proc.stdout and "train" in proc.stdout and "dev" in proc.stdout
    bad = tmp_path / "bad"
    bad.mkdir()
    lines = open(os.path.join(fold, "train.tsv"), encoding="utf-8").read().splitlines()
    (bad / "train.tsv").write_text("\n".join(lines[:2] + ["only one column"] + lines[2:]) + "\n")
    proc = run_cli("data", "check", "--dataset", "gad", "--data", str(bad))
    assert proc.returncode == 1 and "train.tsv line 3" in proc.stdout, proc.stdout
    proc = run_cli("data", "check", "--dataset", "synthetic")
    assert proc.returncode == 2 and "--dataset synthetic has no data check" in proc.stderr
    proc = run_cli("data", "check", "--dataset", "gad", "--data", fold, "--eog-variant", "plain")
    assert proc.returncode == 2 and "--eog-variant applies to --dataset" in proc.stderr


def test_data_help_lists_check(capsys):
    """``data --help`` lists its action (exit 0); ``data`` alone or a misspelt action is a
    one-line error (exit 2)."""
    from tffre import cli
    with pytest.raises(SystemExit) as done:
        cli.main(["data", "--help"])
    assert done.value.code == 0 and "check" in capsys.readouterr().out
    for argv, message in ((["data"], "required: action"), (["data", "chek"], "invalid choice")):
        with pytest.raises(SystemExit) as done:
            cli.main(argv)
        err = capsys.readouterr().err
        assert done.value.code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_data_check_of_imcs_and_of_an_image_set(tmp_path):
    """``data check`` takes IMCS's --task and --max-len (the run's flags) and reads an image set;
    one IMCS file is the whole set, with the sentence sets' held-out test split (a test file's
    name earns a note); --task is IMCS's alone."""
    problems = os.path.join(os.path.dirname(__file__), "data", "fixtures", "imcs", "problems")
    proc = run_cli("data", "check", "--dataset", "imcs", "--data", problems, "--task",
                   "dialogue-act", "--max-len", "4")
    assert proc.returncode == 1, proc.stderr
    assert "label (--task dialogue-act)" in proc.stdout and "> 4" in proc.stdout
    assert ("IMCS-V2_train.json, example_id=103, sentence_id=2, field=speaker: missing field"
            in proc.stdout)
    from tffre import resources
    proc = run_cli("data", "check", "--dataset", "imcs", "--data",
                   os.path.join(resources.path("imcs_sample"), "IMCS-V2_test.json"))
    assert proc.returncode == 0, proc.stdout
    assert ("IMCS-V2_test.json: a single file is read as the whole set, although its name "
            "says 'test'") in proc.stdout
    train = os.path.join(resources.path("imcs_sample"), "IMCS-V2_train.json")
    with open(train, encoding="utf-8") as f:
        total = len(json.load(f))
    proc = run_cli("data", "check", "--dataset", "imcs", "--data", train)
    assert proc.returncode == 0, proc.stdout
    assert f"no test split: held out {round(total * 0.2)} of {total}" in proc.stdout
    proc = run_cli("data", "check", "--dataset", "imcs", "--task", "ner")
    assert proc.returncode == 2 and "task: expected one of symptom" in proc.stderr
    proc = run_cli("data", "check", "--dataset", "oct-c8")
    assert proc.returncode == 0 and "images" in proc.stdout and "no problems" in proc.stdout
    proc = run_cli("data", "check", "--dataset", "oct-c8", "--task", "symptom")
    assert proc.returncode == 2 and "--task applies to --dataset imcs" in proc.stderr


def test_resume_adds_the_centralised_bound_to_a_finished_run(tmp_path, finished, cli_here):
    """--resume --centralised on a finished run trains only the bound: the federated rows are
    kept as they were, and the bound's rows equal those of a run that had it from the start."""
    args = FINISHED + ["--num-rounds", "3"]
    both = cli_here(*args, "--centralised", "--out", str(tmp_path / "both"))
    assert both.returncode == 0, both.stderr[-2000:]
    out = finished()
    before = pd.read_csv(out / "metrics.csv")
    added = cli_here(*args, "--centralised", "--resume", "--out", str(out))
    assert added.returncode == 0, added.stderr[-2000:]
    got = pd.read_csv(out / "metrics.csv")
    pd.testing.assert_frame_equal(got[got.algorithm == "FedAvg"], before)   # not retrained
    want = pd.read_csv(tmp_path / "both" / "metrics.csv").drop(columns=["round_seconds"])
    pd.testing.assert_frame_equal(got.drop(columns=["round_seconds"]), want,
                                  check_exact=False, rtol=0, atol=1e-6)
    assert "Centralised" in strict_json(out / "summary.json")["algorithms"]


def test_the_centralised_grid_trains_one_run_per_rate(finished, cli_here):
    """--centralised-learning-rates adds one centralised run per rate to a finished run, each
    named by its rate; the rate of the plain bound gives the plain bound's rows."""
    args = FINISHED + ["--num-rounds", "3"]   # FedAvg's rate on the synthetic set: 0.01
    plain, grid = finished(), finished()
    assert cli_here(*args, "--centralised", "--resume", "--out", str(plain)).returncode == 0
    proc = cli_here(*args, "--centralised", "--centralised-learning-rates", "0.01,0.2",
                    "--resume", "--out", str(grid))
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = pd.read_csv(grid / "metrics.csv").drop(columns=["round_seconds"])
    want = pd.read_csv(plain / "metrics.csv").drop(columns=["round_seconds"])
    assert set(got.algorithm) == {"FedAvg", "Centralised lr 0.01", "Centralised lr 0.2"}
    same = got[got.algorithm == "Centralised lr 0.01"].assign(algorithm="Centralised")
    pd.testing.assert_frame_equal(same.reset_index(drop=True),
                                  want[want.algorithm == "Centralised"].reset_index(drop=True),
                                  check_exact=False, rtol=0, atol=1e-6)
    fast = got[got.algorithm == "Centralised lr 0.2"]
    assert not np.allclose(fast["test_accuracy"], same["test_accuracy"])
    entries = strict_json(grid / "summary.json")["algorithms"]
    assert entries["Centralised lr 0.2"]["learning_rate"] == 0.2
    refused = cli_here(*args, "--centralised-learning-rates", "0.01", "--out",
                       str(grid.parent / "other"))
    assert refused.returncode == 2
    assert "--centralised-learning-rates needs --centralised" in refused.stderr


def test_a_copied_run_resumes_in_its_new_folder_to_more_rounds(tmp_path, finished, cli_here):
    """A finished run copied to another --out and resumed there with more rounds gives the
    rows of a run that had those rounds from the start (the benchmark's longer settings)."""
    assert cli_here(*FINISHED, "--num-rounds", "5", "--out",
                    str(tmp_path / "five")).returncode == 0
    moved = finished()     # a copy: trained in another folder
    proc = cli_here(*FINISHED, "--num-rounds", "5", "--resume", "--out", str(moved))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "resuming after round 3" in proc.stdout + proc.stderr
    want = pd.read_csv(tmp_path / "five" / "metrics.csv").drop(columns=["round_seconds"])
    got = pd.read_csv(moved / "metrics.csv").drop(columns=["round_seconds"])
    assert list(got["round"]) == [1, 2, 3, 4, 5]
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=0, atol=1e-6)
    assert json.loads((moved / "config.json").read_text())["out"] == str(moved)


def test_resume_refuses_fewer_rounds_than_already_trained(finished, cli_here, monkeypatch):
    """--num-rounds may grow on resume, not shrink: a run with 3 rounds done resumed at 2 is
    refused (it would keep round 3 and report a 3-round run as a 2-round one), before any
    algorithm is built."""
    from tffre import builder

    def no_build(*args, **kwargs):
        raise AssertionError("an algorithm was built before the refusal")
    monkeypatch.setattr(builder, "build", no_build)
    out = finished()
    proc = cli_here(*FINISHED, "--num-rounds", "2", "--resume", "--out", str(out))
    assert proc.returncode == 2
    assert "already holds 3 rounds of FedAvg, more than --num-rounds 2" in proc.stderr
    assert len(pd.read_csv(out / "metrics.csv")) == 3               # nothing lost
    assert json.loads((out / "config.json").read_text())["num_rounds"] == 3   # nor rewritten
