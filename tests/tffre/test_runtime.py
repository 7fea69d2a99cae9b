"""The TFF worker_binary is shut down by the project, not left running."""

import numpy as np
import tensorflow_federated as tff

from tffre import runtime


def test_shutdown_stops_the_worker():
    @tff.tensorflow.computation(tff.TensorType(np.float32))
    def add_one(x):
        return x + 1.0

    assert add_one(1.0) == 2.0
    assert runtime.worker_pids(), "the C++ runtime should have started a worker"
    runtime.shutdown_workers()
    assert runtime.worker_pids() == []
    assert add_one(2.0) == 3.0   # TFF restarts it on demand
    runtime.shutdown_workers()
    assert runtime.worker_pids() == []
