"""Records: the small JSON files every figure of tffre's is rendered from.

A run's folder (``metrics.csv``, ``summary.json``) holds everything about one run. A
**record** gathers what a reader needs of several runs, a comparison's settings, algorithms
and seeds, in one file small enough to commit (``benchmarks/results/<comparison>.json``)::

    {"format": "tffre-record/1", "comparison": "iid-gad", "title": "...",
     "metric": "f1", "baseline": "FedAvgT",
     "choices": [{"what": "trainable layers", "candidates": ["top 2 ...", "top 4 ..."]}],
     "settings": {"top 2 ...": {"flags": {...}, "note": "..."}},
     "runs": [RUN, ...]}

(a grid record adds ``"grid": {"rows": FACET, "columns": FACET}`` and each setting its
``"facets"``: :mod:`tffre.grid_report`)

and each RUN (:func:`run_entry`) is::

    {"setting": "top 2 ...", "seed": 0, "flags": {every flag of the run},
     "provenance": {"commit", "dirty", "versions", "machine", "data_files": [sha256...]},
     "wall_seconds", "peak_rss_mib", "guesses": {"majority": F1, "all_positive": F1, ...},
     "algorithms": {NAME: {"rounds": {"round": [...], "dev_f1": [...], "test_f1": [...]},
                           "selected": {"round", "dev", "test"},
                           "bytes_uploaded_per_round", "bytes_broadcast_per_round",
                           "mean_round_ms", "wall_seconds"}}}

A setting may run each algorithm apart (``"part"``: the run's ``--algorithm``, one entry per
part, seed and setting), so that a long seed's work survives a session cut short; a reader
sees a seed's parts as one run (:func:`tffre.record_scores.merged_runs`).

``selected`` is the round dev chose (:func:`tffre.selection.best_dev_round`) and its test
score, the figure reported (``"by": "best dev"``); a run without a dev split reports its
last round (``"by": "final round (no dev split)"``), which test did not choose either. What a comparison chose (a setting, "the best algorithm") is not
stored: :mod:`tffre.report` derives it from the runs' dev scores, so a record cannot hold a
choice its runs do not support.
"""

import os

import pandas as pd

from tffre.jsonio import read_json_object, write_json
from tffre.selection import best_dev_round

FORMAT = "tffre-record/1"
#: The per-round scores a record keeps of each algorithm (those the run evaluated).
ROUND_COLUMNS = ("dev_f1", "test_f1", "dev_accuracy", "test_accuracy")
#: The guesses a run's summary holds: {record key: summary key}.
GUESSES = {"majority": "majority_class_test_f1", "all_positive": "all_positive_test_f1",
           "majority_accuracy": "majority_class_test_accuracy",
           "lookup_accuracy": "lookup_test_accuracy"}
#: What each algorithm's entry copies from the summary.
COSTS = ("bytes_uploaded_per_round", "bytes_broadcast_per_round", "mean_round_ms",
         "wall_seconds", "epochs", "learning_rate")


class RecordError(ValueError):
    """A record or run folder that cannot be read; the message names the file."""


def metric_of(summary):
    """"f1" for a run scored by F1 (relations), else "accuracy"."""
    return "f1" if any("max_test_f1" in a for a in summary["algorithms"].values()) \
        else "accuracy"


def run_entry(folder, setting=None, part=None):
    """The record entry of the finished run in ``folder`` (see the module docstring).

    Args:
      folder: a run's folder (``summary.json`` and ``metrics.csv``).
      setting: the comparison's name for the run's setting; default the folder's name (its
        parent's, for a ``seed_<s>`` folder; its grandparent's, for a part's
        ``seed_<s>/<algorithm>`` folder).
      part: the part of its setting's seed the run is (its ``--algorithm``), when the
        setting runs its algorithms apart; default the folder's name for a
        ``seed_<s>/<algorithm>`` folder given no ``setting``, else None (a whole run).
    """
    summary_path = os.path.join(folder, "summary.json")
    metrics_path = os.path.join(folder, "metrics.csv")
    for path in (summary_path, metrics_path):
        if not os.path.isfile(path):
            raise RecordError(f"{folder}: no {os.path.basename(path)} (not a finished run)")
    summary = read_json_object(summary_path, RecordError)
    if "algorithms" not in summary or "config" not in summary:
        raise RecordError(f"{summary_path}: not a run's summary (no algorithms or config)")
    frame = pd.read_csv(metrics_path)
    metric = metric_of(summary)
    if setting is None:
        names = os.path.normpath(os.path.abspath(folder)).split(os.sep)
        if len(names) > 2 and names[-2].startswith("seed_"):     # a part of a seed
            setting, part = names[-3], names[-1] if part is None else part
        else:
            setting = names[-2] if names[-1].startswith("seed_") else names[-1]
    algorithms = {}
    for name, figures in summary["algorithms"].items():
        rows = frame[frame["algorithm"] == name]
        evaluated = rows.dropna(subset=[c for c in (f"test_{metric}",) if c in rows])
        rounds = {"round": [int(r) for r in evaluated["round"]]}
        for column in ROUND_COLUMNS:
            if column in evaluated and evaluated[column].notna().any():
                rounds[column] = [None if pd.isna(v) else float(v) for v in evaluated[column]]
        test = rounds.get(f"test_{metric}", [None] * len(evaluated))
        chosen = best_dev_round(rounds["round"], rounds.get(f"dev_{metric}", [None] * len(test)),
                                test)
        if chosen is not None:
            chosen["by"] = "best dev"
        elif test and test[-1] is not None:
            # No dev split (the synthetic set): the last round, which test did not choose.
            chosen = {"round": rounds["round"][-1], "dev": None, "test": test[-1],
                      "by": "final round (no dev split)"}
        entry = {"rounds": rounds, "selected": chosen}
        entry.update({k: figures[k] for k in COSTS if figures.get(k) is not None})
        algorithms[name] = entry
    return {"setting": setting, "seed": summary.get("seed"), "metric": metric,
            "flags": summary["config"], "provenance": summary.get("provenance"),
            "wall_seconds": summary.get("wall_seconds"),
            "peak_rss_mib": summary.get("peak_rss_mib"),
            "guesses": {k: summary[v] for k, v in GUESSES.items() if summary.get(v) is not None},
            "algorithms": algorithms, **({"part": part} if part is not None else {})}


def new_record(comparison, *, title, baseline=None, choices=(), settings=None, runs=(),
               grid=None):
    """A record (see the module docstring); ``metric`` is taken from its runs; ``grid``
    ({"rows", "columns"}: two facets of the settings) lays its settings out as a grid
    (:mod:`tffre.grid_report`)."""
    runs = list(runs)
    metrics = {r["metric"] for r in runs}
    if len(metrics) > 1:
        raise RecordError(f"{comparison}: runs scored by different metrics ({sorted(metrics)})")
    return {"format": FORMAT, "comparison": comparison, "title": title,
            "metric": metrics.pop() if metrics else None, "baseline": baseline,
            "choices": [dict(c) for c in choices], "settings": dict(settings or {}),
            "runs": runs, **({"grid": dict(grid)} if grid else {})}


def read_record(path):
    """The record at ``path``; RecordError naming the file when it is not one."""
    record = read_json_object(path, RecordError)
    if record.get("format") != FORMAT:
        raise RecordError(f"{path}: not a tffre record (format {record.get('format')!r}, "
                          f"expected {FORMAT!r})")
    for i, run in enumerate(record.get("runs", [])):
        for key in ("setting", "seed", "algorithms"):
            if key not in run:
                raise RecordError(f"{path}: runs[{i}] has no {key!r}")
    return record


def write_record(path, record):
    """Writes ``record`` as JSON (runs sorted by setting order, then seed, then the parts in
    the order the setting's ``"parts"`` lists them); returns ``path``."""
    settings = record.get("settings") or {}
    order = list(settings)
    rank = {s: i for i, s in enumerate(order)}

    def part(run):      # a seed's parts in the order its setting declares (else as they came)
        parts = (settings.get(run["setting"]) or {}).get("parts") or []
        return parts.index(run["part"]) if run.get("part") in parts else len(parts)
    record = dict(record, runs=sorted(record["runs"], key=lambda r: (
        rank.get(r["setting"], len(order)), r["setting"], r["seed"], part(r))))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return write_json(path, record)


def _key(run):
    return run["setting"], run["seed"], run.get("part")


def with_run(record, entry):
    """``record`` with ``entry`` in place of any run of the same setting, seed and part."""
    runs = [r for r in record["runs"] if _key(r) != _key(entry)]
    return dict(record, runs=runs + [entry],
                metric=record.get("metric") or entry.get("metric"))


def has_run(record, setting, seed, part=None):
    """True when ``record`` holds the run of ``setting`` and ``seed`` (its ``part``, where
    given)."""
    return any(_key(r)[:2] == (setting, seed) and (part is None or r.get("part") == part)
               for r in record.get("runs", []))


def load(path):
    """A record from a record file, a run's folder, or a folder of run folders (each
    ``.../<setting>/seed_<s>/`` or a single run): what ``python -m tffre report`` reads."""
    if os.path.isfile(path):
        return read_record(path)
    if not os.path.isdir(path):
        raise RecordError(f"{path}: no such record file or run folder")
    if os.path.isfile(os.path.join(path, "summary.json")):
        entry = run_entry(path)
        return new_record(entry["setting"], title=entry["setting"], runs=[entry],
                          settings={entry["setting"]: {}})
    found = sorted(os.path.dirname(os.path.join(here, "summary.json"))
                   for here, _, files in os.walk(path) if "summary.json" in files
                   and "metrics.csv" in files)
    if not found:
        raise RecordError(f"{path}: holds no finished run (summary.json and metrics.csv)")
    runs = [run_entry(f) for f in found]
    name = os.path.basename(os.path.normpath(path))
    return new_record(name, title=name, runs=runs,
                      settings={r["setting"]: {} for r in runs})
