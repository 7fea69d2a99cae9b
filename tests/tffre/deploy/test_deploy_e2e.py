"""End to end on loopback: a SuperLink (TLS, registered sites only) and two SuperNodes as separate
processes, two rounds reaching the local executor's weights, an unregistered site refused, and
nothing left running afterwards."""

import subprocess
import time

import numpy as np
import pandas as pd
import pytest

from local_reference import local_run
from loopback import DEPLOY, command_lines, left_behind, marked_environment, start_federation
from tiny import client_arrays

from tffre.deploy.launch import stop_all
from tffre.jsonio import read_json_object
from tffre.runner.checkpoints import Checkpoints

# A bound, not a speed test (machines differ 3x): the whole test takes ~75 s on a loaded
# 2-core machine; the run is stopped if it takes longer than this.
BUDGET = 360


@pytest.fixture
def env():
    with marked_environment() as mark:
        yield mark


def test_two_sites_two_rounds_over_tls_with_site_authentication(tmp_path, env):
    start = time.monotonic()
    arrays = dict(zip("ab", client_arrays([12, 16], seed=3)))
    for k, (x, y) in arrays.items():
        np.savez(tmp_path / f"{k}.npz", x=x, y=y)
    data = {"a": tmp_path / "a.npz", "b": tmp_path / "b.npz", "rogue": tmp_path / "a.npz"}
    daemons = []
    try:
        app = start_federation(tmp_path, data, "deploy_tiny_task:TASK", daemons,
                               registered=("a", "b"))
        out = tmp_path / "out"
        run = subprocess.run(DEPLOY + [
            "run", "--app", str(app), "--dataset", "synthetic", "--algorithm", "fedavg",
            "--deploy-task", "deploy_tiny_task:TASK", "--num-rounds", "2",
            "--learning-rate", "0.05", "--num-epochs", "1", "--num-iters", "4",
            "--batch-size", "4", "--min-nodes", "2", "--round-timeout", "60",
            "--start-timeout", "180", "--out", str(out)],
            timeout=BUDGET - (time.monotonic() - start), capture_output=True, text=True)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        rows = pd.read_csv(out / "metrics.csv")
        assert list(rows["round"]) == [1, 2] and list(rows["clients"]) == ["a b", "a b"]
        assert "round 2: sites a b" in run.stdout
        assert read_json_object(str(out / "deploy.json"))["sites"] == ["a", "b"]
        # The SuperLink's ServerApp executor runs through tffre's launcher (no TensorFlow).
        executors = [line for line in command_lines(env) if "flower-superexec" in line]
        assert executors and all("-m tffre.deploy.launch flower-superexec" in line
                                 for line in executors), executors
        assert (out / "summary.json").exists()
        want, _ = local_run("FedAvg", arrays, {"learning_rate": 0.05, "num_epochs": 1,
                                               "num_iters": 4}, 2)
        got, done = Checkpoints(str(out / "checkpoints" / "FedAvg")).load_latest(want)
        assert done == 2
        for g, w in zip(got["model"].trainable, want["model"].trainable):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        # A run that fails (too few sites for its min-nodes) makes deploy run exit 1.
        failed = subprocess.run(DEPLOY + [
            "run", "--app", str(app), "--dataset", "synthetic", "--algorithm", "fedavg",
            "--deploy-task", "deploy_tiny_task:TASK", "--num-rounds", "1", "--min-nodes", "3",
            "--start-timeout", "2", "--out", str(tmp_path / "failed")],
            timeout=max(BUDGET - (time.monotonic() - start), 1), capture_output=True,
            text=True)
        assert failed.returncode == 1, failed.stdout[-2000:] + failed.stderr[-2000:]
        assert "ended finished:failed" in failed.stderr
        # The unregistered site was refused by the SuperLink and stopped: one line, never
        # "ClientApp serving", no traceback in its log nor in its daemon's.
        rogue = daemons[-1]
        rogue.process.wait(timeout=30)
        assert rogue.process.returncode == 1
        said = (tmp_path / "rogue.log").read_text()
        assert said.splitlines()[-1] == (
            "python -m tffre deploy supernode: error: site rogue: the SuperLink refused it: No "
            "SuperNode found with the given public key. (FAILED_PRECONDITION); see "
            f"{tmp_path / 'rogue.daemon.log'}")
        daemon_said = (tmp_path / "rogue.daemon.log").read_text()
        assert "ClientApp serving" not in said and "admitted" not in said
        assert "Traceback" not in said + daemon_said
        assert "tffre: the SuperLink refused this SuperNode: No SuperNode found" in daemon_said
        # The sites with TLS: admitted, and no line calls anything insecure (their ClientApp's
        # channel to the SuperNode is on loopback and says so).
        for site in "ab":
            said = (tmp_path / f"{site}.log").read_text()
            assert f"site {site}: data {tmp_path / (site + '.npz')}: " in said
            assert f"site {site}: SuperNode " in said and "ClientApp serving" in said
            assert "ClientApp connected to its SuperNode on loopback 127.0.0.1:" in said
            assert "insecure" not in (said + (tmp_path / f"{site}.daemon.log").read_text()
                                      ).lower()
    finally:
        stop_all(daemons)
    left = left_behind(env)
    assert not left, left
