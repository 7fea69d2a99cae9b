"""tffre.execution.workers.WorkerPool: a concurrent.futures process pool that trains clients.

The pool is driven here with a plain-Python trainer (the "steps" loop form calls the slot's
``train_steps`` as is), so what is checked is the pool itself: results in client order, one
client per task with dynamic assignment, a worker's error or death raised as WorkerError
with fresh workers the next round, and no process left behind (close, garbage collection,
a parent killed by SIGKILL). The real trainer through the local executor is checked in
test_executors.py.
"""

import contextlib
import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import tensorflow as tf

from tffre.execution import workers

# Bound on waits for another process: generous, so that no test depends on the machine's speed.
WAIT_S = 120


class Slot:
    """What a worker builds from the trainer: ``train_steps`` adds the broadcast to the
    client's values; the first value picks a behaviour (see ``client``)."""

    def __init__(self, sync_dir):
        self.sync_dir = sync_dir

    def train_steps(self, broadcast, dataset, client_state=None):
        values = [int(v) for v in dataset.as_numpy_iterator()]
        if values and values[0] == FAIL:
            raise ValueError(f"client with values {values} failed")
        if values and values[0] == DIE:
            os._exit(3)
        waited_out = False
        if values and values[0] == SLOW:
            # Holds its worker until every other client is done (each leaves a file), so the
            # other worker must take them all: a pool that assigned clients ahead of time
            # would leave some queued behind this one, and it would wait out WAIT_S.
            others = values[1]
            deadline = time.monotonic() + WAIT_S
            while len(os.listdir(self.sync_dir)) < others:
                if time.monotonic() > deadline:
                    waited_out = True
                    break
                time.sleep(0.05)
        elif self.sync_dir:
            Path(self.sync_dir, f"{os.getpid()}-{values}").touch()
        result = {"total": broadcast + sum(values), "pid": os.getpid(),
                  "waited_out": waited_out,
                  "threads": tf.config.threading.get_intra_op_parallelism_threads()}
        if client_state is not None:
            return result, client_state + 1
        return result


class Trainer:
    """Stands in for a ClientTrainer: the pool only calls ``slot()`` in each worker."""

    def __init__(self, sync_dir="", start_in_workers=True):
        self.sync_dir = sync_dir
        self.start_in_workers = start_in_workers

    def slot(self):
        if not self.start_in_workers and multiprocessing.parent_process() is not None:
            raise RuntimeError("no slot in a worker")
        return Slot(self.sync_dir)


FAIL, DIE, SLOW = -1, -2, -3


def client(*values):
    return tf.data.Dataset.from_tensor_slices(np.array(values, np.int64))


def assert_gone(pids):
    """Every process in ``pids`` has exited (a zombie counts as exited) within WAIT_S."""
    # Imported here: a test's child process imports this module with only its own folder on
    # the path, where tests/processes.py is not.
    from processes import still_running
    alive = still_running(pids, WAIT_S)
    assert not alive, f"worker processes still running: {alive}"


@pytest.fixture
def no_new_children():
    """Fails the test if it leaves a multiprocessing child (other modules' pools may live)."""
    before = set(multiprocessing.active_children())

    def check():
        left = set(multiprocessing.active_children()) - before
        assert not left, f"processes left: {left}"

    return check


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    """One two-worker pool for the tests that do not break it (a pool starts in seconds:
    each worker imports TensorFlow)."""
    sync_dir = tmp_path_factory.mktemp("sync")
    shared = workers.WorkerPool(Trainer(str(sync_dir)), 2, loop="steps", threads=1)
    shared.sync_dir = sync_dir
    yield shared
    shared.close()


@pytest.fixture
def pool():
    pools = []

    def make(*args, **kwargs):
        pools.append(workers.WorkerPool(*args, **kwargs))
        return pools[-1]

    yield make
    for p in pools:
        p.close()


def test_results_come_back_in_client_order_with_client_states(two_workers):
    workers_ = two_workers
    datasets = [client(*range(k)) for k in (5, 0, 3, 1, 4)]
    results = workers_.map(np.int64(10), datasets, [np.int64(k) for k in range(5)])
    # 10 + sum(range(k)) for k = 5, 0, 3, 1, 4; each state comes back incremented.
    assert [int(r["total"]) for r, _ in results] == [20, 10, 13, 10, 16]
    assert [int(s) for _, s in results] == [1, 2, 3, 4, 5]
    # The worker's TensorFlow got the threads it was given, and not this process's pid.
    assert {int(r["threads"]) for r, _ in results} == {1}
    assert os.getpid() not in {int(r["pid"]) for r, _ in results}
    # Without client states, plain results; the same workers serve the next round.
    again = workers_.map(np.int64(0), [client(2), client(7)], [None, None])
    assert [int(r["total"]) for r in again] == [2, 7]
    # concurrent.futures starts workers on demand: at most the pool's two over both rounds.
    assert len({int(r["pid"]) for r, _ in results} | {int(r["pid"]) for r in again}) <= 2


def test_a_free_worker_takes_the_next_client(two_workers):
    workers_ = two_workers
    for name in os.listdir(workers_.sync_dir):   # the files other tests' clients left
        os.remove(os.path.join(workers_.sync_dir, name))
    others = 6
    datasets = [client(SLOW, others)] + [client(k) for k in range(others)]
    results = workers_.map(np.int64(0), datasets, [None] * len(datasets))
    slow, rest = results[0], results[1:]
    assert not slow["waited_out"], "the other clients were queued behind the slow one"
    assert [int(r["total"]) for r in rest] == list(range(others))
    # Every other client ran on the worker that was not held by the slow client.
    assert {int(r["pid"]) for r in rest} == {int(rest[0]["pid"])} != {int(slow["pid"])}


def test_a_worker_error_carries_its_traceback_and_the_next_round_restarts(pool):
    workers_ = pool(Trainer(), 1, loop="steps", threads=1)
    first = workers_.map(np.int64(0), [client(1), client(2)], [None, None])
    with pytest.raises(workers.WorkerError,
                       match=r"(?s)client worker process failed:.*Traceback.*train_steps"
                             r".*ValueError: client with values \[-1, 5\] failed"):
        workers_.map(np.int64(0), [client(1), client(FAIL, 5), client(3)], [None] * 3)
    after = workers_.map(np.int64(0), [client(1), client(2)], [None, None])
    assert [int(r["total"]) for r in after] == [1, 2]
    # Fresh workers: the old ones were shut down (and have exited).
    old = {int(r["pid"]) for r in first}
    assert not old & {int(r["pid"]) for r in after}
    assert_gone(old)


def test_a_worker_that_dies_raises_and_the_next_round_restarts(pool, no_new_children):
    workers_ = pool(Trainer(), 1, loop="steps", threads=1)
    with pytest.raises(workers.WorkerError, match="a client worker process died"):
        workers_.map(np.int64(0), [client(1), client(DIE), client(3)], [None] * 3)
    no_new_children()   # the broken pool's processes were joined
    after = workers_.map(np.int64(0), [client(4), client(5)], [None, None])
    assert [int(r["total"]) for r in after] == [4, 5]


def test_a_worker_that_cannot_start_raises_its_traceback_and_leaves_no_process(
        pool, no_new_children):
    workers_ = pool(Trainer(start_in_workers=False), 1, loop="steps", threads=1)
    with pytest.raises(workers.WorkerError,
                       match="(?s)failed:.*could not start.*RuntimeError: no slot in a worker"):
        workers_.map(np.int64(0), [client(1), client(2), client(3)], [None] * 3)
    no_new_children()


def test_close_and_garbage_collection_stop_the_workers(no_new_children):
    closed = workers.WorkerPool(Trainer(), 1, loop="steps", threads=1)
    pids = {int(r["pid"]) for r in closed.map(np.int64(0), [client(1), client(2)],
                                              [None, None])}
    closed.close()
    closed.close()   # twice is fine
    no_new_children()
    assert_gone(pids)

    dropped = workers.WorkerPool(Trainer(), 1, loop="steps", threads=1)
    pids = {int(r["pid"]) for r in dropped.map(np.int64(0), [client(1), client(2)],
                                               [None, None])}
    del dropped
    gc.collect()
    no_new_children()
    assert_gone(pids)


_KILLED_PARENT = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    from tffre.execution.workers import WorkerPool
    from test_workers import Trainer, client

    if __name__ == "__main__":
        pool = WorkerPool(Trainer(), 2, loop="steps", threads=1)
        results = pool.map(np.int64(0), [client(1), client(2), client(3)], [None] * 3)
        pids = sorted({int(r["pid"]) for r in results})
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(" ".join(map(str, pids)))
        os.replace(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(600)
""")


def test_workers_exit_when_their_parent_is_killed(tmp_path):
    # SIGKILL: no exit hook or finalizer runs in the parent; the workers notice it is gone.
    script = tmp_path / "parent.py"
    script.write_text(_KILLED_PARENT)
    pid_file = tmp_path / "pids"
    repo = Path(workers.__file__).resolve().parents[2]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([str(repo), str(Path(__file__).parent)]))
    with open(tmp_path / "out.txt", "wb") as out:
        proc = subprocess.Popen([sys.executable, str(script), str(pid_file)], stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=str(tmp_path))
    children = []
    try:
        deadline = time.monotonic() + WAIT_S
        while not pid_file.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pid_file.exists(), (tmp_path / "out.txt").read_text()[-3000:]
        pids = [int(p) for p in pid_file.read_text().split()]
        # Every process the script started: its workers (those that trained a client and
        # any other) and multiprocessing's resource tracker.
        children = psutil.Process(proc.pid).children()
        assert pids and set(pids) <= {child.pid for child in children}, (pids, children)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        assert_gone([child.pid for child in children])
    finally:   # leave nothing behind, even when the test fails
        if proc.poll() is None:
            with contextlib.suppress(psutil.Error):
                children += psutil.Process(proc.pid).children()
            proc.kill()
            proc.wait()
        for child in children:   # a psutil Process: kill() checks it is still that process
            with contextlib.suppress(psutil.Error):
                child.kill()
