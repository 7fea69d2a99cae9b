"""The tables and plot of a grid record: settings laid out by two of their facets.

A comparison such as "what each defence costs and saves" runs one setting per cell of a grid
(a robust rule by a fault condition). Its record declares the layout, ``record["grid"] =
{"rows": "defence", "columns": "faults"}``, and each setting its place in it,
``record["settings"][label]["facets"] = {"defence": "median", "faults": "1 flip-labels",
"fault": "flip-labels", "faulty": 1}``. This module renders such a record, per algorithm:

* the test score at the best-dev round of every cell, mean ± sd over the seeds;
* every cell against its column's first row (no defence under the same faults): the paired
  difference over the seeds with its 95% interval (:mod:`tffre.differences`), so the first
  column (clean data) reads as what a defence costs and the others as what it saves;
* per column, the row of highest mean dev score (:func:`tffre.selection.best_by_dev`): dev
  alone says which rule to use under each condition;
* a plot: the test score against the number of faulty clients, a line per row and a panel
  per algorithm and fault kind, error bars of ± one sd.

The settings a declared choice did not choose are left out
(:func:`tffre.record_scores.shown_settings`).
"""

import textwrap

from tffre.differences import describe, paired_difference
from tffre import record_scores
from tffre.selection import best_by_dev


def is_grid(record):
    """True when ``record`` declares a grid layout."""
    return bool(record.get("grid"))


def cells(record):
    """{(row, column): setting} of the shown settings, with the rows and columns in declared
    order: (cells, rows, columns)."""
    grid = record["grid"]
    out, rows, columns = {}, [], []
    for setting in record_scores.shown_settings(record):
        facets = (record.get("settings", {}).get(setting) or {}).get("facets") or {}
        if grid["rows"] not in facets or grid["columns"] not in facets:
            continue
        row, column = facets[grid["rows"]], facets[grid["columns"]]
        out[(row, column)] = setting
        rows += [row] if row not in rows else []
        columns += [column] if column not in columns else []
    return out, rows, columns


def algorithms(record):
    """The federated algorithms of a grid record's runs, in first-seen order."""
    runs = {i: r for i, r in enumerate(record["runs"])}
    return [n for n in record_scores.algorithms_of(runs)
            if not n.startswith(record_scores.CENTRALISED)]


def scores(record, setting, algorithm, part="test"):
    """{seed: ``part`` score at the best-dev round} of ``algorithm`` in ``setting``."""
    return record_scores.selected(record_scores.runs_of(record, setting), algorithm, part)


def best_rows(record, algorithm):
    """{column: the row of highest mean dev score of ``algorithm``} (None while no cell of
    the column has a score)."""
    found, rows, columns = cells(record)
    return {c: best_by_dev({r: list(scores(record, found[(r, c)], algorithm, "dev").values())
                            for r in rows if (r, c) in found})[0] for c in columns}


def markdown(record):
    """The grid's tables in Markdown, per algorithm: the scores, the paired differences to
    the first row of each column, the best row by dev; the guesses beneath."""
    found, rows, columns = cells(record)
    if not found:
        return ""
    metric = record_scores.METRIC_NAMES.get(record.get("metric"), record.get("metric") or "score")
    grid = record["grid"]
    parts = []
    for name in algorithms(record):
        table = [[row] + [record_scores.cell(scores(record, found[(row, c)], name).values())
                          if (row, c) in found else "-" for c in columns] for row in rows]
        best = best_rows(record, name)
        table.append(["best by dev"] + [best[c] or "-" for c in columns])
        seeds = sorted({s for setting in found.values()
                        for s in scores(record, setting, name)})
        parts.append(f"{name}: test {metric} at the best-dev round, mean ± sd over seeds "
                     f"{', '.join(map(str, seeds))}; the last row is the {grid['rows']} of "
                     f"highest mean dev {metric} under each condition:\n\n"
                     + record_scores.markdown_table([grid["rows"]] + columns, table))
        first = rows[0]
        diffs = []
        for row in rows[1:]:
            line = [row]
            for c in columns:
                if (row, c) in found and (first, c) in found:
                    line.append(describe(paired_difference(
                        scores(record, found[(row, c)], name),
                        scores(record, found[(first, c)], name))))
                else:
                    line.append("-")
            diffs.append(line)
        if diffs:
            parts.append(f"{name}: each {grid['rows']} minus {first} under the same "
                         f"{grid['columns']}, paired over the seeds (95% interval):\n\n"
                         + record_scores.markdown_table([grid["rows"]] + columns, diffs))
    runs = {i: r for i, r in enumerate(record["runs"]) if r["setting"] in found.values()}
    guessed = record_scores.guesses(runs)
    if guessed:
        parts.append("; ".join(f"{record_scores.GUESS_NAMES.get(k, k)} {v:.3f}"
                               for k, v in guessed.items()) + ".")
    return "\n\n".join(parts)


def plot(record, path):
    """Test score against the number of faulty clients (facets "fault" and "faulty"): a line
    per row, a panel per algorithm and fault kind, error bars of ± one sd; writes ``path``
    (PNG). A cell without those facets (clean data) is each line's point at 0."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    found, rows, _ = cells(record)
    facets = {s: record["settings"][s]["facets"] for s in found.values()}
    kinds = list(dict.fromkeys(f["fault"] for f in facets.values() if f.get("fault")))
    names = algorithms(record)
    metric = record.get("metric") or "accuracy"
    fig, axes = plt.subplots(max(1, len(names)), max(1, len(kinds)), squeeze=False,
                             figsize=(4.2 * max(1, len(kinds)), 3.4 * max(1, len(names))))
    grid = record["grid"]
    for i, name in enumerate(names):
        for j, kind in enumerate(kinds or [None]):
            ax = axes[i][j]
            for row in rows:
                points = sorted(
                    (facets[s].get("faulty", 0), list(scores(record, s, name).values()))
                    for (r, _), s in found.items() if r == row
                    and facets[s].get("fault") in (kind, None))
                points = [(x, v) for x, v in points if v]
                if not points:
                    continue
                x = [p[0] for p in points]
                mean = [float(np.mean(v)) for _, v in points]
                sd = [float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for _, v in points]
                ax.errorbar(x, mean, yerr=sd, marker="o", capsize=3, label=row)
            for key, value in record_scores.guesses(dict(enumerate(record["runs"]))).items():
                if key in ("majority", "majority_accuracy"):
                    ax.axhline(value, color="grey", linestyle="--", linewidth=1,
                               label="majority")
            ax.set_title(f"{name}, {kind}" if kind else name, fontsize=10)
            ax.set_xlabel("faulty clients")
            ax.set_ylabel(f"test {record_scores.METRIC_NAMES.get(metric, metric)}")
            ax.set_xticks(sorted({f.get("faulty", 0) for f in facets.values()}))
    if rows:
        axes[0][0].legend(fontsize=7, title=grid["rows"], title_fontsize=7)
    fig.suptitle(textwrap.fill(record.get("title") or record["comparison"],
                               width=int(55 * max(1, len(kinds)))), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
