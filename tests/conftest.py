"""Suite-wide setup: quiet TF logs, deterministic seeds, and no TFF worker left behind."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# run_tests.sh starts several pytest workers: on a GPU machine each must take GPU memory as
# it needs it, not all of it at its first op (TensorFlow's default).
os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")

import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: a slow test (run by default; deselect with -m 'not slow')")


#: Roughly how many seconds each of the slowest modules takes (the suite's --durations on the
#: 2-core machine, its tests added up); any other module counts a second a test. run_tests.sh
#: hands the modules to its workers in this order, slowest first (--no-loadscope-reorder:
#: pytest-xdist's own order, most tests first, left these one- to three-test modules for
#: last), so that no long module starts while the other worker is about to run out of work.
#: A scheduling hint only: every test runs whatever the order.
SLOW_MODULES = {
    "tests/docs/test_tutorials.py": 170,
    "tests/tffre/tasks/test_relation_task.py": 160,
    "tests/tffre/deploy/test_deploy_partial.py": 100,
    "tests/examples/test_re_examples.py": 112,
    "tests/tffre/deploy/test_deploy_tasks_equality.py": 95,
    "tests/examples/test_image_example.py": 90,
    "tests/tffre/tasks/test_document_task.py": 80,
    "tests/tffre/tasks/test_image_sites.py": 75,
    "tests/tffre/deploy/test_deploy_repeat.py": 75,
    "tests/tffre/tasks/test_texts_encoder_sites.py": 74,
    "tests/tffre/deploy/test_deploy_e2e.py": 72,
    "tests/tffre/tasks/test_document_sites.py": 45,
    "tests/examples/test_imcs_example.py": 30,
    "tests/examples/test_docre_example.py": 30,
    "tests/tffre/tasks/test_texts_sites.py": 45,
    "tests/tffre/tasks/test_text_fedcb.py": 27,
    "tests/tffre/deploy/test_deploy_shared_loop.py": 21,
    "tests/tffre/deploy/test_deploy_dp.py": 20,
    "tests/tffre/tasks/test_imcs_task.py": 16,
    "tests/test_packaging.py": 12,
}


def pytest_collection_modifyitems(session, config, items):
    """The modules in :data:`SLOW_MODULES`' order, slowest first (a stable sort: modules of
    equal weight keep pytest's order), each module's tests in their own order."""
    modules = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    order = sorted(modules, key=lambda m: SLOW_MODULES.get(m, len(modules[m])), reverse=True)
    items[:] = [item for module in order for item in modules[module]]


def pytest_sessionfinish(session, exitstatus):
    """Stops the TFF worker_binary processes and fails the run if any survive."""
    from tffre import runtime
    runtime.shutdown_workers()
    left = runtime.worker_pids()
    if left:
        print(f"\nERROR: TFF worker_binary processes still running: {left}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _in_process(capfd, args, main, timeout=None):
    """``main()`` run as a process would run it: its exit code (``SystemExit``'s, as from
    argparse or ``sys.exit``, None read as 0) and what it printed, as a
    ``subprocess.CompletedProcess`` for ``args``. ``timeout``: seconds after which the test
    fails (SIGALRM), the bound ``subprocess.run(timeout=...)`` gives a process against a hang;
    not a speed test."""
    import signal
    import subprocess

    def hung(*_):
        pytest.fail(f"{' '.join(map(str, args))}: still running after {timeout} s",
                    pytrace=False)
    capfd.readouterr()
    if timeout:
        previous = signal.signal(signal.SIGALRM, hung)
        signal.alarm(timeout)
    try:
        code = main()
    except SystemExit as exc:
        code = exc.code
    finally:
        if timeout:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(list(args), 0 if code is None else code, out, err)


@pytest.fixture
def cli_here(capfd):
    """``python -m tffre ARGS`` run in this process: :func:`tffre.cli.main`, the entry point
    ``python -m tffre`` calls, without a process and its TensorFlow imports per call.
    Returns a ``subprocess.CompletedProcess`` with the exit code and what it printed; a
    ``timeout=`` keyword bounds the call as :func:`_in_process` says. Tests of the process
    itself (a kill, what it imports, the task's environment set before
    TensorFlow loads) start one instead."""
    from tffre import cli
    return lambda *args, timeout=None: _in_process(capfd, args, lambda: cli.main(list(args)),
                                                   timeout)


@pytest.fixture
def example_here(capfd, monkeypatch):
    """``python examples/NAME ARGS`` run in this process, as :func:`cli_here` runs the CLI:
    the script's ``__main__`` block (``runpy``) with ``sys.argv`` set, without a process that
    imports TensorFlow, TFF and transformers and converts tffre's and transformers' functions
    with AutoGraph again. The examples as processes are the tutorials'
    (``docs/tutorials/first-run.md`` runs ``examples/imcs_lstm.py``). Returns a
    ``subprocess.CompletedProcess`` with the exit code and what it printed; a ``timeout=``
    keyword bounds the call as :func:`_in_process` says."""
    import runpy
    import sys

    def run(name, *args, timeout=None):
        path = os.path.join(ROOT, "examples", name)
        monkeypatch.setattr(sys, "argv", [path, *args])
        return _in_process(capfd, sys.argv, lambda: runpy.run_path(path, run_name="__main__"),
                           timeout)
    return run


@pytest.fixture(autouse=True)
def _seed():
    import tensorflow as tf
    tf.keras.utils.set_random_seed(1234)
    yield
