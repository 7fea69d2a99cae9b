"""A broken site's replies, in-process (issue 69, item 4): a reply the server cannot read, one
to another round, an upload of other shapes or dtypes, or with NaN, is excluded from the
round and named with the reason, and the round goes on with the others; a site marked faulty
for tests (its node config's ``fault``) sends what a simulated faulty client sends."""

import collections
import json

import numpy as np
import pandas as pd
import pytest

from deploy_fakes import FakeGrid, TinyTask, run_config
from local_reference import local_run
from tiny import client_arrays

from tffre.deploy import protocol
from tffre.deploy.client_app import NodeRuntime, make_client_app
from tffre.deploy.server_app import run_server
from tffre.federation.round_driver import TooFewSites
from tffre.jsonio import read_json_object
from tffre.runner.checkpoints import Checkpoints

HPARAMS = {"learning_rate": 0.05, "num_epochs": 2, "num_iters": 5}   # run_config's
ARRAYS = dict(zip(("a", "b", "c", "x"), client_arrays([8, 10, 6, 7], seed=1)))
HONEST = {s: ARRAYS[s] for s in ("a", "b", "c")}


def content(config, index, packed):
    """A reply's RecordDict of a config and a packed record given as bytes."""
    from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict
    return RecordDict({protocol.CONFIG: ConfigRecord(dict(config)),
                       protocol.ARRAYS: ArrayRecord(collections.OrderedDict(
                           [(protocol.INDEX, Array(np.frombuffer(index, np.uint8))),
                            (protocol.PACKED, Array(np.frombuffer(packed, np.uint8)))]))})


def broken(kind, config, arrays):
    """The content of a train reply broken as ``kind`` says."""
    arrays = collections.OrderedDict(arrays)
    first = next(n for n in arrays if n.startswith("model/update/"))
    if kind == "dtype":
        arrays[first] = arrays[first].astype(np.float64)
    elif kind == "shape":
        arrays[first] = np.concatenate([arrays[first], arrays[first][:1]])
    elif kind == "missing":
        del arrays["model/update/1"]
    elif kind == "round":
        config = dict(config, round=int(config["round"]) - 1)
    if kind in ("dtype", "shape", "missing", "round"):
        return protocol.make_content(config, arrays)
    index, packed = protocol.pack(arrays)
    packed = packed.tobytes()
    if kind == "truncated":
        packed = packed[:-3]
    elif kind == "oversized":
        packed = packed + bytes(8)
    elif kind == "index":
        index = index[:len(index) // 2]
    elif kind == "huge":   # a length that would need a terabyte: refused by its size
        entries = json.loads(index)
        next(e for e in entries if e[0] == first)[2] = [2 ** 40, 2 ** 40]
        index = json.dumps(entries).encode()
    return content(config, index, packed)


class Breaks:
    """A site's ClientApp whose ``train`` replies are broken by round ({round: kind})."""

    def __init__(self, app, kinds):
        self.app, self.kinds = app, kinds

    def __call__(self, message, context):
        from flwr.app import Message
        reply = self.app(message=message, context=context)
        kind = self.kinds.get(message.metadata.group_id)
        if message.metadata.message_type != "train" or kind is None:
            return reply
        config, arrays = protocol.read_content(reply.content)
        return Message(broken(kind, config, arrays), reply_to=message)


def node(task, tmp_path, site, **config):
    return make_client_app(NodeRuntime(task)), {"site": site,
                                                "state-dir": str(tmp_path / "sites" / site),
                                                **config}


def final_state(out, name, structure, rounds):
    state, done = Checkpoints(str(out / "checkpoints" / name)).load_latest(structure)
    assert done == rounds
    return state


def assert_same_weights(got, want):
    for g, w in zip(got["model"].trainable, want["model"].trainable):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


KINDS = ["dtype", "shape", "missing", "truncated", "oversized", "index", "huge", "round"]
# What each reason must say: the part and what was wrong (the site is the column's "x: ").
SAYS = {
    "dtype": ["model/update/0 is float64[", "expects float32["],
    "shape": ["model/update/0 is float32[", "expects float32["],
    "missing": ["missing model/update/1"],
    "truncated": ["does not read", "'model/", "(truncated)"],
    "oversized": ["does not read", "8 bytes beyond what the index names (its last part is "
                  "'model/weight') (oversized)"],
    "index": ["does not read", "the index does not parse as JSON"],
    "huge": ["does not read", "'model/update/0' (<f4[1099511627776, 1099511627776]",
             "(truncated)"],
    "round": ["its reply is to round 7, not round 8"],
}


def test_each_malformed_reply_is_excluded_and_named_and_the_rounds_go_on(tmp_path, capsys):
    """Site x breaks its reply another way each round; a, b and c train as the local
    executor's three clients do (the reference: x left out of every round)."""
    want, _ = local_run("FedAvg", HONEST, HPARAMS, len(KINDS))
    task = TinyTask(ARRAYS)
    nodes = {s: node(task, tmp_path, s) for s in ("a", "b", "c", "x")}
    app, config = nodes["x"]
    nodes["x"] = (Breaks(app, {str(r): k for r, k in enumerate(KINDS, 1)}), config)
    out = tmp_path / "out"
    run_server(FakeGrid(nodes), run_config("FedAvg", out, **{"num-rounds": len(KINDS)}),
               task=task)
    assert_same_weights(final_state(out, "FedAvg", want, len(KINDS)), want)
    rows = pd.read_csv(out / "metrics.csv").fillna("")
    assert list(rows["clients"]) == ["a b c"] * len(KINDS)
    assert list(rows["missing_clients"]) == ["x"] * len(KINDS)
    assert list(rows["num_excluded_clients"]) == [0] * len(KINDS)
    log = capsys.readouterr().out
    for rnd, (kind, reason) in enumerate(zip(KINDS, rows["missing_reasons"]), 1):
        assert reason.startswith("x: ") and ";" not in reason and "\n" not in reason, reason
        for words in SAYS[kind]:
            assert words in reason, (kind, reason)
        lines = [line for line in log.splitlines()
                 if line.startswith(f"round {rnd}: site x") and line.endswith("; excluded")]
        assert len(lines) == 1 and reason[len("x: "):] in lines[0], (lines, reason)
    summary = read_json_object(str(out / "summary.json"))
    assert summary["deployment"]["missing"] == {"x": rows["missing_reasons"].iloc[-1][3:]}


def test_too_many_malformed_replies_stop_the_run_as_too_few_sites_do(tmp_path, capsys):
    task = TinyTask(ARRAYS)
    nodes = {s: node(task, tmp_path, s) for s in ("a", "x")}
    app, config = nodes["x"]
    nodes["x"] = (Breaks(app, {"1": "truncated"}), config)
    with pytest.raises(TooFewSites, match=r"round 1: 1 upload\(s\), the run needs min_nodes=2 "
                                          r"\(missing: -; failed: x\)"):
        run_server(FakeGrid(nodes), run_config("FedAvg", tmp_path / "out"), task=task)
    assert "stopping (continue later with resume=true)" in capsys.readouterr().out


def faulty_local_run(monkeypatch, fault, sites, arrays, rounds):
    """The local executor's run (:func:`local_run`) with ``sites`` sending ``fault``'s
    uploads (:meth:`tffre.process.FederatedProcess.simulate_faults`)."""
    from tffre import builder
    from tffre.faults import UploadFaults, parse_fault
    build = builder.build_algorithm

    def with_faults(*args, **kwargs):
        process = build(*args, **kwargs)
        process.simulate_faults(UploadFaults(parse_fault(fault), sites))
        return process

    with monkeypatch.context() as patch:
        patch.setattr(builder, "build_algorithm", with_faults)
        return local_run("FedAvg", arrays, HPARAMS, rounds)


def test_a_site_marked_scaled_sends_what_a_simulated_faulty_client_sends(tmp_path, capsys,
                                                                           monkeypatch):
    want, _ = faulty_local_run(monkeypatch, "scale:-5", ["b"], HONEST, 3)
    honest, _ = local_run("FedAvg", HONEST, HPARAMS, 3)
    assert not np.allclose(want["model"].trainable[0], honest["model"].trainable[0], atol=1e-3)
    task = TinyTask(ARRAYS)
    nodes = {s: node(task, tmp_path, s, **({"fault": "scale:-5"} if s == "b" else {}))
             for s in ("a", "b", "c")}
    out = tmp_path / "out"
    run_server(FakeGrid(nodes), run_config("FedAvg", out), task=task)
    assert_same_weights(final_state(out, "FedAvg", want, 3), want)
    rows = pd.read_csv(out / "metrics.csv").fillna("")
    assert list(rows["clients"]) == ["a b c"] * 3 and list(rows["missing_clients"]) == [""] * 3
    assert "site b: marked faulty for tests (fault=scale:-5)" in capsys.readouterr().out


def test_a_site_marked_nan_is_excluded_and_named_and_a_data_fault_is_refused(tmp_path, capsys):
    want, _ = local_run("FedAvg", {s: ARRAYS[s] for s in ("a", "c")}, HPARAMS, 2)
    task = TinyTask(ARRAYS)
    nodes = {s: node(task, tmp_path, s, **fault) for s, fault in [
        ("a", {}), ("b", {"fault": "nan"}), ("c", {}), ("x", {"fault": "flip-labels"})]}
    out = tmp_path / "out"
    run_server(FakeGrid(nodes), run_config("FedAvg", out, **{"num-rounds": 2}), task=task)
    assert_same_weights(final_state(out, "FedAvg", want, 2), want)
    rows = pd.read_csv(out / "metrics.csv").fillna("")
    assert list(rows["clients"]) == ["a c"] * 2
    assert list(rows["missing_clients"]) == ["b x"] * 2
    assert list(rows["num_excluded_clients"]) == [1, 1]   # as the simulation counts it
    refused = ("x: takes no part: node config: fault flip-labels changes the site's data, not "
               "its uploads: a site takes scale:S, noise:SIGMA, nan or stale:R")
    assert list(rows["missing_reasons"]) == [
        f"b: its upload has NaN/Inf (model/update/0); {refused}"] * 2
    log = capsys.readouterr().out
    assert "round 1: site b: its upload has NaN/Inf (model/update/0); excluded" in log
    assert "site b: marked faulty for tests (fault=nan)" in log
