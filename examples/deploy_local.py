"""Three hospitals on one machine: a real Flower deployment (loopback) of any task.

    python examples/deploy_local.py                    # GAD, FedAvgT, TLS, registered sites only
    python examples/deploy_local.py --dataset imcs     # IMCS-V2 dialogues, the LSTM
    python examples/deploy_local.py --dataset cdr      # document-level RE (FedLCC's task)
    python examples/deploy_local.py --dataset oct-c8   # retinal OCT images, ResNet-18
    python examples/deploy_local.py --rounds 5 --out results/deploy_local
    python examples/deploy_local.py --insecure         # no TLS (a warning says why not to)

What it does, each step a ``python -m tffre deploy`` command a real site would run:

1. deals the dataset's embedded sample over three site folders under ``--out``/sites
   (record i to site i mod 3, each in the dataset's own format: :mod:`tffre.data.deal`);
2. ``deploy certs``: a demo CA, the SuperLink's certificate and one key pair per site;
3. starts a SuperLink (``deploy superlink``: TLS, ``--enable-supernode-auth``) and
   registers the three sites' public keys (``deploy register``);
4. starts three SuperNodes as separate processes (``deploy supernode --dataset``: each checks
   its own data first), each with its own data and state folder, never the server's;
5. ``deploy run``: the dataset's small preset (:data:`PRESETS`), printing each round's
   metrics, and writing ``metrics.csv``, ``summary.json``, ``curves.png`` and the model
   bundle (``models/<algorithm>``) to ``--out``/run;
6. stops everything it started, also on Ctrl-C or an error.

Logs of each process: ``--out``/logs.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

from tffre.data.deal import deal
from tffre.deploy.certs import make_certificates
from tffre.deploy.commands import INSECURE_WARNING
from tffre.deploy.launch import Daemon, free_port, stop_all, wait_for_port
from tffre.deploy.project import write_app

SITES = ("hospital-a", "hospital-b", "hospital-c")
DEPLOY = [sys.executable, "-m", "tffre", "deploy"]
#: Each dataset's algorithm and small settings (the task's defaults otherwise): a few minutes
#: on a 2-core CPU. GAD: the 2-layer MiniLM with frozen embeddings (sent to each site once).
PRESETS = {
    "gad": ["--algorithm", "fedavgt", "--encoder-layers", "2", "--freeze-embedding",
            "--max-len", "64", "--batch-size", "8", "--num-epochs", "1", "--num-iters", "10",
            "--learning-rate", "5e-5"],
    "imcs": ["--algorithm", "fedavgs", "--model", "lstm", "--batch-size", "10",
             "--num-epochs", "1", "--num-iters", "20"],
    "cdr": ["--algorithm", "fedavgt", "--encoder-layers", "1", "--max-len", "256",
            "--batch-size", "2", "--num-epochs", "1", "--num-iters", "5",
            "--learning-rate", "3e-4"],
    # examples/fedcb_images.py's scale: ResNet-18 of width 8 on 32x32, two local epochs.
    "oct-c8": ["--algorithm", "fedavgt", "--resnet-width", "8", "--image-size", "32",
               "--batch-size", "8", "--num-epochs", "2", "--num-iters", "0",
               "--learning-rate", "1e-3"],
}
#: Rounds by default: the images need more than the others to leave chance (1/8).
ROUNDS = {"gad": 3, "imcs": 3, "cdr": 3, "oct-c8": 10}


def write_partitions(folder, dataset, sites=SITES):
    """Deals ``dataset``'s embedded sample over the sites (:func:`tffre.data.deal.deal`);
    returns {site: its data folder}."""
    from tffre import tasks
    return deal(tasks.task_of(dataset).sample_path(dataset), folder, sites)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="examples/deploy_local.py",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="gad", choices=sorted(PRESETS))
    parser.add_argument("--out", default=None, help="default results/deploy_local/DATASET")
    parser.add_argument("--rounds", type=int, default=None,
                        help="default: 3 (oct-c8: 10)")
    parser.add_argument("--encoder", help="encoder folder (GAD, CDR; default the packaged "
                                          "MiniLM)")
    parser.add_argument("--insecure", action="store_true", help="no TLS, any site admitted")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds for the run")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or ROUNDS[args.dataset]
    if args.insecure:
        print(INSECURE_WARNING, file=sys.stderr)
    work = os.path.abspath(args.out or os.path.join("results", "deploy_local", args.dataset))
    logs = os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    data = write_partitions(os.path.join(work, "sites"), args.dataset)
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
                          "--site", site, "--data", data[site], "--dataset", args.dataset,
                          "--state-dir", os.path.join(work, "state", site), "--poll", "0.1",
                          "--log", os.path.join(logs, f"{site}.flower.log")]
                + tls + key + encoder,
                log=os.path.join(logs, f"{site}.log"), name=site))
            print(f"SuperNode {site} started (pid {daemons[-1].pid}; data {data[site]})")
        run = subprocess.Popen(
            DEPLOY + ["run", "--app", app, "--dataset", args.dataset,
                      "--num-rounds", str(args.rounds), "--min-nodes", str(len(SITES)),
                      "--round-timeout", "600", "--out", os.path.join(work, "run"),
                      "--overwrite"] + PRESETS[args.dataset] + encoder,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + args.timeout
        with open(os.path.join(logs, "run.log"), "w") as log:
            for line in run.stdout:
                log.write(line)
                # The ServerApp's own lines (Flower's are in run.log).
                if line.startswith(("round ", "Fed", "site ", "error", "warning")):
                    print(line.rstrip(), flush=True)
                if time.monotonic() > deadline:
                    run.kill()
                    raise TimeoutError(f"the run took longer than {args.timeout:g} s")
        if run.wait() != 0:
            print(f"the run failed; see {logs}/run.log", file=sys.stderr)
            return 1
        print(f"wrote {os.path.join(work, 'run')}/: metrics.csv, summary.json, curves.png, "
              f"models/")
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
