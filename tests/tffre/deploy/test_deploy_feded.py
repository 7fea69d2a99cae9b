"""FedED across sites in-process: D_v at the server, its inputs sent to each site once, its
labels never; the deployed rounds equal the local executor's, and SecAgg+'s within its bound."""

import json

import numpy as np
import pandas as pd
import pytest

from deploy_fakes import FakeGrid, TinyTask, run_config
from local_reference import local_run
from tiny import client_arrays

from tffre.deploy.client_app import make_client_app
from tffre.deploy.client_app import NodeRuntime
from tffre.deploy.protocol import read_content
from tffre.deploy.server_app import run_server
from tffre.federation import split_round
from tffre.runner.checkpoints import Checkpoints

SITES = ("a", "b", "c")
ARRAYS = dict(zip(SITES, client_arrays([8, 10, 6], seed=1)))
D_V = client_arrays([12], seed=9)[0]   # the server's labelled set: x [12, 6] float32, y int32
HPARAMS = {"learning_rate": 0.05, "num_epochs": 2, "num_iters": 5}
ROUNDS = 2
MAX_WEIGHT, CLIP = 16.0, 8.0   # a contribution also holds the training sums (<= 16 examples)


def deploy(tmp_path, tag, task=None, d_v=D_V, **config):
    """``ROUNDS`` rounds of FedED over a FakeGrid; D_v from an .npz at the server. Returns
    (grid, out folder)."""
    task = task or TinyTask(ARRAYS)
    nodes = {s: (make_client_app(NodeRuntime(task)),
                 {"site": s, "state-dir": str(tmp_path / tag / "sites" / s)}) for s in SITES}
    grid = FakeGrid(nodes)
    path = tmp_path / "d_v.npz"
    np.savez(path, x=d_v[0], y=d_v[1])
    out = tmp_path / tag / "out"
    # dataset "gad": the task whose options have server-data (the sites' TinyTask ignores it).
    config = {"server-data": str(path), "num-rounds": ROUNDS, **config}
    run_server(grid, run_config("FedED", out, dataset="gad", **config), task=task)
    return grid, out


def message_bytes(message):
    """Every serialized object of ``message`` (what crosses the wire), joined."""
    from flwr.common.inflatable import get_all_nested_objects
    return b"".join(obj.deflate() for obj in get_all_nested_objects(message).values())


def test_deployed_feded_equals_the_local_executor_and_sends_d_v_once(tmp_path):
    want, _ = local_run("FedED", ARRAYS, HPARAMS, ROUNDS, server_data=D_V)
    grid, out = deploy(tmp_path, "plain")
    got, done = Checkpoints(str(out / "checkpoints" / "FedED")).load_latest(want)
    assert done == ROUNDS
    for g, w in zip(got["model"].trainable, want["model"].trainable):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    start = local_run("FedED", ARRAYS, HPARAMS, 0, server_data=D_V)[0]
    assert not np.allclose(got["model"].trainable[0], start["model"].trainable[0])
    # D_v's inputs: in round 1's training messages only, one per site, the server's values.
    carrying = [(m.metadata.group_id, m.metadata.dst_node_id) for m in grid.sent
                if "extras/server_x" in (read_content(m.content)[1] or {})]
    assert sorted(carrying) == sorted(("1", nid) for nid in grid.nodes)
    first = next(m for m in grid.sent if m.metadata.group_id == "1")
    np.testing.assert_array_equal(read_content(first.content)[1]["extras/server_x"], D_V[0])
    rows = pd.read_csv(out / "metrics.csv")
    assert rows["bytes_broadcast"][0] - rows["bytes_broadcast"][1] == 3 * D_V[0].nbytes
    # The job tells the sites D_v's shape only.
    job = json.loads(json.loads((out / "deploy.json").read_text())["job"])
    assert job["server_inputs"] == {"shape": [12, 6], "dtype": "float32"}
    # D_v's labels: in no message either way, in any integer or float form; the same search
    # finds D_v's inputs in round 1's broadcast (the search can find what it looks for).
    labels = D_V[1]
    assert len(set(labels.tolist())) > 1
    forms = [labels.astype(t).tobytes() for t in (np.int32, np.int64, np.float32, np.float64)]
    forms.append(json.dumps(labels.tolist()).encode())
    assert D_V[0].tobytes() in message_bytes(first)
    for message in grid.sent + grid.received:
        blob = message_bytes(message)
        assert not any(form in blob for form in forms), message.metadata.group_id


def teacher_means(monkeypatch):
    """Records each round's aggregate at the server (SplitRound.update's argument)."""
    seen = []
    update = split_round.SplitRound.update

    def spy(self, state, aggregate):
        seen.append(np.array(aggregate["extra"]["mean"]))
        return update(self, state, aggregate)
    monkeypatch.setattr(split_round.SplitRound, "update", spy)
    return seen


def test_secure_feded_equals_plain_within_the_quantization_bound(tmp_path, monkeypatch):
    seen = teacher_means(monkeypatch)
    _, plain = deploy(tmp_path, "plain")
    plain_means = list(seen)
    seen.clear()
    grid, secure = deploy(tmp_path, "secure", secagg=True, **{"secagg-max-weight": MAX_WEIGHT,
                                                               "secagg-clip": CLIP})
    assert len(plain_means) == len(seen) == ROUNDS
    # Round 1 (the same model at every site either way): the teacher mean z = sum / count,
    # each off by at most K W 2C / 2**22 (K = 3 sites): z by 2 W 2C / 2**22.
    bound = 2 * MAX_WEIGHT * 2 * CLIP / 2 ** 22
    np.testing.assert_allclose(seen[0], plain_means[0], rtol=0, atol=bound)
    assert np.all((plain_means[0] >= 0) & (plain_means[0] <= 1))
    want, _ = Checkpoints(str(plain / "checkpoints" / "FedED")).load_latest(
        local_run("FedED", ARRAYS, HPARAMS, 0, server_data=D_V)[0])
    got, _ = Checkpoints(str(secure / "checkpoints" / "FedED")).load_latest(want)
    for g, w in zip(got["model"].trainable, want["model"].trainable):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-4)
    # Securely too, D_v's inputs reach a site once: in round 1's collect stage (FitIns).
    collect = [m.content.config_records["fitins.config"] for m in grid.sent
               if "fitins.parameters" in m.content.array_records]
    carrying = [int(c["round"]) for c in collect if "extras/server_x" in json.loads(c["arrays"])]
    assert len(collect) == 3 * ROUNDS and carrying == [1, 1, 1]


@pytest.mark.parametrize("teacher", ["logits", "probabilities"])
def test_log_probabilities_beyond_the_secure_range_are_refused_naming_the_case(teacher):
    """A site's FedED contribution with log-probabilities below -C W (the tiny models' tanh
    layer cannot produce them: the encoding a site runs, with the hints its job gives)."""
    import collections
    from tffre.deploy import secagg
    from tffre.deploy.tasks import DeployJob
    job = DeployJob(task="t", dataset="gad", algorithm="FedED", hparams={"teacher": teacher},
                    options={}, batch_size=4, seed=0)
    contribution = collections.OrderedDict(
        extra=collections.OrderedDict(total=np.full((2, 3), -50.0, np.float32),
                                      weight=np.float32(1)),
        metrics=collections.OrderedDict(loss=[np.float32(3.0)]))
    with pytest.raises(ValueError, match="extra/total reaches -50, beyond secagg-clip x "
                                         "secagg-max-weight = 32; raise secagg-max-weight") as err:
        secagg.encode(contribution, 16.0, 2.0, hints=secagg.range_hints(job))
    assert "\n" not in str(err.value)
    assert ("teacher=logits uploads log-probabilities" in str(err.value)) == (teacher == "logits")


@pytest.mark.parametrize("extra,why", [
    ({"server-fraction": 0.2}, "server-fraction: a deployment's server holds no training data"),
    ({"server-data": ""}, "FedED needs the server's labelled set D_v: give server-data")])
def test_server_fraction_and_a_missing_d_v_are_refused_in_one_line(extra, why, tmp_path):
    task = TinyTask(ARRAYS)
    config = run_config("FedED", tmp_path / "out", dataset="gad", **extra)
    with pytest.raises(ValueError, match=why) as err:
        run_server(FakeGrid({}), config, task=task)
    assert "\n" not in str(err.value)
