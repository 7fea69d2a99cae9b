"""A deployment's faults, in-process: a site that dies mid-run and comes back, a server killed
and resumed, a site with malformed data, a site that sends NaN, and the constant weights sent
to a site once."""

import collections

import numpy as np
import pandas as pd
import pytest

from deploy_fakes import FakeGrid, TinyTask, final_state, run_config
from tiny import client_arrays

from tffre.deploy.client_app import make_client_app
from tffre.deploy.client_app import NodeRuntime
from tffre.deploy.protocol import read_content
from tffre.deploy.server_app import run_server
from tffre.jsonio import read_json_object

SITES = ("a", "b", "c")
ARRAYS = dict(zip(SITES, client_arrays([8, 10, 6], seed=1)))


def grid_of(task, tmp_path, runtime=NodeRuntime, sites=SITES):
    return FakeGrid({s: (make_client_app(runtime(task)),
                         {"site": s, "state-dir": str(tmp_path / "sites" / s)}) for s in sites})


def test_a_site_killed_mid_run_is_named_missing_and_rejoins_after_restart(tmp_path, capsys):
    task = TinyTask(ARRAYS)
    grid = grid_of(task, tmp_path)
    # b dies before round 2's training; it restarts (a new process: new node id, its own
    # folder) before round 3.
    grid.before_group["2"] = lambda: grid.kill(grid.node_of("b"))
    grid.before_group["eval-2"] = lambda: grid.add(
        make_client_app(NodeRuntime(task)),
        {"site": "b", "state-dir": str(tmp_path / "sites" / "b")})
    run_server(grid, run_config("FedAvg", tmp_path / "out", **{"round-timeout": 0.5}),
               task=task)
    rows = pd.read_csv(tmp_path / "out" / "metrics.csv").fillna("")
    assert list(rows["clients"]) == ["a b c", "a c", "a b c"]
    assert list(rows["missing_clients"]) == ["", "b", ""]
    assert list(rows["missing_reasons"]) == ["", "b: no reply within 0.5 s", ""]
    log = capsys.readouterr().out
    assert "round 2: no reply from site(s) b within 0.5 s; going on without them" in log


def test_too_few_answers_stop_the_run_in_one_line(tmp_path, capsys):
    task = TinyTask(ARRAYS)
    grid = grid_of(task, tmp_path, sites=("a", "b"))
    grid.before_group["2"] = lambda: grid.kill(grid.node_of("b"))
    from tffre.federation.round_driver import TooFewSites
    with pytest.raises(TooFewSites, match="round 2: 1 upload"):
        run_server(grid, run_config("FedAvg", tmp_path / "out", **{"round-timeout": 0.3}),
                   task=task)
    assert "stopping (continue later with resume=true)" in capsys.readouterr().out
    # Round 1 was written, round 2 was not applied.
    assert list(pd.read_csv(tmp_path / "out" / "metrics.csv")["round"]) == [1]


# FedAdam: the server optimizer's moments are server state, checkpointed with the model.
@pytest.mark.parametrize("name", ["FedAvg", "MOON", "FedAdam"])
def test_a_killed_server_resumes_to_the_same_final_weights(name, tmp_path, capsys):
    task = TinyTask(ARRAYS, named=name == "MOON")
    run_server(grid_of(task, tmp_path / "whole"), run_config(name, tmp_path / "whole" / "out"),
               task=task)
    want = final_state(tmp_path / "whole" / "out", name, task, 3)
    # Killed while pulling round 3's uploads: the sites have trained round 3 (and MOON's
    # sites saved their round-3 state), the server has checkpointed round 2 only.
    grid = grid_of(task, tmp_path)
    grid.crash_on_pull = "3"
    with pytest.raises(KeyboardInterrupt):
        run_server(grid, run_config(name, tmp_path / "out"), task=task)
    # A new server process and new site processes (same folders) continue.
    capsys.readouterr()
    run_server(grid_of(task, tmp_path), run_config(name, tmp_path / "out", resume=True),
               task=task)
    assert f"{name}: resuming after round 2" in capsys.readouterr().out
    got = final_state(tmp_path / "out", name, task, 3)
    for g, w in zip(got["model"].trainable, want["model"].trainable):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    assert list(pd.read_csv(tmp_path / "out" / "metrics.csv")["round"]) == [1, 2, 3]


def test_a_site_with_malformed_data_is_logged_in_one_line_and_left_out(tmp_path, capsys):
    task = TinyTask(ARRAYS, bad_sites={"c"})
    grid = grid_of(task, tmp_path)
    run_server(grid, run_config("FedAvg", tmp_path / "out"), task=task)
    log = capsys.readouterr().out.splitlines()
    lines = [line for line in log if "site c" in line]
    node = grid.node_of("c")
    assert lines == [f"site c (node {node}): c/train.tsv line 3: label: 'maybe' is not one of "
                     f"0, 1, 2; it takes no part"]
    rows = pd.read_csv(tmp_path / "out" / "metrics.csv")
    assert set(rows["clients"]) == {"a b"}
    # It is named missing in every round, with the reason (and in the log's round lines).
    why = "c: takes no part: c/train.tsv line 3: label: 'maybe' is not one of 0, 1, 2"
    assert list(rows["missing_clients"]) == ["c"] * 3
    assert list(rows["missing_reasons"]) == [why] * 3
    rounds = [line for line in log if line.startswith("round ") and "sites a b" in line]
    assert len(rounds) == 3 and all(f"; missing: {why};" in line for line in rounds)
    summary = read_json_object(str(tmp_path / "out" / "summary.json"))
    assert summary["deployment"]["missing"] == {"c": why[len("c: "):]}


class SendsNaN(NodeRuntime):
    """A site whose uploads carry a NaN (it does not exclude itself)."""

    def train(self, built, broadcast, rnd):
        out = super().train(built, broadcast, rnd)
        out["model/update/0"] = np.full_like(out["model/update/0"], np.nan)
        return out


def test_a_site_that_sends_nan_is_excluded_and_named(tmp_path, capsys):
    task = TinyTask(ARRAYS)
    grid = FakeGrid({s: (make_client_app((SendsNaN if s == "b" else NodeRuntime)(task)),
                         {"site": s, "state-dir": str(tmp_path / s)}) for s in SITES})
    run_server(grid, run_config("FedAvg", tmp_path / "out", **{"num-rounds": 2}), task=task)
    rows = pd.read_csv(tmp_path / "out" / "metrics.csv")
    assert list(rows["clients"]) == ["a c", "a c"]
    assert list(rows["num_excluded_clients"]) == [1, 1]
    assert "round 1: site b: its upload has NaN/Inf (model/update/0); excluded" in \
        capsys.readouterr().out
    state = final_state(tmp_path / "out", "FedAvg", task, 2)
    assert all(np.all(np.isfinite(w)) for w in state["model"].trainable)


def test_constant_weights_reach_a_site_once(tmp_path):
    task = TinyTask(ARRAYS, frozen=True)
    grid = grid_of(task, tmp_path)
    # c restarts between rounds 2 and 3 with its folder: it still holds the constants.
    def restart_c():
        grid.kill(grid.node_of("c"))
        grid.add(make_client_app(NodeRuntime(task)),
                 {"site": "c", "state-dir": str(tmp_path / "sites" / "c")})
    grid.before_group["eval-2"] = restart_c
    run_server(grid, run_config("FedAvg", tmp_path / "out", **{"round-timeout": 0.3}),
               task=task)
    trains = collections.defaultdict(list)
    for message in grid.sent:
        if message.metadata.message_type == "train":
            trains[message.metadata.group_id].append(message)
    def names(message):
        return set(read_content(message.content)[1])
    assert all("model/non_trainable/0" in names(m) for m in trains["1"])
    for rnd in ("2", "3"):
        assert all("model/non_trainable/0" not in names(m) for m in trains[rnd])
    rows = pd.read_csv(tmp_path / "out" / "metrics.csv")
    constant = 4 * (6 * 5 + 5)   # the frozen Dense(5) on 6 features, float32
    assert rows["bytes_broadcast"][0] - rows["bytes_broadcast"][1] == 3 * constant
