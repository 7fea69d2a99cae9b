"""FedCB's tables from finished runs: accuracy and macro-F1, mean ± std over seeds.

Each run (one β, one seed) is a folder of :func:`tffre.experiments.run` output
(``summary.json``). The figure per run is the final round's test accuracy and
macro-F1 of each algorithm's global model (FedRep: the mean of its clients'
personal models). Tables 2/3 put the methods in rows and β in columns, beside
the paper's; Table 4 the fraction of prompts FedCB used.
"""

import pandas as pd

from tffre import metrics, paper_tables
from tffre.jsonio import read_json_object

METHODS = ("FedAvg", "FedDyn", "FedProx", "FedRep", "FedRoD", "FedETF", "FedCB", "FedCB-avg")


def collect(runs):
    """One row per (run, algorithm): {beta, seed, prompt_fraction, algorithm, accuracy, f1,
    mean_round_ms, bytes_broadcast_per_round, bytes_uploaded_per_round}.

    ``runs``: [(beta, seed, prompt_fraction, run folder)].
    """
    rows = []
    for beta, seed, fraction, folder in runs:
        summary = read_json_object(f"{folder}/summary.json", ValueError)
        for name, s in summary["algorithms"].items():
            rows.append({"beta": beta, "seed": seed, "prompt_fraction": fraction,
                         "algorithm": name, "accuracy": s.get("final_test_accuracy"),
                         "f1": s.get("final_test_f1"), "mean_round_ms": s.get("mean_round_ms"),
                         "bytes_broadcast_per_round": s.get("bytes_broadcast_per_round"),
                         "bytes_uploaded_per_round": s.get("bytes_uploaded_per_round")})
    return pd.DataFrame(rows)


def _cell(mean, std):
    return "-" if mean is None else f"{mean:.2f} ± {std:.2f}"


def method_table(frame, dataset):
    """Tables 2/3: a row per method, accuracy and F1 (%) per β, ours beside the paper's."""
    main = frame[frame["prompt_fraction"] == 1.0]
    rows = []
    for method in [m for m in METHODS if m in set(main["algorithm"])]:
        row = {"method": method}
        for beta in sorted(set(main["beta"])):
            part = main[(main["algorithm"] == method) & (main["beta"] == beta)]
            _, paper = paper_tables.fedcb_reference(dataset, beta)
            for key, col in (("accuracy", 0), ("f1", 2)):
                row[f"beta={beta} {key}"] = _cell(*metrics.mean_and_sd(part[key], scale=100))
                ref = paper.get(method)
                row[f"beta={beta} paper {key}"] = "-" if ref is None else \
                    _cell(ref[col], ref[col + 1])
            row[f"beta={beta} seeds"] = int(len(part))
        rows.append(row)
    return pd.DataFrame(rows)


def prompt_table(frame):
    """Table 4: FedCB with a fraction of the prompts, per β, ours beside the paper's (OCT-C8)."""
    cb = frame[frame["algorithm"] == "FedCB"]
    rows = []
    for fraction in sorted(set(cb["prompt_fraction"])):
        row = {"prompts": f"FedCB({fraction:.0%})"}
        for beta in sorted(set(cb["beta"])):
            part = cb[(cb["prompt_fraction"] == fraction) & (cb["beta"] == beta)]
            ref = paper_tables.FEDCB_TABLE_4.get(beta, {}).get(fraction)
            for key, col in (("accuracy", 0), ("f1", 2)):
                row[f"beta={beta} {key}"] = _cell(*metrics.mean_and_sd(part[key], scale=100))
                row[f"beta={beta} paper {key}"] = "-" if ref is None else \
                    _cell(ref[col], ref[col + 1])
        rows.append(row)
    return pd.DataFrame(rows)


def cost_table(frame):
    """Mean round time and bytes per round of each method (main runs, all β and seeds)."""
    main = frame[frame["prompt_fraction"] == 1.0]
    return main.groupby("algorithm", sort=False)[
        ["mean_round_ms", "bytes_broadcast_per_round", "bytes_uploaded_per_round"]
    ].mean().round(0).reset_index()
