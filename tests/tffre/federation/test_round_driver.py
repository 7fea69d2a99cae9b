"""The federation core without a transport: the server's round driver
(:class:`tffre.federation.round_driver.FederatedRounds`) and the sites' runtimes, joined by a
link that hands requests straight to the runtimes (``direct_link``), give the local
executor's weights (``local_reference.local_run``: the same sites in name order, seed and
batches)."""

import numpy as np
import pytest

from deploy_fakes import TinyTask, run_config
from direct_link import DirectLink
from local_reference import local_run
from tiny import client_arrays

from tffre.deploy.client_app import NodeRuntime
from tffre.deploy.flower_config import resolve_run
from tffre.deploy.server_app import serve
from tffre.federation.messages import EVALUATE, HELLO, TRAIN
from tffre.federation.round_driver import FederatedRounds
from tffre.runner.checkpoints import Checkpoints

SITES = ("a", "b", "c")
ARRAYS = dict(zip(SITES, client_arrays([8, 10, 6], seed=1)))
HPARAMS = {"learning_rate": 0.05, "num_epochs": 2, "num_iters": 5}


@pytest.mark.parametrize("name,named", [("FedAvg", False), ("MOON", True)])
def test_rounds_over_a_direct_link_equal_the_local_executor(name, named, tmp_path):
    want, _ = local_run(name, ARRAYS, HPARAMS, 3, named=named)
    task = TinyTask(ARRAYS, named=named)
    # Connected in another order than their names: the sum is still in name order.
    link = DirectLink({s: (NodeRuntime(task), {"site": s, "state-dir": str(tmp_path / s)})
                       for s in ("c", "a", "b")})
    cfg, settings = resolve_run(run_config(name, tmp_path / "out"))
    rounds = FederatedRounds(link, min_nodes=settings.min_nodes,
                             round_timeout=settings.round_timeout, log=lambda line: None)
    serve(rounds, cfg, settings, task, log=lambda line: None)
    got, done = Checkpoints(str(tmp_path / "out" / "checkpoints" / name)).load_latest(want)
    assert done == 3
    for g, w in zip(got["model"].trainable, want["model"].trainable):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    kinds = [request.kind for _, request in link.sent]
    assert kinds == [HELLO] * 3 + ([TRAIN] * 3 + [EVALUATE] * 3) * 3
