"""The memory of a robust round against a mean round, as a user runs it.

    python benchmarks/robust_memory.py --out results/robust_memory          # 10 and 100 clients
    python benchmarks/robust_memory.py --out results/robust_memory \
        --record benchmarks/measured/robust-memory.json                      # the committed one
    python benchmarks/robust_memory.py --clients 10 --rules mean,median --executors local \
        --out DIR

Each cell is one run of ``python -m tffre run`` in a fresh process (the main job's LSTM on the
embedded IMCS-V2 sample, FedAvg, every client every round, two rounds), with the mean
(``--robust`` unset) or a robust rule, on each executor: ``tff`` (what ``auto`` picks without
a GPU: the round runs in TFF's worker_binary) and ``local`` (in-process). A robust rule keeps
every upload of the round at the server where the mean keeps one sum
(:func:`tffre.robust.collecting.memory_bytes`); the table shows what that buffer is (clients x
one upload, from the run's own bytes uploaded) and what it does to the run's peak RSS
(``summary.json``'s ``peak_rss_mib``: this process and the TFF worker) and wall time.
Writes ``robust_memory.json`` (the rows and the mean run's provenance: commit, packages,
machine) and ``robust_memory.md`` to ``--out`` and prints the table; ``--record PATH`` writes
the JSON there too (the committed one is ``benchmarks/measured/robust-memory.json``).
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
from tffre.record_scores import markdown_table  # noqa: E402
# The main job's model and data at a short budget: what is measured is the server's buffer,
# not the training.
JOB = ["--dataset", "imcs", "--model", "lstm", "--algorithm", "fedavg", "--num-rounds", "2",
       "--eval-every", "2", "--num-epochs", "1", "--num-iters", "2", "--seed", "0",
       "--no-progress", "--no-train-loss", "--checkpoint-every", "0"]
RULES = ("mean", "median", "krum")
#: Each rule's own flags (Krum assumes one faulty client; the memory does not depend on f).
RULE_FLAGS = {"krum": ["--robust-f", "1"]}


EXECUTORS = ("tff", "local")


def cell_arguments(clients, rule, folder, executor="local"):
    """The arguments of ``python -m tffre run`` for one cell."""
    argv = [*JOB, "--clients", str(clients), "--clients-per-round", str(clients),
            "--executor", executor, "--out", folder, "--overwrite"]
    return argv + (["--robust", rule, *RULE_FLAGS.get(rule, [])] if rule != "mean" else [])


def run_cell(clients, rule, out, executor):
    """summary.json of one run with ``clients`` clients per round under ``rule``."""
    folder = os.path.join(out, f"{executor}_{rule}_{clients}")
    command = [sys.executable, "-m", "tffre", "run",
               *cell_arguments(clients, rule, folder, executor)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"robust_memory: {rule} at {clients} clients on {executor} failed "
                         f"(exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    with open(os.path.join(folder, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    return summary


def cell_row(clients, rule, summary, executor="local"):
    """One row: the buffer a rule keeps, the run's peak RSS and time."""
    entry = next(iter(summary["algorithms"].values()))
    upload = entry["bytes_uploaded_per_round"] / clients   # one client's upload, bytes
    kept = upload * (clients if rule != "mean" else 1)
    return {"executor": executor, "clients": clients, "rule": rule, "upload_mb": upload / 1e6,
            "server_buffer_mb": kept / 1e6,
            # this process and any TFF worker (tffre.runtime.peak_rss_mib)
            "peak_rss_mib": summary["peak_rss_mib"]["total"],
            "wall_seconds": summary["wall_seconds"]}


def markdown(rows):
    """The rows as a Markdown table, each rule's peak RSS beside the mean's on its executor at
    its count of clients."""
    mean = {(r["executor"], r["clients"]): r["peak_rss_mib"] for r in rows
            if r["rule"] == "mean"}
    body = []
    for r in rows:
        key = (r["executor"], r["clients"])
        extra = (f"{r['peak_rss_mib'] - mean[key]:+.0f}"
                 if r["rule"] != "mean" and key in mean else "-")
        body.append([r["executor"], r["clients"], r["rule"], f"{r['upload_mb']:.2f}",
                     f"{r['server_buffer_mb']:.1f}", f"{r['peak_rss_mib']:.0f}", extra,
                     f"{r['wall_seconds']:.0f}"])
    return markdown_table(["executor", "clients per round", "rule", "one upload (MB)",
                           "server keeps (MB)", "peak RSS (MiB)", "minus the mean's (MiB)",
                           "wall (s)"], body)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="10,100", help="comma-separated counts")
    parser.add_argument("--rules", default=",".join(RULES),
                        help="comma-separated: mean and --robust rules")
    parser.add_argument("--executors", default=",".join(EXECUTORS),
                        help="comma-separated: tff, local")
    parser.add_argument("--out", required=True, help="the run folders and the table")
    parser.add_argument("--record", help="also write the JSON record to this path")
    args = parser.parse_args(argv)
    rows, provenance = [], None
    cells = [(e, int(c), r) for e in args.executors.split(",")
             for c in args.clients.split(",") for r in args.rules.split(",")]
    for executor, clients, rule in cells:
        print(f"robust_memory: {rule} at {clients} clients on {executor} ...", flush=True)
        summary = run_cell(clients, rule, args.out, executor)
        provenance = provenance or summary.get("provenance")
        rows.append(cell_row(clients, rule, summary, executor))
        print(f"  peak RSS {rows[-1]['peak_rss_mib']:.0f} MiB, "
              f"{rows[-1]['wall_seconds']:.0f} s", flush=True)
    table = markdown(rows)
    record = {"benchmark": "robust-memory", "job": JOB, "rows": rows,
              "provenance": provenance}
    os.makedirs(args.out, exist_ok=True)
    for path in [os.path.join(args.out, "robust_memory.json")] + (
            [args.record] if args.record else []):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
    with open(os.path.join(args.out, "robust_memory.md"), "w", encoding="utf-8") as f:
        f.write(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
