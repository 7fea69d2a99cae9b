"""A run's results depend on its settings and seed only (issue 30, "a site administrator's
view"), across real processes on loopback: a SuperLink (TLS, registered sites only) and two
sites whose model has dropout, so that what a site's round draws shows in the results.

* The same run twice on the same running ``deploy supernode`` sites gives the same metrics
  and weights (to 1e-6): a site's process carries nothing from one run to the next
  (``tffre.federation.seeding``).
* The README's plain-Flower commands, as written (parsed from docs/tutorials/deploy.md, where
  they moved from the README; only the ports, the sites' data and the run's options are the
  test's), give the same run again with Flower's default ``--isolation subprocess``: a fresh
  process for every message. Opt-in
  (``TFFRE_DEPLOY_PLAIN=1``): unpatched Flower (its fixed waits, its SuperLink's races:
  ``tffre.deploy.flower_patches``), and every message imports TensorFlow anew: 95-106 s
  here, after the first test's 50-85 s.

Every wait is bounded, servers listen on 127.0.0.1 only, and afterwards no process the test
started is left (psutil, by the environment mark). Run the opt-in part with::

    TFFRE_DEPLOY_PLAIN=1 FLWR_TELEMETRY_ENABLED=0 python -m pytest -q -s \\
        -p no:cacheprovider tests/tffre/deploy/test_deploy_repeat.py
"""

import os
import re
import shlex
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from deploy_tiny_task import DROPOUT
from loopback import DEPLOY, left_behind, marked_environment, start_federation
from tiny import client_arrays

from tffre.deploy.launch import Daemon, free_port, stop_all, wait_for_port
from tffre.runner.checkpoints import Checkpoints

TASK = "deploy_tiny_task:DROPOUT"
ARRAYS = dict(zip("ab", client_arrays([12, 16], seed=3)))
# The run (python -m tffre run's names): Adam and dropout, two rounds, evaluated each round.
RUN = {"dataset": "synthetic", "algorithm": "fedavgt", "deploy-task": TASK, "num-rounds": 2,
       "learning-rate": 0.05, "num-epochs": 1, "num-iters": 4, "batch-size": 4, "seed": 0,
       "min-nodes": 2, "round-timeout": 300, "start-timeout": 120}
# What a run computed (not its timings): compared to 1e-6.
COMPARED = re.compile(r"loss|accuracy|f1|num_examples|num_excluded")
BUDGET = 600   # seconds per run: a bound against a hang, not a speed test
README = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "tutorials",
                      "deploy.md")
README_BLOCK = "# Plain Flower: a SuperLink and two sites on one machine"


def write_data(folder):
    data = {}
    for site, (x, y) in ARRAYS.items():
        data[site] = folder / f"{site}.npz"
        np.savez(data[site], x=x, y=y)
    return data


def results(out):
    """(the compared columns of metrics.csv, the final trainable weights)."""
    rows = pd.read_csv(out / "metrics.csv")
    assert list(rows["round"]) == [1, 2] and list(rows["clients"]) == ["a b", "a b"], rows
    columns = [c for c in rows.columns if COMPARED.search(c)]
    assert {"local_train_loss", "train_loss", "test_accuracy"} <= set(columns), columns
    state, done = Checkpoints(str(out / "checkpoints" / "FedAvgT")).load_latest(
        state_structure())
    assert done == 2
    return rows[columns], [np.asarray(w) for w in state["model"].trainable]


def state_structure():
    """A FedAvgT server state of the dropout model (the structure its checkpoints load into)."""
    from tffre.definition import TaskContext
    from tffre.deploy.round_factory import make_round
    parts, _, _ = make_round("FedAvgT", DROPOUT.model_fn(), loss=DROPOUT.loss(),
                             input_spec=DROPOUT.model(None, None).input_spec, hparams={},
                             context=TaskContext(num_clients=2, clients_per_round=2))
    return parts.initialize()


def assert_same(got, want):
    pd.testing.assert_frame_equal(got[0], want[0], rtol=1e-6, atol=1e-6)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.fixture(scope="module")
def repeated(tmp_path_factory):
    """The run twice on the same two running ``deploy supernode`` sites: their results."""
    tmp = tmp_path_factory.mktemp("repeat")
    with marked_environment() as mark:
        daemons = []
        try:
            app = start_federation(tmp, write_data(tmp), TASK, daemons)
            for name in ("first", "again"):
                run = subprocess.run(
                    DEPLOY + ["run", "--app", str(app), "--out", str(tmp / name)]
                    + [f"--{k}={v}" for k, v in RUN.items()],
                    timeout=BUDGET, capture_output=True, text=True)
                assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        finally:
            stop_all(daemons)
        left = left_behind(mark)
    assert not left, left
    # Read outside the mark: building the state's structure here may start TFF's helpers.
    return {name: results(tmp / name) for name in ("first", "again")}


def test_a_run_repeated_on_running_sites_gives_the_same_results(repeated):
    # Before tffre.federation.seeding, the second run's rounds continued the first run's dropout
    # streams at each site (test_deploy_seeding shows the masks matter).
    assert_same(repeated["again"], repeated["first"])


def readme_commands():
    """The README's plain-Flower block: each command as (environment, arguments, background),
    continuation lines joined, comments dropped."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    start = text.index(README_BLOCK)
    block = text[start:text.index("```", start)]
    joined = re.sub(r"\\\n\s*", " ", block)
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        env = {}
        while re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        background = words[-1] == "&"
        commands.append((env, words[:-1] if background else words, background))
    return commands


@pytest.mark.skipif(os.environ.get("TFFRE_DEPLOY_PLAIN") != "1",
                    reason="opt-in: set TFFRE_DEPLOY_PLAIN=1 (plain Flower, unpatched, "
                           "a process per message: 1.5 minutes)")
def test_the_readmes_plain_flower_commands_give_the_same_run(repeated, tmp_path, monkeypatch):
    commands = readme_commands()
    assert [c[1][0] for c in commands] == [
        "source", "python", "python", "flower-superlink", "flwr", "flwr", "flower-supernode",
        "flower-supernode", "flwr"]
    ports = {p: free_port() for p in range(9091, 9096)}
    data = write_data(tmp_path)
    monkeypatch.chdir(tmp_path)   # "each command from the same folder"
    with marked_environment() as mark:
        # Flower's own files (flwr run's, the SuperLink's) stay in the test's folder.
        env = dict(os.environ, FLWR_HOME=str(tmp_path / "flwr-home"))
        daemons = []
        try:
            for extra, words, background in commands:
                words = [_local(w, ports, data) for w in words]
                if words[0] == "source":   # the venv's bin folder first on PATH
                    assert words[1] == ".venv/bin/activate"
                    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
                    continue
                if words[0] == "python":
                    words[0] = sys.executable
                if words[:2] == ["flwr", "run"]:
                    words = _run_config(words)
                if background:
                    name = f"{words[0]}-{len(daemons)}"
                    daemons.append(Daemon(words, log=str(tmp_path / f"{name}.log"),
                                          env={**env, **extra}, name=name))
                    if words[0] == "flower-superlink":
                        wait_for_port("127.0.0.1", ports[9093], 120, daemons[-1])
                    continue
                done = subprocess.run(words, env={**env, **extra}, capture_output=True,
                                      text=True, timeout=BUDGET)
                assert done.returncode == 0, (words, done.stdout[-3000:], done.stderr[-3000:])
        finally:
            stop_all(daemons)
        left = left_behind(mark)
    assert not left, left
    # flwr run exits 0 whatever became of the run: its output and the SuperLink's log say why.
    out = tmp_path / "results" / "gad"
    assert (out / "metrics.csv").exists(), \
        done.stdout[-3000:] + (tmp_path / "flower-superlink-0.log").read_text()[-3000:]
    assert_same(results(out), repeated["first"])


def _local(word, ports, data):
    """A README word for this test: its ports free ones, a site's data folder its .npz file
    (with the test's task)."""
    for port, free in ports.items():
        word = word.replace(f"127.0.0.1:{port}", f"127.0.0.1:{free}")
    found = re.search(r'data="data/(\w+)"', word)
    if found:
        word = word.replace(found.group(0),
                            f'data="{data[found.group(1)]}" task="{TASK}"')
    return word


def _run_config(words):
    """``flwr run``'s --run-config: the README's keys (dataset, algorithm, num-rounds, out) and
    the test's run options (its own dataset and task; ``out`` as the README gives it)."""
    i = words.index("--run-config") + 1
    given = dict(re.findall(r'([\w-]+)=("[^"]*"|\S+)', words[i]))
    assert set(given) == {"dataset", "algorithm", "num-rounds", "out"}, given
    values = {**RUN, "out": given["out"].strip('"')}
    # As deploy run passes them: strings, which the ServerApp reads as python -m tffre run's
    # options.
    words[i] = " ".join(f'{k}="{v}"' for k, v in values.items())
    return words
