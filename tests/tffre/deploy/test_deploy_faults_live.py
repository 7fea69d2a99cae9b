"""Issue 22 item 6 across real processes on loopback (opt-in: ``TFFRE_DEPLOY_FAULTS=1``): a
SuperNode killed in the middle of a round, and the SuperLink killed (its ServerApp with it)
then the run resumed. The default suite checks the same logic in-process
(``test_deploy_faults``: the server's side of each fault over Flower's serialization); this
module shows it with the real daemons: a SuperLink with TLS and registered sites, and one
SuperNode process per site.

Not in the default suite: each test starts four daemons and runs for one to three minutes.
Run it with::

    TFFRE_DEPLOY_FAULTS=1 FLWR_TELEMETRY_ENABLED=0 python -m pytest -q -s \\
        -p no:cacheprovider tests/tffre/deploy/test_deploy_faults_live.py

Every wait is bounded (a hang fails the test instead of stalling the suite) and afterwards no
process the test started is left (psutil, by the environment mark).
"""

import os
import re
import signal
import subprocess
import time

import numpy as np
import pandas as pd
import pytest

from local_reference import local_run
from loopback import DEPLOY, left_behind, marked_environment, start_federation, supernode
from tiny import client_arrays

from tffre.deploy.launch import Daemon, stop_all, wait_for_port
from tffre.runner.checkpoints import Checkpoints

pytestmark = pytest.mark.skipif(os.environ.get("TFFRE_DEPLOY_FAULTS") != "1",
                                reason="opt-in: set TFFRE_DEPLOY_FAULTS=1 (minutes, 4 daemons)")

BUDGET = 600   # seconds per test: a bound against a hang, not a speed test
HPARAMS = {"learning_rate": 0.05, "num_epochs": 1, "num_iters": 4}


@pytest.fixture
def env():
    with marked_environment() as mark:
        yield mark


def run_command(app, out, rounds, *extra):
    return DEPLOY + [
        "run", "--app", str(app), "--dataset", "synthetic", "--algorithm", "fedavg",
        "--deploy-task", "deploy_tiny_task:TASK", "--num-rounds", str(rounds),
        "--learning-rate", "0.05", "--num-epochs", "1", "--batch-size", "4", "--seed", "0",
        "--start-timeout", "120", "--out", str(out)] + list(extra)


def rounds_written(out):
    """The rounds in ``out``'s metrics.csv so far (none while it does not exist)."""
    try:
        return list(pd.read_csv(out / "metrics.csv")["round"])
    except (OSError, ValueError, KeyError, pd.errors.EmptyDataError):
        return []


def wait_until(condition, deadline, what, run=None):
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        if run is not None and run.poll() is not None:
            raise AssertionError(f"deploy run exited ({run.returncode}) before {what}: "
                                 f"{run.stdout.read()[-3000:]}")
        time.sleep(0.2)


def kill(daemon):
    """SIGKILL to every process of ``daemon``'s group, then reaps it."""
    for proc in daemon.group():
        proc.send_signal(signal.SIGKILL)
    stop_all([daemon], timeout=5)


def test_a_supernode_killed_mid_round_is_named_and_rejoins_after_restart(tmp_path, env):
    deadline = time.monotonic() + BUDGET
    # Site c holds many rows and trains a whole epoch each round (seconds), so that it is
    # killed while it trains round 2; a and b are quicker. The run is long enough for c to
    # come back (flwr 1.23 lets a restarted node in only once its old connection lapsed,
    # up to a minute): the test stops it once c has taken part again.
    sizes = {"a": 2000, "b": 2000, "c": 40000}
    for (site, n), (x, y) in zip(sizes.items(), client_arrays(list(sizes.values()), seed=3)):
        np.savez(tmp_path / f"{site}.npz", x=x, y=y)
    data = {s: tmp_path / f"{s}.npz" for s in sizes}
    daemons = []
    log = tmp_path / "run.log"
    try:
        app, ports = start_federation(tmp_path, data, "deploy_tiny_task:TASK", daemons,
                                      ports=True)
        out = tmp_path / "out"
        with open(log, "w") as printed:
            run = subprocess.Popen(run_command(app, out, 500, "--num-iters", "0",
                                               "--min-nodes", "2", "--round-timeout", "20"),
                                   stdout=printed, stderr=subprocess.STDOUT)
        wait_until(lambda: 1 in rounds_written(out), deadline, "round 1", run)
        time.sleep(1.0)   # round 2 is out; c trains it for seconds
        c = next(d for d in daemons if d.name == "c")
        kill(c)   # the site is gone mid-round, without a word
        daemons.remove(c)
        assert "train 2:" not in (tmp_path / "c.log").read_text(), \
            "c finished round 2 before it was killed"
        # It restarts at once (same key, same folder).
        daemons.append(supernode(tmp_path, "c", data["c"], "deploy_tiny_task:TASK", ports))

        def rejoined():
            rows = pd.read_csv(out / "metrics.csv").fillna("")
            return any(r > 2 and c == "a b c" for r, c in zip(rows["round"], rows["clients"]))
        wait_until(rejoined, deadline, "c to take part again", run)
        rows = pd.read_csv(out / "metrics.csv").fillna("")
        assert rows["clients"][0] == "a b c"
        # Round 2 went on with a and b, and names c as missing.
        assert (rows["round"][1], rows["clients"][1], rows["missing_clients"][1]) == \
            (2, "a b", "c"), rows.head(3)
        # The server's log names it: no reply within the round's timeout, or Flower's answer
        # for the node ("Node Unavailable"), whichever came first.
        assert re.search(r"round 2: (no reply from site\(s\) c within 20 s|site c \(node \d+\): "
                         r".*going on without it)", log.read_text()), log.read_text()[-3000:]
        # Until c is back, every round names it missing.
        back = next(i for i in range(2, len(rows)) if rows["clients"][i] == "a b c")
        assert all(rows["missing_clients"][i] == "c" for i in range(1, back))
    finally:
        if "run" in locals() and run.poll() is None:
            run.kill()
            run.wait()
        stop_all(daemons)
    left = left_behind(env)
    assert not left, left


def test_a_killed_superlink_then_resume_reaches_the_uninterrupted_weights(tmp_path, env):
    deadline = time.monotonic() + BUDGET
    arrays = dict(zip("abc", client_arrays([8, 10, 6], seed=1)))
    for site, (x, y) in arrays.items():
        np.savez(tmp_path / f"{site}.npz", x=x, y=y)
    data = {s: tmp_path / f"{s}.npz" for s in arrays}
    rounds = 4
    daemons = []
    try:
        app, ports = start_federation(tmp_path, data, "deploy_tiny_task:TASK", daemons,
                                      ports=True)
        out = tmp_path / "out"
        command = run_command(app, out, rounds, "--num-iters", "4", "--min-nodes", "3",
                              "--round-timeout", "60")
        run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
        try:
            wait_until(lambda: 2 in rounds_written(out), deadline, "round 2", run)
            superlink = next(d for d in daemons if d.name == "superlink")
            kill(superlink)   # the SuperLink and its ServerApp die without cleaning up
            daemons.remove(superlink)
            run.communicate(timeout=max(deadline - time.monotonic(), 1))
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        done = max(rounds_written(out))
        assert done < rounds, "the run ended before the SuperLink was killed"
        # The SuperLink restarts on its ports with its database (the registered keys); the
        # SuperNodes reconnect by themselves; the run continues from its last checkpoint.
        daemons.append(Daemon(superlink.command, log=str(tmp_path / "superlink.2.log"),
                              name="superlink"))
        # flwr run does not wait for a SuperLink that is still starting: it gives up at once.
        wait_for_port("127.0.0.1", ports["control"], 60, daemons[-1])
        resumed = subprocess.run(command + ["--resume"], capture_output=True, text=True,
                                 timeout=max(deadline - time.monotonic(), 1))
        printed = resumed.stdout + resumed.stderr
        assert resumed.returncode == 0, printed[-3000:]
        assert "resuming after round" in printed
        assert list(pd.read_csv(out / "metrics.csv")["round"]) == list(range(1, rounds + 1))
        want, _ = local_run("FedAvg", arrays, HPARAMS, rounds)
        got, last = Checkpoints(str(out / "checkpoints" / "FedAvg")).load_latest(want)
        assert last == rounds
        for g, w in zip(got["model"].trainable, want["model"].trainable):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    finally:
        stop_all(daemons)
    left = left_behind(env)
    assert not left, left
