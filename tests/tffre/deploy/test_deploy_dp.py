"""Differential privacy's target epsilon in a deployment: calibrated once at the server for
all sites every round, with the runner's function, and checked against dp-accounting."""

import json

import dp_accounting
import numpy as np
import pandas as pd
import pytest
from dp_accounting import rdp

from deploy_fakes import FakeGrid, TinyTask, run_config
from tiny import client_arrays

from tffre.deploy.client_app import make_client_app
from tffre.deploy.client_app import NodeRuntime
from tffre.deploy.server_app import run_server
from tffre.privacy import accounting

SITES = ("a", "b", "c")
ARRAYS = dict(zip(SITES, client_arrays([8, 10, 6], seed=1)))
TARGET, ROUNDS = 8.0, 2


def gaussian_epsilon(sigma, rounds, delta):
    """The independent reference: every site trains every round, so a round is the Gaussian
    mechanism on the clipped sum (no subsampling). Replacing one site's update moves the sum
    by up to 2C and the noise has stddev sigma C: noise multiplier sigma / 2 at sensitivity 1,
    composed ``rounds`` times in dp-accounting's RDP accountant."""
    accountant = rdp.RdpAccountant()
    accountant.compose(dp_accounting.GaussianDpEvent(sigma / 2), rounds)
    return accountant.get_epsilon(delta)


def test_a_target_epsilon_is_calibrated_at_the_server_for_all_sites(tmp_path):
    task = TinyTask(ARRAYS)
    nodes = {s: (make_client_app(NodeRuntime(task)), {"site": s, "state-dir": str(tmp_path / s)})
             for s in SITES}
    grid = FakeGrid(nodes)
    out = tmp_path / "out"
    run_server(grid, run_config("FedAvg", out, **{"num-rounds": ROUNDS,
                                                  "dp-target-epsilon": TARGET,
                                                  "dp-clip": 0.5}), task=task)
    delta = accounting.default_delta(len(SITES))
    # The runner's calibration for (sites, sites, rounds, delta).
    want = accounting.calibrate_noise_multiplier(
        TARGET, delta, ROUNDS, accounting.fixed_size_sampling(len(SITES), len(SITES)))
    saved = json.loads(json.loads((out / "deploy.json").read_text())["job"])["hparams"]
    assert saved["dp_noise_multiplier"] == pytest.approx(want, rel=1e-9)
    assert saved["dp_target_epsilon"] is None and saved["dp_seed"] is None
    assert saved["dp_delta"] == pytest.approx(delta)
    # What the sites were sent: the calibrated sigma (and never the seed).
    trains = [m for m in grid.sent if m.metadata.message_type == "train"]
    assert len(trains) == len(SITES) * ROUNDS
    for message in trains:
        sent = json.loads(message.content.config_records["config"]["job"])["hparams"]
        assert sent["dp_noise_multiplier"] == saved["dp_noise_multiplier"]
        assert sent["dp_seed"] is None
    # dp-accounting directly: sigma meets the target, and a sigma 0.1% smaller does not.
    assert gaussian_epsilon(want, ROUNDS, delta) <= TARGET
    assert gaussian_epsilon(want * 0.999, ROUNDS, delta) > TARGET
    # The runner's figures: dp_epsilon after each round, the guarantee in the summary.
    rows = pd.read_csv(out / "metrics.csv")
    np.testing.assert_allclose(rows["dp_epsilon"],
                               [gaussian_epsilon(want, r, delta) for r in (1, 2)], rtol=1e-6)
    assert (rows["dp_clip"] == 0.5).all()
    privacy = json.loads((out / "summary.json").read_text())["algorithms"]["FedAvg"]["privacy"]
    assert privacy["target_epsilon"] == TARGET and privacy["rounds"] == ROUNDS
    assert privacy["noise_multiplier"] == pytest.approx(want, rel=1e-9)
    assert privacy["epsilon"] == pytest.approx(rows["dp_epsilon"].iloc[-1], rel=1e-9)
    assert privacy["sampling"].startswith("all 3 sites every round")
