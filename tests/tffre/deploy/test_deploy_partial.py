"""A split encoder across sites, in-process: each site caches its own frozen-prefix
activations, only the top (or LoRA adapters) and the head cross the wire, the rounds equal
the local executor's on the same sites' data, SecAgg+ sums only the uploads, DP clips and
noises only what trains, and a site whose prefix differs from the server's is refused."""

import json
import os

import numpy as np
import pandas as pd
import pytest

from deploy_fakes import FakeGrid, run_config
from deploy_tiny_task import RelationsWithoutDropout as Task
from local_reference import sites_reference
from tiny_encoder import make_encoder_folder

from tffre.deploy.client_app import make_client_app
from tffre.deploy.client_app import NodeRuntime
from tffre.deploy.server_app import run_server
from tffre.deploy.tasks import DeployJob
from tffre.runner.checkpoints import Checkpoints

SITES = ("a", "b", "c")
WORDS = [("the patient was given", "aspirin", "for", "headache", "1"),
         ("her", "fever", "improved after", "morphine", "1"),
         ("no history of", "diabetes", "and", "cough", "0"),
         ("severe", "chest pain", "after", "aspirin", "0")]
ROUNDS = 2
HPARAMS = {"learning-rate": 0.02, "num-epochs": 1, "num-iters": 3, "max-len": 24}


def site_folder(root, site, n, offset):
    folder = root / site
    folder.mkdir(parents=True)
    with open(folder / "train.jsonl", "w") as f:
        for i in range(n):
            before, e1, between, e2, label = WORDS[(i + offset) % len(WORDS)]
            text = f"{before} {e1} {between} {e2} ."
            s1 = len(before) + 1
            s2 = s1 + len(e1) + 1 + len(between) + 1
            f.write(json.dumps({"text": text, "e1_start": s1, "e1_end": s1 + len(e1),
                                "e2_start": s2, "e2_end": s2 + len(e2), "e1_type": "drug",
                                "e2_type": "problem", "label": label}) + "\n")
    return str(folder)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(encoder folder without dropout, another encoder's folder, {site: data folder})."""
    root = tmp_path_factory.mktemp("partial_deploy")
    encoders = []
    for name, seed in (("enc", 0), ("other", 5)):
        folder = root / name
        make_encoder_folder(str(folder), weights="tf", seed=seed)
        settings = json.loads((folder / "config.json").read_text())
        settings.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        (folder / "config.json").write_text(json.dumps(settings))
        encoders.append(str(folder))
    sites = {s: site_folder(root / "data", s, n, k)
             for k, (s, n) in enumerate(zip(SITES, (8, 10, 6)))}
    return encoders[0], encoders[1], sites


def deploy(tmp_path, world, tag, name="FedAvgT", encoders=None, **config):
    encoder, _, sites = world
    encoders = encoders or {}
    task = Task()
    nodes = {s: (make_client_app(NodeRuntime(task)),
                 {"site": s, "state-dir": str(tmp_path / tag / "sites" / s), "data": sites[s],
                  "encoder": encoders.get(s, encoder),
                  "prefix-cache": str(tmp_path / tag / "sites" / s / "activations")})
             for s in SITES}
    grid = FakeGrid(nodes)
    out = tmp_path / tag / "out"
    run_server(grid, run_config(name, out, dataset="jsonl", encoder=encoder, **{
        "num-rounds": ROUNDS, **HPARAMS, **config}), task=task)
    return grid, out


def local_reference(out, world, server_only=None, sites=SITES):
    """The local executor over ``sites`` (name order; default all), with the same seed,
    initial weights and batches, from the deployed run's own job (``deploy.json``) and
    ``server_only``'s hyperparameters: (final state, model parts)."""
    encoder, _, folders = world
    nodes = {s: {"site": s, "data": folders[s], "encoder": encoder} for s in sites}
    state, _, _ = sites_reference(out, nodes, ROUNDS, task=Task(), server_only=server_only)
    job = DeployJob.from_json(json.loads((out / "deploy.json").read_text())["job"])
    return state, Task().model(job, {"encoder": encoder})


def check_equals_local(tmp_path, world, tag, out, sites=SITES):
    """The deployed run in ``out`` against the local executor on ``sites``' data (the sites
    that took part; default all); returns the local reference's final state."""
    want, model = local_reference(out, world, sites=sites)
    got, done = Checkpoints(str(out / "checkpoints" / "FedAvgT")).load_latest(want)
    assert done == ROUNDS
    for g, w in zip(got["model"].trainable, want["model"].trainable):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    # Only the top (and LoRA's frozen base, sent once) is in the round: no embedding.
    probe = model.model_fn()
    assert not any("embeddings" in v.name for v in probe.weights)
    assert "hidden" in probe.input_names
    # Each site cached its activations in its own folder.
    for s in sites:
        assert os.listdir(tmp_path / tag / "sites" / s / "activations")
    # The saved model is the whole encoder with the trained top grafted in.
    from tffre.bundle import load_bundle
    bundle = load_bundle(str(out / "models" / "FedAvgT"))
    hf = [layer for layer in bundle.model.layers if hasattr(layer, "config")]
    assert hf and hf[0].config.num_hidden_layers == 2
    rows = pd.read_csv(out / "metrics.csv")
    assert list(rows["clients"]) == [" ".join(sites)] * ROUNDS
    return want


def test_deployed_lora_equals_local_and_is_summed_securely_and_privately(tmp_path, world):
    """LoRA adapters on every layer: the deployed rounds equal the local executor's. With
    SecAgg+ and DP in one deployment, the sites clip the trainable adapters and head only,
    SecAgg+ sums those uploads and the server noises the sum: the rounds equal the local
    executor's DP rounds (the same noise seed) within SecAgg+'s quantization bound, and the
    frozen base weights stay the checkpoint's."""
    flags = {"lora-rank": 2, "lora-targets": "query,value"}
    _, plain = deploy(tmp_path, world, "plain", **flags)
    want = check_equals_local(tmp_path, world, "plain", plain)
    max_weight, clip = 16.0, 8.0
    _, private = deploy(tmp_path, world, "secure_dp", secagg=True, **{
        "secagg-max-weight": max_weight, "secagg-clip": clip, "dp-noise-multiplier": 0.5,
        "dp-clip": 0.1, "dp-seed": 3}, **flags)
    reference, _ = local_reference(private, world, server_only={"dp_seed": 3})
    noised, done = Checkpoints(str(private / "checkpoints" / "FedAvgT")).load_latest(reference)
    assert done == ROUNDS
    # As tests/tffre/deploy/test_deploy_secagg.py: each summed value is off by at most
    # K W 2C / 2**22 (K = 3 sites), the mean delta by that over DP-FedAvg's fixed
    # denominator (the 3 expected sites), per round.
    bound = 3 * max_weight * 2 * clip / 2 ** 22 / 3 * ROUNDS
    for g, w in zip(noised["model"].trainable, reference["model"].trainable):
        np.testing.assert_allclose(g, w, rtol=0, atol=bound)
    for value, base in zip(noised["model"].non_trainable, want["model"].non_trainable):
        np.testing.assert_array_equal(value, base)     # the frozen base: untouched
    moved = [np.abs(g - w).max() for g, w in zip(noised["model"].trainable,
                                                 want["model"].trainable)]
    assert max(moved) > 100 * bound                    # clipped and noised: not the plain run


def test_deployed_top_layer_equals_local_and_a_site_whose_prefix_differs_is_refused(
        tmp_path, world, capsys):
    """The top layer (``--trainable-layers 1``) deployed: site c holds another encoder
    checkpoint, so its frozen prefix differs from the server's, its round's layout does, and
    the server leaves it out, naming it; the rounds of sites a and b equal the local
    executor's over a and b alone (c's upload is in no sum), with only the top in the round,
    each site's activations cached in its own folder and the whole encoder saved. (One
    deployment for both: they were two, each tracing the split round at three sites.)"""
    _, other, _ = world
    _, out = deploy(tmp_path, world, "mixed", encoders={"c": other}, **{
        "trainable-layers": 1, "min-nodes": 2})
    log = capsys.readouterr().out
    assert log.count("site c (node") == ROUNDS and "differs from the server's" in log
    check_equals_local(tmp_path, world, "mixed", out, sites=("a", "b"))
