"""What a run writes: the metrics rows (CSV and TensorBoard), per-class tables, the summary.

* ``metrics.csv``: one row per algorithm and round, appended and flushed as
  soon as it exists (an interrupted run keeps its rows);
* ``tensorboard/<algorithm>/``: the same numbers released each round through
  ``tff.program.TensorBoardReleaseManager``, so ``tensorboard --logdir OUT``
  shows every algorithm's curves;
* ``per_class/<algorithm>.csv``: a relation model's test P/R/F1 per class;
* ``summary.json`` (NaN written as null) and ``curves.png``.
"""

import asyncio
import csv
import math
import os
import shutil
import sys

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from tffre.jsonio import write_json
from tffre.selection import best_dev_round

METRIC_COLUMNS = ["algorithm", "round", "train_loss", "test_accuracy", "dev_accuracy",
                  "test_f1", "dev_f1", "round_seconds", "bytes_broadcast", "bytes_uploaded",
                  "local_train_loss", "num_examples", "num_excluded_clients", "clients"]
OUTPUT_NAMES = ("metrics.csv", "summary.json", "curves.png", "checkpoints", "models",
                "per_class", "tensorboard", "per_site.csv")


def warn(message):
    """A warning on stderr that does not break the progress bar."""
    tqdm.write(f"warning: {message}", file=sys.stderr)


def prepare_out_dir(out_dir, *, resume=False, overwrite=False):
    """Creates ``out_dir``; refuses one that holds results unless resuming or overwriting.

    ``overwrite`` removes only the files this runner writes.
    """
    existing = [n for n in OUTPUT_NAMES if os.path.exists(os.path.join(out_dir, n))]
    if resume and "metrics.csv" not in existing:
        raise ValueError(f"{out_dir}: no metrics.csv to resume")
    if existing and not (resume or overwrite):
        raise ValueError(f"{out_dir} already holds results ({', '.join(existing)}); resume "
                         f"or overwrite it")
    if overwrite:
        for name in existing:
            path = os.path.join(out_dir, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    os.makedirs(out_dir, exist_ok=True)


def read_rows(csv_path):
    """The rows of an existing metrics.csv as (algorithm, round, raw dict) in file order."""
    if not os.path.isfile(csv_path):
        return []
    with open(csv_path, newline="") as f:
        return [(r["algorithm"], int(r["round"]), r) for r in csv.DictReader(f)]


class MetricsLog:
    """Writes each row to ``metrics.csv`` (flushed at once) and releases its numbers to
    TensorBoard (``tff.program.TensorBoardReleaseManager``, one run per algorithm).

    Args:
      out_dir: the run's folder.
      columns: the CSV's columns.
      kept: rows of an earlier run to write first (a resume keeps those before its
        checkpoints; TensorBoard already holds them).
    """

    def __init__(self, out_dir, columns, kept=()):
        self.out_dir = out_dir
        self.file = open(os.path.join(out_dir, "metrics.csv"), "w", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=columns, extrasaction="ignore")
        self.writer.writeheader()
        self.writer.writerows(kept)
        self.file.flush()
        self._boards = {}

    def write(self, row):
        """Appends ``row`` to the CSV and releases its numbers at step ``row["round"]``."""
        self.writer.writerow(row)
        self.file.flush()
        values = {k: float(v) for k, v in row.items()
                  if k not in ("algorithm", "round") and isinstance(v, (int, float, np.number))
                  and not isinstance(v, bool) and math.isfinite(float(v))}
        asyncio.run(self._board(row["algorithm"]).release(values, key=int(row["round"])))

    def _board(self, name):
        if name not in self._boards:
            import tensorflow_federated as tff
            self._boards[name] = tff.program.TensorBoardReleaseManager(
                os.path.join(self.out_dir, "tensorboard", name))
        return self._boards[name]

    def close(self):
        """Closes the CSV file."""
        self.file.close()


def round_row(name, rnd, clients, metrics):
    """The metrics row of one round from the process's ``next`` metrics."""
    train = metrics["client_work"]["train"]
    num_examples = int(train["num_examples"])
    return {"algorithm": name, "round": rnd, "train_loss": None, "test_accuracy": None,
            "dev_accuracy": None, "round_seconds": metrics["round"]["wall_seconds"],
            "bytes_broadcast": metrics["round"]["bytes_broadcast"],
            "bytes_uploaded": metrics["round"]["bytes_uploaded"],
            # An empty round has no local loss (TFF reports 0.0): write it as missing.
            "local_train_loss": float(train["loss"]) if num_examples else None,
            "num_examples": num_examples,
            "num_excluded_clients": int(metrics["client_work"]["num_excluded_clients"]),
            "clients": " ".join(clients)}


def warn_exclusions(name, rnd, row, num_clients):
    """Warns about the round's excluded (non-finite) client updates."""
    excluded = row["num_excluded_clients"]
    if excluded == num_clients:
        warn(f"{name} round {rnd}: every client update had NaN/Inf; the round was empty and "
             f"the global model was kept")
    elif excluded:
        warn(f"{name} round {rnd}: {excluded} client update(s) had NaN/Inf and were excluded")


def postfix(row):
    """The progress bar's figures for ``row``."""
    # train_loss is missing without its pass (--no-train-loss).
    shown = {"acc": row["test_accuracy"], "loss": row.get("train_loss")}
    if row.get("test_f1") is not None:
        shown["f1"] = row["test_f1"]
    return {k: f"{v:.3f}" for k, v in shown.items() if v is not None}


def write_per_class(evaluator, data, out_dir, name, class_names=None):
    """Writes ``per_class/<name>.csv``: the evaluation model's test P/R/F1 per class (FedED
    Table 6's layout) and the micro row over the positive classes."""
    from tffre.metrics import per_class_table
    _, preds = evaluator.predictions("test")
    y = np.asarray(data.pooled("test")[1]).reshape(-1)
    names = list(class_names or range(data.num_classes))
    table = per_class_table([names[i] for i in y], [names[i] for i in preds], names,
                            negative_label=names[evaluator.negative_label])
    os.makedirs(os.path.join(out_dir, "per_class"), exist_ok=True)
    table.to_csv(os.path.join(out_dir, "per_class", f"{name}.csv"), index=False)


def _selected(evaluated, metric, round_suffix):
    """Max, its round and the final value of ``test_<metric>``; and, where a dev split was
    evaluated, the test value at the round of best ``dev_<metric>``."""
    test, dev = f"test_{metric}", f"dev_{metric}"
    if test not in evaluated:
        return {}
    rows = evaluated.dropna(subset=[test])
    if rows.empty:
        return {}
    best = rows.loc[rows[test].idxmax()]
    out = {f"max_test_{metric}": float(best[test]), f"round_of_max_{metric}": int(best["round"]),
           f"final_test_{metric}": float(rows[test].iloc[-1])}
    # The other test scores of the selected rounds (document RE: P, R, intra/inter, Ign F1).
    others = [c for c in rows.columns if c.startswith("test_")
              and c not in (test, "test_accuracy")] if metric == "f1" else []
    for column in others:
        if pd.notna(rows[column].iloc[-1]):
            out[f"final_{column}"] = float(rows[column].iloc[-1])
    # The reported figure: test at the round dev chose (tffre.selection; ties: the earliest).
    chosen = None if dev not in rows else best_dev_round(
        list(rows["round"]), list(rows[dev]), list(rows[test]))
    if chosen is not None:
        at = rows[rows["round"] == chosen["round"]].iloc[0]
        out.update({f"best_dev_{metric}": chosen["dev"],
                    f"round_of_best_dev{round_suffix}": chosen["round"],
                    f"test_{metric}_at_best_dev": chosen["test"]})
        for column in others:
            if pd.notna(at[column]):
                out[f"{column}_at_best_dev"] = float(at[column])
    return out


def summarise(rows):
    """The figures of one algorithm's metric rows.

    ``max_test_accuracy`` is the maximum over rounds, as the paper's tables
    report it (it selects on the test set). Where a dev split was evaluated,
    ``test_accuracy_at_best_dev`` is the test accuracy at the round of best
    dev accuracy, the figure without that selection.
    """
    evaluated = rows.dropna(subset=["test_accuracy"])
    out = {"rounds": int(rows["round"].max()),
           "mean_round_ms": float(rows["round_seconds"].mean() * 1000),
           "median_round_ms": float(rows["round_seconds"].median() * 1000),
           "bytes_uploaded_per_round": float(rows["bytes_uploaded"].mean()),
           "bytes_broadcast_per_round": float(rows["bytes_broadcast"].mean()),
           "empty_rounds": int((rows["num_examples"] == 0).sum())}
    if evaluated.empty:
        return out
    out.update(min_train_loss=float(evaluated["train_loss"].min()))
    out.update(_selected(evaluated, "accuracy", ""))
    out.update(_selected(evaluated, "f1", "_f1"))
    return out


def write_summary(out_dir, summary, *, title, reference=None):
    """Adds each algorithm's figures (:func:`summarise`) to ``summary`` and writes
    ``summary.json`` and ``curves.png``; returns the summary."""
    from tffre.plots import plot_curves
    frame = pd.read_csv(os.path.join(out_dir, "metrics.csv"))
    for name in summary["algorithms"]:
        summary["algorithms"][name].update(summarise(frame[frame["algorithm"] == name]))
    write_json(os.path.join(out_dir, "summary.json"), summary)
    plot_curves(frame, os.path.join(out_dir, "curves.png"), title=title, reference=reference)
    return summary
