"""Three hospitals on one machine: FedAvgT on GAD across a real Flower deployment (loopback).

    python examples/deploy_local.py                    # TLS, registered sites only, 3 rounds
    python examples/deploy_local.py --rounds 5 --encoder-layers 6 --out results/deploy_local
    python examples/deploy_local.py --insecure         # no TLS (a warning says why not to)

What it does, each step a ``python -m tffre deploy`` command a real site would run:

1. writes three partitions of the GAD-format sample (``tffre/resources/re_sample/gad``:
   each site its own train/dev/test files) under ``--out``/sites;
2. ``deploy certs``: a demo CA, the SuperLink's certificate and one key pair per site;
3. starts a SuperLink (``deploy superlink``: TLS, ``--enable-supernode-auth``) and
   registers the three sites' public keys (``deploy register``);
4. starts three SuperNodes as separate processes (``deploy supernode``), each with its own
   data, encoder folder and state folder, never the server's;
5. ``deploy run``: 3 rounds of FedAvgT (2-layer all-MiniLM-L6-v2, frozen embeddings: the
   frozen table reaches each site once), printing each round's metrics, and writing
   ``metrics.csv``, ``summary.json``, ``curves.png`` and the model bundle
   (``models/FedAvgT``) to ``--out``/run;
6. stops everything it started, also on Ctrl-C or an error.

Logs of each process: ``--out``/logs.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

from tffre import resources
from tffre.deploy.certs import make_certificates
from tffre.deploy.cli import INSECURE_WARNING
from tffre.deploy.launch import Daemon, free_port, stop_all, wait_for_port
from tffre.deploy.project import write_app

SITES = ("hospital-a", "hospital-b", "hospital-c")
DEPLOY = [sys.executable, "-m", "tffre", "deploy"]


def write_partitions(folder, sites=SITES):
    """Deals the GAD sample's lines over the sites (line i to site i mod 3), per split file;
    returns {site: its data folder}."""
    source = resources.path("re_sample", "gad")
    out = {}
    for k, site in enumerate(sites):
        out[site] = os.path.join(folder, site)
        os.makedirs(out[site], exist_ok=True)
    for name in ("train.tsv", "dev.tsv", "test.tsv"):
        with open(os.path.join(source, name), encoding="utf-8") as f:
            lines = f.read().splitlines()
        header = lines[:1] if lines and lines[0].startswith("index\t") else []
        body = lines[len(header):]
        for k, site in enumerate(sites):
            with open(os.path.join(out[site], name), "w", encoding="utf-8") as f:
                f.write("\n".join(header + body[k::len(sites)]) + "\n")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog="examples/deploy_local.py",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/deploy_local")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--encoder", help="encoder folder (default the packaged MiniLM)")
    parser.add_argument("--encoder-layers", type=int, default=2)
    parser.add_argument("--insecure", action="store_true", help="no TLS, any site admitted")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds for the run")
    args = parser.parse_args(argv)
    if args.insecure:
        print(INSECURE_WARNING, file=sys.stderr)
    work = os.path.abspath(args.out)
    logs = os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    data = write_partitions(os.path.join(work, "sites"))
    certs = os.path.join(work, "certs")
    make_certificates(certs, sites=SITES)
    ports = {k: free_port() for k in ("fleet", "control", "serverappio")}
    app = write_app(os.path.join(work, "app"), address=f"127.0.0.1:{ports['control']}",
                    ca=None if args.insecure else os.path.join(certs, "ca.crt"),
                    insecure=args.insecure)
    tls = ["--insecure"] if args.insecure else ["--ca", os.path.join(certs, "ca.crt")]
    encoder = ["--encoder", os.path.abspath(args.encoder)] if args.encoder else []
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # Ctrl-C and a plain kill both stop everything (a kill -9 too: each daemon dies with this
    # process, PR_SET_PDEATHSIG, and Flower's helpers watch their parents).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    daemons, run = [], None
    try:
        superlink = Daemon(DEPLOY + ["superlink", "--state-dir", os.path.join(work, "superlink"),
                                     "--host", "127.0.0.1",
                                     "--fleet-port", str(ports["fleet"]),
                                     "--control-port", str(ports["control"]),
                                     "--serverappio-port", str(ports["serverappio"])]
                           + (["--insecure", "--open"] if args.insecure else ["--certs", certs]),
                           log=os.path.join(logs, "superlink.log"), name="SuperLink")
        daemons.append(superlink)
        wait_for_port("127.0.0.1", ports["control"], 120, superlink)
        print(f"SuperLink up (pid {superlink.pid}; Fleet API 127.0.0.1:{ports['fleet']})")
        for site in SITES:
            if not args.insecure:
                subprocess.run(DEPLOY + ["register", "--app", app, "--key",
                                         os.path.join(certs, "sites", f"{site}.pub")],
                               check=True, capture_output=True, timeout=120)
            key = [] if args.insecure else ["--key", os.path.join(certs, "sites", f"{site}.key")]
            daemons.append(Daemon(
                DEPLOY + ["supernode", "--superlink", f"127.0.0.1:{ports['fleet']}",
                          "--site", site, "--data", data[site],
                          "--state-dir", os.path.join(work, "state", site), "--poll", "0.1",
                          "--log", os.path.join(logs, f"{site}.flower.log")]
                + tls + key + encoder,
                log=os.path.join(logs, f"{site}.log"), name=site))
            print(f"SuperNode {site} started (pid {daemons[-1].pid}; data {data[site]})")
        run = subprocess.Popen(
            DEPLOY + ["run", "--app", app, "--dataset", "gad", "--algorithm", "fedavgt",
                      "--num-rounds", str(args.rounds), "--min-nodes", str(len(SITES)),
                      "--round-timeout", "600",
                      "--encoder-layers", str(args.encoder_layers), "--freeze-embedding",
                      "--max-len", "64", "--batch-size", "8", "--num-epochs", "1",
                      "--num-iters", "10", "--learning-rate", "5e-5",
                      "--out", os.path.join(work, "run"), "--overwrite"] + encoder,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + args.timeout
        with open(os.path.join(logs, "run.log"), "w") as log:
            for line in run.stdout:
                log.write(line)
                # The ServerApp's own lines (Flower's are in run.log).
                if line.startswith(("round ", "FedAvgT", "site ", "error", "warning")):
                    print(line.rstrip(), flush=True)
                if time.monotonic() > deadline:
                    run.kill()
                    raise TimeoutError(f"the run took longer than {args.timeout:g} s")
        if run.wait() != 0:
            print(f"the run failed; see {logs}/run.log", file=sys.stderr)
            return 1
        print(f"wrote {os.path.join(work, 'run')}/: metrics.csv, summary.json, curves.png, "
              f"models/FedAvgT")
        return 0
    except KeyboardInterrupt:
        print("interrupted; stopping everything", file=sys.stderr)
        if run is not None:
            run.terminate()
        return 130
    finally:
        stop_all(daemons)
        print(f"stopped {len(daemons)} process(es); logs in {logs}")


if __name__ == "__main__":
    sys.exit(main())
