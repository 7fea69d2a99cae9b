"""The TFF worker_binary is shut down by the project, not left running.

The subprocess tests run scripts that use tffre the way a user does and check
that TFF's worker_binary does not outlive them. Each script carries a unique
tag in its environment, which the worker inherits, so that only the workers
started by that script are looked at (other test runs may share the machine);
each test kills whatever carries its tag when it ends.
"""

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import tensorflow_federated as tff

import tffre
from tffre import runtime

# The checkout whose tffre is under test: the subprocesses import the same one.
_REPO = str(Path(tffre.__file__).resolve().parents[1])
# This venv's tensorflow_federated package (found without importing it again).
_TFF_DIR = os.path.realpath(
    list(importlib.util.find_spec("tensorflow_federated").submodule_search_locations)[0])
_TAG_VAR = "TFFRE_TEST_RUNTIME_TAG"


def _is_our_worker(pid, tag):
    """True if ``pid`` is a live (not zombie) worker_binary of this venv's TFF carrying ``tag``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0")[0].decode(errors="replace")
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read().split(b"\0")
    except OSError:  # gone, or not ours to read
        return False
    state = stat[stat.rfind(")") + 2:].split()[0]
    exe = os.path.realpath(argv0)  # TFF runs it as .../executor_stacks/../../../../data/worker_binary
    return (state != "Z" and os.path.basename(exe) == "worker_binary"
            and exe.startswith(_TFF_DIR + os.sep)
            and f"{_TAG_VAR}={tag}".encode() in environ)


def _workers(tag):
    """The live worker_binary processes of this venv's TFF that carry ``tag``."""
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and _is_our_worker(int(e), tag)]


def _wait_gone(pids, tag, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(_is_our_worker(p, tag) for p in pids):
            return True
        time.sleep(0.1)
    return False


@contextlib.contextmanager
def _tagged_env():
    """Yields (tag, env) for a script; on exit kills any worker that still carries the tag."""
    tag = uuid.uuid4().hex
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=_REPO, **{_TAG_VAR: tag})
    try:
        yield tag, env
    finally:
        for pid in _workers(tag):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


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


def test_shutdown_stops_a_worker_that_ignores_sigint():
    # A background job of a non-interactive shell (`python run.py &` in a script, nohup)
    # starts with SIGINT ignored, and the worker inherits that: TFF's own stop signal is
    # lost on it. Shutdown must still stop it at once, not after its SIGKILL timeout.
    @tff.tensorflow.computation(tff.TensorType(np.float32))
    def add_one(x):
        return x + 1.0

    runtime.shutdown_workers()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert add_one(1.0) == 2.0   # the worker starts here, inheriting SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    (pid,) = runtime.worker_pids()
    with open(f"/proc/{pid}/status") as f:
        ignored = next(int(line.split()[1], 16) for line in f if line.startswith("SigIgn:"))
    assert ignored >> (signal.SIGINT - 1) & 1, "the worker should ignore SIGINT here"
    start = time.monotonic()
    assert runtime.shutdown_workers(timeout=60) == [pid]
    assert time.monotonic() - start < 30, "shutdown waited for the SIGKILL fallback"
    assert runtime.worker_pids() == []


# The README "Library" snippet, made tiny, WITHOUT federated_runtime().
_LIBRARY_SCRIPT = """
import tensorflow as tf
import tffre
from tffre.data.synthetic_sets import make_synthetic
from tffre.models import logistic_regression

data = make_synthetic(0.5, 0.5, num_clients=4, seed=0)
process = tffre.build_algorithm(
    "fedavg", lambda: logistic_regression(60, 10),
    loss=tf.keras.losses.SparseCategoricalCrossentropy(), input_spec=data.element_spec(),
    learning_rate=0.01, num_epochs=1)
state = process.initialize()
out = process.next(state, [data.client_dataset(c, seed=0) for c in data.client_ids[:2]])
print("loss", float(out.metrics["client_work"]["train"]["loss"]))
"""


def test_plain_library_use_does_not_hang_a_reader_of_stdout(tmp_path):
    # As in `python script.py | cat`: the reader waits for EOF on the pipe,
    # which a worker_binary that inherited stdout and outlives Python withholds.
    script = tmp_path / "library_use.py"
    script.write_text(_LIBRARY_SCRIPT)
    timeout = 120
    with _tagged_env() as (tag, env):
        try:
            proc = subprocess.run([sys.executable, str(script)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env, cwd=str(tmp_path),
                                  timeout=timeout)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"the script's stdout pipe was still open after {timeout} s "
                        f"(live workers carrying its tag: {_workers(tag)}); "
                        f"stdout: {e.stdout!r}")
        stdout, stderr = proc.stdout.decode(), proc.stderr.decode()
        assert proc.returncode == 0, stderr[-3000:]
        assert stdout.startswith("loss "), stdout
        assert np.isfinite(float(stdout.split()[1]))
        assert "Exception ignored" not in stderr, stderr[-3000:]
        assert _wait_gone(_workers(tag), tag, timeout=5), \
            f"worker_binary left running: {_workers(tag)}"


_KILLED_SCRIPT = """
import os, sys, time
import numpy as np
import tffre.aggregators  # applies the parent-death signal to TFF's worker
import tensorflow_federated as tff
from tffre import runtime

@tff.tensorflow.computation(tff.TensorType(np.float32))
def add_one(x):
    return x + 1.0

assert add_one(1.0) == 2.0
pids = runtime.worker_pids()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(" ".join(map(str, pids)) + "\\n")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
print("worker", *pids, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killed_process_leaves_no_worker(tmp_path, sig):
    # No exit hook runs here: only the parent-death signal stops the worker.
    script = tmp_path / "killed.py"
    script.write_text(_KILLED_SCRIPT)
    pid_file = tmp_path / "worker.pids"
    with _tagged_env() as (tag, env), open(tmp_path / "out.txt", "wb") as out:
        proc = subprocess.Popen([sys.executable, str(script), str(pid_file)], stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=str(tmp_path))
        try:
            deadline = time.monotonic() + 120
            while not pid_file.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert pid_file.exists(), \
                f"the script printed no worker pid: {(tmp_path / 'out.txt').read_text()[-3000:]}"
            pids = [int(p) for p in pid_file.read_text().split()]
            assert len(pids) == 1, pids
            assert _workers(tag) == pids, "the worker the script reports should be found by its tag"

            proc.send_signal(sig)
            assert proc.wait(timeout=30) == -sig
            assert _wait_gone(pids, tag, timeout=5), \
                f"worker_binary {pids} still running after its Python process got {sig.name}"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_import_tffre_is_cheap(tmp_path):
    script = textwrap.dedent("""
        import sys
        import tffre
        heavy = sorted(m for m in ("tensorflow", "tensorflow_federated") if m in sys.modules)
        assert not heavy, f"import tffre imported {heavy}"
        assert "tffre.runtime" in sys.modules  # the worker exit hook is registered
        build_algorithm = tffre.build_algorithm
        from tffre.builder import build_algorithm as from_module
        assert callable(build_algorithm) and build_algorithm is from_module
        assert "tensorflow_federated" in sys.modules
        print("ok")
    """)
    with _tagged_env() as (tag, env):
        proc = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env, cwd=str(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert proc.stdout.decode().split() == ["ok"]
