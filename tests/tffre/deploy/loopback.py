"""A deployment on loopback for tests: a SuperLink (TLS, registered sites only) and one
SuperNode per site as separate processes (:func:`start_federation`), and the processes a
test started, found by a mark in their environment (every daemon and helper inherits
``TFFRE_TEST_MARK``), so a test can show that none of them survived."""

import contextlib
import os
import subprocess
import sys
import time
import uuid

import psutil

from tffre.deploy.launch import Daemon, free_port, wait_for_port

DEPLOY = [sys.executable, "-m", "tffre", "deploy"]

HERE = os.path.dirname(os.path.abspath(__file__))


def marked(mark):
    """The live processes whose environment carries ``mark``."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get("TFFRE_TEST_MARK") == mark and \
                    proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            pass
    return found


@contextlib.contextmanager
def marked_environment():
    """A fresh mark in ``os.environ`` (with the test folders on ``PYTHONPATH`` and Flower's
    telemetry off) while the block runs; yields the mark."""
    mark = uuid.uuid4().hex
    path = os.pathsep.join([HERE, os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")])
    values = {"TFFRE_TEST_MARK": mark, "PYTHONPATH": path, "FLWR_TELEMETRY_ENABLED": "0",
              "TF_CPP_MIN_LOG_LEVEL": "3"}
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield mark
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def command_lines(mark, words=None):
    """The command lines of ``mark``'s live processes (their first ``words`` words)."""
    lines = []
    for proc in marked(mark):
        try:
            lines.append(" ".join(proc.cmdline()[:words]))
        except psutil.Error:   # gone since
            pass
    return lines


def left_behind(mark, seconds=30):
    """The command lines of ``mark``'s processes still alive after up to ``seconds`` (flwr's
    helpers notice their parent is gone within seconds)."""
    deadline = time.monotonic() + seconds
    while marked(mark) and time.monotonic() < deadline:
        time.sleep(0.5)
    return command_lines(mark, 4)


def start_federation(folder, data, task, daemons, registered=None, ports=False, flags=()):
    """Certificates, the app folder, a SuperLink and one SuperNode per site of ``data``
    ({site: its data file}) running ``task``, all under ``folder`` (a ``pathlib.Path``);
    only the ``registered`` sites' keys (default all) are registered. Each started daemon is
    appended to ``daemons`` at once, so the caller's ``stop_all`` stops them whatever fails.
    ``flags``: more ``deploy supernode`` arguments, the same at every site (``--encoder``).
    Returns the app folder (and the ports, {fleet, control, serverappio}, with ``ports``)."""
    used = {k: free_port() for k in ("fleet", "control", "serverappio")}
    certs, app = folder / "certs", folder / "app"
    subprocess.run(DEPLOY + ["certs", "--out", str(certs), "--sites", ",".join(data)],
                   check=True, timeout=60)
    subprocess.run(DEPLOY + ["app", "--out", str(app), "--superlink",
                             f"127.0.0.1:{used['control']}", "--ca", str(certs / "ca.crt")],
                   check=True, timeout=60)
    superlink = Daemon(DEPLOY + [
        "superlink", "--certs", str(certs), "--state-dir", str(folder / "superlink"),
        "--host", "127.0.0.1", "--fleet-port", str(used["fleet"]),
        "--control-port", str(used["control"]),
        "--serverappio-port", str(used["serverappio"])],
        log=str(folder / "superlink.log"), name="superlink")
    daemons.append(superlink)
    wait_for_port("127.0.0.1", used["control"], 60, superlink)
    for site in (data if registered is None else registered):
        subprocess.run(DEPLOY + ["register", "--app", str(app), "--key",
                                 str(certs / "sites" / f"{site}.pub")],
                       check=True, timeout=60, capture_output=True)
    for site, path in data.items():
        daemons.append(supernode(folder, site, path, task, used, flags))
    return (app, used) if ports else app


def supernode(folder, site, path, task, ports, flags=()):
    """``deploy supernode`` for ``site`` (its key, folder and logs under ``folder``, as
    :func:`start_federation` lays them out), started; a restart appends to the same logs."""
    certs = folder / "certs"
    return Daemon(DEPLOY + [
        "supernode", "--superlink", f"127.0.0.1:{ports['fleet']}",
        "--ca", str(certs / "ca.crt"), "--key", str(certs / "sites" / f"{site}.key"),
        "--site", site, "--data", str(path), "--deploy-task", task,
        "--state-dir", str(folder / "sites" / site), "--poll", "0.1",
        "--log", str(folder / f"{site}.daemon.log"), *flags],
        log=str(folder / f"{site}.log"), name=site)
