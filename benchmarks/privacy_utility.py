"""Utility of client-level DP: test accuracy at epsilon in {inf, 8, 3, 1}.

    python benchmarks/privacy_utility.py [--workloads synthetic,imcs] [--out results/privacy]

Each workload runs FedAvg once without DP (epsilon = inf) and once per target epsilon, with
sigma calibrated by dp-accounting for the planned rounds (``--dp-target-epsilon``), everything
else equal. It writes ``table.csv``, ``summary.json`` and ``accuracy_vs_epsilon.png`` to
``--out`` and prints the table. The workloads:

* ``synthetic``: synthetic(0.5, 0.5) (FLCMC Sect. 5.1) with 1,000 clients, 100 per round,
  logistic regression, adaptive clipping (Andrew et al.: C follows the median update norm;
  at epsilon 1 a fixed C, since adaptive clipping cannot reach the sigma it needs);
* ``imcs``: the embedded IMCS sample, 20 clients, 10 per round, the LSTM of the main
  example, a fixed clip: the setting of a few hospitals.
"""

import argparse
import json
import math
import os
import sys

EPSILONS = (math.inf, 8.0, 3.0, 1.0)
WORKLOADS = {
    "synthetic": {"dataset": "synthetic", "alpha": 0.5, "beta": 0.5, "clients": 1000,
                  "clients_per_round": 100, "num_rounds": 40, "batch_size": 10,
                  "num_epochs": 1, "num_iters": 20, "learning_rate": 0.05, "eval_every": 5,
                  "dp_clip": "adaptive"},
    "imcs": {"dataset": "imcs", "model": "lstm", "clients": 20, "clients_per_round": 10,
             "num_rounds": 12, "batch_size": 10, "num_epochs": 2, "num_iters": 20,
             "learning_rate": 0.01, "algorithm": "fedavgs", "dp_clip": 1.0},
}
# Adaptive clipping's noised count needs sigma < 2 * (clients per round / 20): at 100 clients
# per round and 40 rounds, epsilon 1 needs sigma 10.7 > 10, so that run clips at a fixed C,
# about the median update norm the adaptive runs settle at (0.63-0.67 at epsilon 8 and 3).
ADAPTIVE_FROM = 3.0
FALLBACK_CLIP = 0.65
COMMON = {"algorithm": "fedavg", "executor": "local", "checkpoint_every": 0,
          "no_progress": True, "seed": 0}


def preset_of(workload, epsilon):
    """The run of ``workload`` at ``epsilon`` (inf: no DP)."""
    preset = {**COMMON, **WORKLOADS[workload]}
    if math.isinf(epsilon):
        preset.pop("dp_clip")
    else:
        preset["dp_target_epsilon"] = epsilon
        if preset["dp_clip"] == "adaptive" and epsilon < ADAPTIVE_FROM:
            preset["dp_clip"] = FALLBACK_CLIP
    return preset


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="synthetic,imcs")
    parser.add_argument("--out", default="results/privacy")
    parser.add_argument("--rerun", action="store_true",
                        help="run again what finished before (default: read its summary back)")
    args = parser.parse_args(argv)
    import pandas as pd
    from tffre.sweep import run_preset
    rows = []
    for workload in args.workloads.split(","):
        for epsilon in EPSILONS:
            tag = "inf" if math.isinf(epsilon) else f"{epsilon:g}"
            summary = run_preset(preset_of(workload, epsilon),
                                 os.path.join(args.out, workload, f"eps_{tag}"),
                                 prog="benchmarks/privacy_utility.py", rerun=args.rerun)
            (name, s), = summary["algorithms"].items()
            privacy = s.get("privacy") or {}
            rows.append({"workload": workload, "target epsilon": tag,
                         "epsilon": privacy.get("epsilon", math.inf),
                         "delta": privacy.get("delta"),
                         "noise multiplier": privacy.get("noise_multiplier", 0.0),
                         "clip": privacy.get("clip", "-"),
                         "final test accuracy": s.get("final_test_accuracy"),
                         "max test accuracy": s.get("max_test_accuracy"),
                         "majority class": summary.get("majority_class_test_accuracy"),
                         "seconds": summary.get("wall_seconds")})
    table = pd.DataFrame(rows)
    os.makedirs(args.out, exist_ok=True)
    table.to_csv(os.path.join(args.out, "table.csv"), index=False)
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump({"workloads": WORKLOADS, "common": COMMON, "rows": rows}, f, indent=1,
                  default=str)
    plot(table, os.path.join(args.out, "accuracy_vs_epsilon.png"))
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"wrote {args.out}/table.csv, summary.json, accuracy_vs_epsilon.png")
    return 0


def plot(table, path):
    """Final test accuracy against epsilon, one line per workload (inf drawn at the right)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for workload, rows in table.groupby("workload", sort=False):
        finite = rows[rows["target epsilon"] != "inf"]
        line, = ax.plot(finite["epsilon"], finite["final test accuracy"], "o-", label=workload)
        base = rows[rows["target epsilon"] == "inf"]["final test accuracy"]
        if not base.empty:
            ax.axhline(float(base.iloc[0]), color=line.get_color(), ls="--", lw=1,
                       label=f"{workload}, no DP")
        majority = rows["majority class"].dropna()
        if not majority.empty:
            ax.axhline(float(majority.iloc[0]), color=line.get_color(), ls=":", lw=1,
                       label=f"{workload}, majority class")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon (client-level, after the run)")
    ax.set_ylabel("final test accuracy")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
