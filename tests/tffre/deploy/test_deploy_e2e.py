"""End to end on loopback: a SuperLink (TLS, registered sites only) and two SuperNodes as separate
processes, two rounds reaching the local executor's weights, an unregistered site refused, and
nothing left running afterwards."""

import os
import subprocess
import sys
import time
import uuid

import numpy as np
import pandas as pd
import psutil
import pytest

from local_reference import local_run
from tiny import client_arrays

from tffre.deploy.launch import Daemon, free_port, stop_all, wait_for_port
from tffre.jsonio import read_json_object
from tffre.runner.checkpoints import Checkpoints

HERE = os.path.dirname(os.path.abspath(__file__))
DEPLOY = [sys.executable, "-m", "tffre.deploy"]
# A bound, not a speed test (machines differ 3x): the whole test takes ~75 s on a loaded
# 2-core machine; the run is stopped if it takes longer than this.
BUDGET = 360


def marked(mark):
    """The live processes whose environment carries ``mark`` (started by this test)."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get("TFFRE_TEST_MARK") == mark and \
                    proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            pass
    return found


@pytest.fixture
def env():
    mark = uuid.uuid4().hex
    path = os.pathsep.join([HERE, os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")])
    values = {"TFFRE_TEST_MARK": mark, "PYTHONPATH": path, "FLWR_TELEMETRY_ENABLED": "0",
              "TF_CPP_MIN_LOG_LEVEL": "3"}
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    yield mark
    for key, value in old.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def test_two_sites_two_rounds_over_tls_with_site_authentication(tmp_path, env):
    start = time.monotonic()
    ports = {k: free_port() for k in ("fleet", "control", "serverappio")}
    certs, app = tmp_path / "certs", tmp_path / "app"
    subprocess.run(DEPLOY + ["certs", "--out", str(certs), "--sites", "a,b,rogue"], check=True,
                   timeout=60)
    subprocess.run(DEPLOY + ["app", "--out", str(app), "--superlink",
                             f"127.0.0.1:{ports['control']}", "--ca", str(certs / "ca.crt")],
                   check=True, timeout=60)
    arrays = dict(zip("ab", client_arrays([12, 16], seed=3)))
    for k, (x, y) in arrays.items():
        np.savez(tmp_path / f"{k}.npz", x=x, y=y)
    daemons = []
    try:
        superlink = Daemon(DEPLOY + [
            "superlink", "--certs", str(certs), "--state-dir", str(tmp_path / "superlink"),
            "--host", "127.0.0.1", "--fleet-port", str(ports["fleet"]),
            "--control-port", str(ports["control"]),
            "--serverappio-port", str(ports["serverappio"])],
            log=str(tmp_path / "superlink.log"), name="superlink")
        daemons.append(superlink)
        wait_for_port("127.0.0.1", ports["control"], 60, superlink)
        for site in "ab":
            subprocess.run(DEPLOY + ["register", "--app", str(app), "--key",
                                     str(certs / "sites" / f"{site}.pub")],
                           check=True, timeout=60, capture_output=True)
        for site in ("a", "b", "rogue"):
            data = tmp_path / f"{'a' if site == 'rogue' else site}.npz"
            daemons.append(Daemon(DEPLOY + [
                "supernode", "--superlink", f"127.0.0.1:{ports['fleet']}",
                "--ca", str(certs / "ca.crt"), "--key", str(certs / "sites" / f"{site}.key"),
                "--site", site, "--data", str(data), "--task", "deploy_tiny_task:TASK",
                "--state-dir", str(tmp_path / "sites" / site), "--poll", "0.1",
                "--log", str(tmp_path / f"{site}.daemon.log")],
                log=str(tmp_path / f"{site}.log"), name=site))
        out = tmp_path / "out"
        run = subprocess.run(DEPLOY + [
            "run", "--app", str(app), "--dataset", "synthetic", "--algorithm", "fedavg",
            "--deploy-task", "deploy_tiny_task:TASK", "--num-rounds", "2",
            "--learning-rate", "0.05", "--num-epochs", "1", "--num-iters", "4",
            "--batch-size", "4", "--min-nodes", "2", "--round-timeout", "60",
            "--start-timeout", "60", "--out", str(out)],
            timeout=BUDGET - (time.monotonic() - start), capture_output=True, text=True)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        rows = pd.read_csv(out / "metrics.csv")
        assert list(rows["round"]) == [1, 2] and list(rows["clients"]) == ["a b", "a b"]
        assert "round 2: sites a b" in run.stdout
        assert read_json_object(str(out / "deploy.json"))["sites"] == ["a", "b"]
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
        # The unregistered site was refused by the SuperLink and stopped.
        rogue = daemons[-1]
        rogue.process.wait(timeout=30)
        assert rogue.process.returncode == 1
        with open(tmp_path / "rogue.log") as f:
            assert "the SuperLink refused it: No SuperNode found with the given public key" \
                in f.read()
    finally:
        stop_all(daemons)
    deadline = time.monotonic() + 30
    while marked(env) and time.monotonic() < deadline:
        time.sleep(0.5)   # flwr's helpers notice their parent is gone within seconds
    assert not marked(env), [" ".join(p.cmdline()[:4]) for p in marked(env)]
