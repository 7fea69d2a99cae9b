"""FedED's tables from finished runs: Tables 3-5 (P/R/F1), 6 (per class), 7 (upload), 8 (rounds).

Each function reads what :func:`tffre.experiments.run` wrote to a run folder
(``summary.json``, ``metrics.csv``, ``per_class/<algorithm>.csv``) and returns a
DataFrame in the paper's layout with the paper's figures beside ours.
``examples/re_distillation.py`` prints them.
"""

import os

import pandas as pd

from tffre import paper_tables
from tffre.jsonio import read_json_object
from tffre.metrics import MICRO_ROW, format_bytes, rounds_to_target


def _per_class(run_dir, name):
    path = os.path.join(run_dir, "per_class", f"{name}.csv")
    return pd.read_csv(path, keep_default_na=False).set_index("label") \
        if os.path.isfile(path) else None


def prf_table(run_dir):
    """Tables 3-5: the final models' micro P/R/F1 over the positive classes, beside the paper's."""
    summary = read_json_object(os.path.join(run_dir, "summary.json"))
    dataset = summary["config"]["dataset"]
    _, paper = paper_tables.FEDED_TABLES.get(dataset, (None, {}))
    rows = {}
    for name, s in summary["algorithms"].items():
        table = _per_class(run_dir, name)
        micro = table.loc[MICRO_ROW] if table is not None else None
        row = {"P": None if micro is None else micro["precision"],
               "R": None if micro is None else micro["recall"],
               "F1": None if micro is None else micro["f1"],
               "max F1": s.get("max_test_f1")}
        if name in paper:
            p, r, f = paper[name]
            row.update({"paper P": p / 100, "paper R": r / 100, "paper F1": f / 100})
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def per_class_table(run_dir, names=("FedAvgT", "FedAttT", "FedED")):
    """Table 6: F1 per relation type of each algorithm's final model, beside the paper's."""
    ours = {name: _per_class(run_dir, name) for name in names}
    labels = next((t.index for t in ours.values() if t is not None), [])
    rows = {}
    for label in labels:
        if label == MICRO_ROW:
            continue
        row = {name: (None if t is None or label not in t.index else t.loc[label, "f1"])
               for name, t in ours.items()}
        row["support"] = next(int(t.loc[label, "support"]) for t in ours.values()
                              if t is not None)
        paper = paper_tables.FEDED_TABLE_6.get(label)
        for column, value in zip(paper_tables.FEDED_TABLE_6_COLUMNS, paper or ()):
            row[f"paper {column}"] = value / 100
        rows[label] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def upload_table(run_dir):
    """Table 7: bytes each client uploads per round, ours (measured from the types) and the
    paper's, with what it receives."""
    summary = read_json_object(os.path.join(run_dir, "summary.json"))
    dataset = summary["config"]["dataset"]
    clients = summary["clients_per_round"]
    rows = {}
    for name, s in summary["algorithms"].items():
        if name == "Centralised":
            continue
        up = s["bytes_uploaded_per_round"] / clients
        down = s["bytes_broadcast_per_round"] / clients
        paper = paper_tables.FEDED_TABLE_7.get(name, {}).get(dataset)
        rows[name] = {"upload B": int(up), "upload": format_bytes(up),
                      "paper upload": None if paper is None else format_bytes(paper),
                      "broadcast B": int(down), "broadcast": format_bytes(down)}
    return pd.DataFrame.from_dict(rows, orient="index")


def rounds_table(run_dirs, target, names=("FedAvgT", "FedAttT", "FedED")):
    """Table 8: rounds to reach test F1 ``target`` per (B, E) setting; None: not reached.

    ``run_dirs``: {(batch_size, epochs): run folder}. The paper's rows (i2b2,
    target 0.72) are joined where it has the same (B, E).
    """
    rows = {}
    for (batch, epochs), run_dir in run_dirs.items():
        frame = pd.read_csv(os.path.join(run_dir, "metrics.csv"))
        row = {}
        for name in names:
            part = frame[frame["algorithm"] == name]
            row[name] = rounds_to_target(dict(zip(part["round"], part["test_f1"])), target) \
                if len(part) else None
        paper = paper_tables.FEDED_TABLE_8.get((batch, epochs))
        for name, value in zip(names, paper or ()):
            row[f"paper {name}"] = value
        rows[f"B={batch} E={epochs}"] = row
    return pd.DataFrame.from_dict(rows, orient="index").astype("Int64")   # rounds: integers
