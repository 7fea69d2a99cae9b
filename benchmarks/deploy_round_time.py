"""What a deployment costs on loopback, on the LSTM workload of ``benchmarks/round_time.py``.

    python benchmarks/deploy_round_time.py --sites 10 --rounds 8 --out results/deploy_bench

Measures, on one machine (run it when nothing else does):

* the local executor's sequential round (clients one after another, in this process)
  against a deployed round (a SuperLink, one SuperNode per client, TLS), medians after
  the first round (which builds the model at each site);
* bytes per round: the broadcast and uploads' arrays (``bytes_broadcast``,
  ``bytes_uploaded``, as the simulation counts them from the round's types) and what
  Flower serializes for one message each way (protobuf objects, before gRPC framing);
* a SuperNode's peak RSS (the flower-supernode daemon and tffre's ClientApp process);
* start-up: from starting the daemons to the first round's row.

The workload: 10 clients of 150-400 sequences of 16 token ids (vocabulary 354), the
IMCS-shaped LSTM (embedding 64, LSTM 64), FedAvgS (Self-Adam, 0.001), 10 epochs capped
at 20 steps of batch 10. A site ``k`` (node config ``data="lstm:k"``) holds client k's
data, drawn exactly as ``benchmarks/round_time.py`` draws it. The workload is this file's
own task object (``deploy_round_time:LSTM``, loaded by the sites with this folder on their
``PYTHONPATH``), so that the figures compare with ``round_time.py``'s.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

from tffre.tasks.sites import SiteData, SiteDataError, SiteModel

NUM_CLIENTS = 10


def lstm_clients():
    """The 10 clients' (x, y) of ``benchmarks/round_time.py``'s LSTM workload."""
    rng = np.random.RandomState(0)
    clients = []
    for _ in range(NUM_CLIENTS):
        n = int(rng.randint(150, 400))
        x = rng.randint(2, 354, (n, 16)).astype(np.int32)
        x[:, 10:] *= rng.rand(n, 6) > 0.5
        y = (x[:, 0] % 3 == 0).astype(np.int32)
        clients.append((x, y))
    return clients


def lstm_model_fn():
    from tffre.models import LSTMConfig, lstm_classifier
    return lstm_classifier(LSTMConfig(2, 16, vocab_size=354, embedding_dim=64, lstm_units=64,
                                      seed=0))


class LstmTask:
    """The workload as a deployment task (site data: ``data="lstm:<client index>"``)."""

    def _arrays(self, site):
        match = re.fullmatch(r"lstm:(\d+)", str(site.get("data", "")))
        if not match or int(match.group(1)) >= NUM_CLIENTS:
            raise SiteDataError(f"node config: data must be lstm:0 .. lstm:{NUM_CLIENTS - 1}")
        return lstm_clients()[int(match.group(1))]

    def survey(self, job, site):
        return {"labels": ["0", "1"], "entity_types": [],
                "examples": len(self._arrays(site)[1])}

    def model(self, job, site):
        import tensorflow as tf
        return SiteModel(model_fn=lstm_model_fn,
                          loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                          input_spec=(tf.TensorSpec((None, 16), tf.int32),
                                      tf.TensorSpec((None,), tf.int32)))

    def site_data(self, job, site):
        return SiteData(train=self._arrays(site), held_out={})


LSTM = LstmTask()
HPARAMS = {"learning_rate": 0.001, "num_epochs": 10, "num_iters": 20}


def local_rounds(rounds, sites):
    """Seconds of each sequential local-executor round on the first ``sites`` clients."""
    import tensorflow as tf
    from tffre import builder
    from tffre.data import FederatedData
    from tffre.runner.loop import data_seed
    task = LSTM.model(None, None)
    process = builder.build_algorithm("fedavgs", task.model_fn, loss=task.loss,
                                      input_spec=task.input_spec, executor="local", **HPARAMS)
    data = FederatedData({str(k): {"train": xy} for k, xy in enumerate(lstm_clients()[:sites])},
                         num_classes=2)
    state = process.initialize()
    times = []
    for rnd in range(1, rounds + 1):
        datasets = [data.client_dataset(c, "train", batch_size=10, seed=data_seed(0, rnd))
                    for c in data.client_ids]
        start = time.perf_counter()
        state = process.next(state, datasets).state
        times.append(time.perf_counter() - start)
    del tf
    return times, process.broadcast_bytes_per_client, process.upload_bytes_per_client


def message_bytes():
    """(payload, serialized) bytes of one train message and one upload (Flower's objects)."""
    from flwr.app import Message
    from flwr.common.inflatable import get_all_nested_objects
    from tffre.deploy import protocol
    from tffre.deploy.round_factory import make_round
    from tffre.federation.split_round import to_arrays
    from tffre.data import FederatedData
    task = LSTM.model(None, None)
    parts, _, _ = make_round("fedavgs", task.model_fn, loss=task.loss,
                             input_spec=task.input_spec, hparams=HPARAMS)
    state = parts.initialize()
    down = to_arrays(parts.prepare(state))
    data = FederatedData({"0": {"train": lstm_clients()[0]}}, num_classes=2)
    up = to_arrays(parts.work(parts.prepare(state), data.client_dataset("0", batch_size=10)))
    out = {}
    for name, arrays in (("broadcast", down), ("upload", up)):
        message = Message(protocol.make_content({"round": 1}, arrays), dst_node_id=1,
                          message_type="train")
        out[name] = {"payload": protocol.payload_bytes(arrays),
                     "serialized": sum(len(o.deflate())
                                       for o in get_all_nested_objects(message).values())}
    return out


def peak_rss_mib(pid):
    """VmHWM of ``pid`` in MiB (0 when gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def deployed_rounds(args, work):
    """Runs the deployment; returns its figures."""
    import psutil
    from tffre.deploy.certs import make_certificates
    from tffre.deploy.launch import Daemon, free_port, stop_all, wait_for_port
    from tffre.deploy.project import write_app
    deploy = [sys.executable, "-m", "tffre.deploy"]
    sites = [f"site{k}" for k in range(args.sites)]
    certs = os.path.join(work, "certs")
    make_certificates(certs, sites=sites)
    ports = {k: free_port() for k in ("fleet", "control", "serverappio")}
    app = write_app(os.path.join(work, "app"), address=f"127.0.0.1:{ports['control']}",
                    ca=os.path.join(certs, "ca.crt"))
    daemons, started = [], time.monotonic()
    figures = {}
    try:
        daemons.append(Daemon(deploy + ["superlink", "--certs", certs, "--state-dir",
                                        os.path.join(work, "superlink"), "--host", "127.0.0.1",
                                        "--fleet-port", str(ports["fleet"]),
                                        "--control-port", str(ports["control"]),
                                        "--serverappio-port", str(ports["serverappio"])],
                              log=os.path.join(work, "superlink.log")))
        wait_for_port("127.0.0.1", ports["control"], 120, daemons[0])
        for k, site in enumerate(sites):
            subprocess.run(deploy + ["register", "--app", app, "--key",
                                     os.path.join(certs, "sites", f"{site}.pub")],
                           check=True, capture_output=True, timeout=120)
            daemons.append(Daemon(deploy + [
                "supernode", "--superlink", f"127.0.0.1:{ports['fleet']}", "--site", site,
                "--data", f"lstm:{k}", "--deploy-task", "deploy_round_time:LSTM",
                "--ca", os.path.join(certs, "ca.crt"),
                "--key", os.path.join(certs, "sites", f"{site}.key"),
                "--state-dir", os.path.join(work, "state", site), "--poll", str(args.poll),
                "--log", os.path.join(work, f"{site}.flower.log")],
                log=os.path.join(work, f"{site}.log")))
        time.sleep(5)
        for daemon in daemons:
            if not daemon.alive():
                raise RuntimeError(f"{daemon.name} exited; see {daemon.log_path}")
        run = subprocess.Popen(deploy + [
            "run", "--app", app, "--dataset", "synthetic", "--algorithm", "fedavgs",
            "--deploy-task", "deploy_round_time:LSTM", "--num-rounds", str(args.rounds),
            "--eval-every", "100000", "--batch-size", "10", "--min-nodes", str(args.sites),
            "--learning-rate", "0.001", "--num-epochs", "10", "--num-iters", "20",
            "--poll", str(args.poll), "--out", os.path.join(work, "run"), "--overwrite"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with open(os.path.join(work, "run.log"), "w") as log:
            for line in run.stdout:
                log.write(line)
                if line.startswith("round 1:") and "start_to_first_round_s" not in figures:
                    figures["start_to_first_round_s"] = time.monotonic() - started
                if "ready after" in line:
                    figures["serverapp_ready_s"] = float(re.search(r"ready after ([\d.]+)",
                                                                   line).group(1))
        if run.wait() != 0:
            raise RuntimeError(f"the deployed run failed; see {work}/run.log")
        rss = []
        for daemon in daemons[1:]:   # tffre's ClientApp process and its flower-supernode child
            children = psutil.Process(daemon.pid).children(recursive=True)
            rss.append({"clientapp_mib": peak_rss_mib(daemon.pid),
                        "supernode_mib": max((peak_rss_mib(c.pid) for c in children),
                                             default=0.0)})
        figures["peak_rss"] = {"clientapp_mib": max(r["clientapp_mib"] for r in rss),
                               "supernode_daemon_mib": max(r["supernode_mib"] for r in rss)}
        figures["superlink_peak_rss_mib"] = peak_rss_mib(daemons[0].pid)
    finally:
        stop_all(daemons)
    import pandas as pd
    rows = pd.read_csv(os.path.join(work, "run", "metrics.csv"))
    figures["round_seconds"] = [float(s) for s in rows["round_seconds"]]
    figures["bytes_broadcast"] = [int(b) for b in rows["bytes_broadcast"]]
    figures["bytes_uploaded"] = [int(b) for b in rows["bytes_uploaded"]]
    steps = []
    for site in sites:   # the ClientApp process's per-message line: pull, run, push
        with open(os.path.join(work, f"{site}.log")) as f:
            steps += [tuple(map(float, m)) for m in re.findall(
                r"^train (\d+): pull ([\d.]+) s, run ([\d.]+) s, push ([\d.]+) s", f.read(),
                re.M) if int(m[0]) > 1]
    if steps:
        figures["site_median_s"] = {k: statistics.median(s[i] for s in steps)
                                    for i, k in ((1, "pull"), (2, "train"), (3, "push"))}
    return figures


def main(argv=None):
    parser = argparse.ArgumentParser(prog="benchmarks/deploy_round_time.py",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=NUM_CLIENTS)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--poll", type=float, default=0.1)
    parser.add_argument("--out", default="results/deploy_bench")
    args = parser.parse_args(argv)
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    # The sites and the server import this file's task (deploy_round_time:LSTM).
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    work = os.path.abspath(args.out)
    os.makedirs(work, exist_ok=True)
    local, down, up = local_rounds(args.rounds, args.sites)
    results = {"sites": args.sites, "rounds": args.rounds, "poll": args.poll,
               "local_round_seconds": local,
               "simulation_bytes": {"broadcast": down * args.sites, "upload": up * args.sites},
               "message_bytes": message_bytes()}
    results.update(deployed_rounds(args, work))
    local_median = statistics.median(local[1:])
    deployed_median = statistics.median(results["round_seconds"][1:])
    results["local_median_s"] = local_median
    results["deployed_median_s"] = deployed_median
    results["ratio"] = deployed_median / local_median
    with open(os.path.join(work, "bench.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(json.dumps({k: v for k, v in results.items() if not isinstance(v, list)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
