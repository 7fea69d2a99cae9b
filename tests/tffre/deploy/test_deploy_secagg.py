"""Secure aggregation in-process: SecAgg+ gives the plain sum within its quantization error,
the server never holds a site's unmasked upload, and non-sum aggregations are refused."""

import collections

import numpy as np
import pytest

from deploy_fakes import FakeGrid, TinyTask, final_state, run_config
from tiny import client_arrays

from tffre.deploy import secagg
from tffre.deploy.client_app import make_client_app
from tffre.deploy.client_app import NodeRuntime
from tffre.deploy.server_app import run_server
from tffre.federation.split_round import to_arrays

SITES = ("a", "b", "c")
ARRAYS = dict(zip(SITES, client_arrays([8, 10, 6], seed=1)))
MAX_WEIGHT, CLIP = 16.0, 8.0   # every site has <= 16 examples


class Recording(NodeRuntime):
    """A site runtime that remembers its uploads and contributions (what must stay home)."""

    def __init__(self, task):
        super().__init__(task)
        self.contributions = []

    def contribution(self, built, upload_arrays):
        out = super().contribution(built, upload_arrays)
        self.contributions.append(to_arrays(out))
        return out


def run(tmp_path, name, secure, runtimes=None, **config):
    task = TinyTask(ARRAYS, named=name == "MOON")
    runtimes = runtimes or {s: Recording(task) for s in SITES}
    nodes = {s: (make_client_app(runtimes[s]), {"site": s, "state-dir": str(tmp_path / s)})
             for s in SITES}
    grid = FakeGrid(nodes)
    out = tmp_path / ("secure" if secure else "plain")
    extra = {"secagg": True, "secagg-max-weight": MAX_WEIGHT, "secagg-clip": CLIP} \
        if secure else {}
    run_server(grid, run_config(name, out, **extra, **config), task=task)
    return grid, out, runtimes


def test_encode_decode_is_the_sum_within_the_quantization_step():
    spec = collections.OrderedDict(total=[np.zeros((3, 2), np.float32)],
                                   weight=np.float32(0), excluded=np.int32(0))
    import tensorflow as tf
    from tffre.mapreduce import spec_of
    spec = spec_of(spec)
    rng = np.random.RandomState(0)
    values = [collections.OrderedDict(total=[rng.randn(3, 2).astype(np.float32) * 5],
                                      weight=np.float32(w), excluded=np.int32(e))
              for w, e in [(8, 0), (10, 1), (6, 0)]]
    encoded = [secagg.encode(v, MAX_WEIGHT, CLIP) for v in values]
    mean = [np.mean([e[i] for e in encoded], axis=0) for i in range(3)]
    total = secagg.decode(mean, 3, MAX_WEIGHT, spec)
    np.testing.assert_allclose(total["total"][0], sum(v["total"][0] for v in values),
                               rtol=1e-6, atol=1e-5)
    assert total["excluded"] == 1 and total["excluded"].dtype == np.int32
    with pytest.raises(ValueError, match="total/0 reaches .*raise secagg-max-weight"):
        secagg.encode(collections.OrderedDict(total=[np.full((3, 2), 200.0, np.float32)],
                                              weight=np.float32(1), excluded=np.int32(0)),
                      MAX_WEIGHT, CLIP)
    del tf


DP = {"dp-noise-multiplier": 0.5, "dp-clip": 0.5, "dp-seed": 7}


@pytest.mark.parametrize("name,dp", [("FedAvg", False), ("MOON", False), ("FedAvg", True)])
def test_secure_rounds_equal_plain_ones_within_the_documented_error(name, dp, tmp_path):
    """With DP-FedAvg's noised sum too: the clipped sum is summed securely, the server adds
    the noise (the same seed: the same noise)."""
    extra = dict(DP if dp else {}, **{"num-rounds": 2})
    _, plain, _ = run(tmp_path, name, secure=False, **extra)
    grid, secure, runtimes = run(tmp_path, name, secure=True, **extra)
    task = TinyTask(ARRAYS, named=name == "MOON")
    hp = {k.replace("-", "_"): v for k, v in DP.items()} if dp else None
    want, got = final_state(plain, name, task, 2, hp), final_state(secure, name, task, 2, hp)
    # Each summed value is off by at most K W 2C / 2**22 (K = 3 sites); the mean delta by
    # that over the denominator, per round: the summed weight (24 examples), or DP-FedAvg's
    # fixed denominator (the 3 expected clients).
    bound = 3 * MAX_WEIGHT * 2 * CLIP / 2 ** 22 / (3 if dp else 24) * 2
    for g, w in zip(got["model"].trainable, want["model"].trainable):
        np.testing.assert_allclose(g, w, rtol=0, atol=bound)
    # What the server held: masked vectors, never a site's contribution (nor its
    # quantized form), and no upload arrays at all.
    contributions = [np.concatenate([np.ravel(np.asarray(v, np.float64)) / MAX_WEIGHT
                                     for v in c.values()])
                     for r in runtimes.values() for c in r.contributions]
    assert len(contributions) == 3 * 2
    if dp:   # the noise moved the model: the comparison above was not of two noiseless runs
        import json
        sent = json.loads(json.loads((secure / "deploy.json").read_text())["job"])["hparams"]
        assert sent["dp_noise_multiplier"] == 0.5 and sent["dp_seed"] is None   # stays home
    from flwr.common import bytes_to_ndarray
    from tffre.deploy.protocol import record_arrays
    from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS, Key
    masked = 0
    for reply in grid.received:
        # Only evaluation counts travel in the clear (they are per site: see the notes);
        # the SecAgg+ replies' FitRes arrays were cleared by the mod.
        for record in reply.content.array_records.values():
            assert all(name.split("/")[0] in ("loss", "count", "confusion")
                       for name in record_arrays(record))
        configs = reply.content.config_records.get(RECORD_KEY_CONFIGS, {})
        raws = configs.get(Key.MASKED_PARAMETERS, [])
        if not raws:
            continue
        masked += 1
        # As the server would dequantize one site's vector alone (the first array is the
        # weight factor).
        vector = np.concatenate([bytes_to_ndarray(b).astype(np.float64).ravel()
                                 for b in raws[1:]])
        dequantized = vector * 2 * CLIP / 2 ** 22 - CLIP
        for c in contributions:
            assert len(c) == len(dequantized)
            assert not np.allclose(dequantized, c, atol=1e-2)
    assert masked == 3 * 2


@pytest.mark.parametrize("name,why", [("FedAttS", "running max of the clients' distances"),
                                      ("FedCMC", "not a sum")])
def test_non_sum_aggregations_refuse_secure_aggregation_in_one_line(name, why, tmp_path,
                                                                    capsys):
    task = TinyTask(ARRAYS, named=name == "FedCMC")
    nodes = {s: (make_client_app(NodeRuntime(task)), {"site": s, "state-dir": str(tmp_path / s)})
             for s in SITES}
    with pytest.raises(ValueError, match=why) as err:
        run_server(FakeGrid(nodes), run_config(name, tmp_path / "out", secagg=True), task=task)
    assert "\n" not in str(err.value) and "cannot use secure aggregation" in str(err.value)
    assert f"error: {err.value}" in capsys.readouterr().out
