"""``python -m tffre report PATH...``: the tables and curves of records and run folders.

Every table of tffre's figures in the docs is rendered by this module from a committed
record (:mod:`tffre.records`), so a reader can re-derive it:

* **choices**: for each of a record's declared choices (trainable layers, rounds,
  threshold), every candidate's mean dev score over the seeds and the one dev chose
  (:func:`tffre.selection.best_by_dev`); a candidate not chosen shows no test score;
* **one table per setting**: each algorithm's test score at its best-dev round, mean ± sd
  over the seeds; its mean dev score; the best-dev rounds; its paired difference to the
  baseline (FedAvgT or FedAvg) per seed with a 95% interval, "no difference shown" where the
  interval holds 0 (:mod:`tffre.differences`); the bytes it uploads a round; the guesses
  (majority class, all-positive, IMCS's lookup) beside them; "the best algorithm" is the one
  of highest mean dev score;
* **centralised (same budget)**: the pooled data trained for the federated run's example
  passes; where the run tried several learning rates (``--centralised-learning-rates``),
  the rate of highest mean dev score, and per seed the epoch of best dev;
* **curves**: test score per round, the mean over seeds with a band of ± one sd (PNG).

Writes ``report.md``, ``report.csv`` (one row per setting, algorithm and seed) and
``<record>_curves.png`` to ``--out`` and prints the Markdown.
"""

import os
import sys

from tffre.differences import describe
# The reading of records lives in tffre.record_scores (tffre.grid_report reads it too); its
# names stay readable as report.<name>.
from tffre.record_scores import (  # noqa: F401
    CENTRALISED, METRIC_NAMES, GUESS_NAMES, cell, span, runs_of, selected, algorithms_of,
    baseline_of, choice_outcomes, shown_settings, joined, centralised_outcome, setting_rows,
    guesses, markdown_table)


def setting_markdown(record, setting):
    """One setting's table in Markdown, the guesses and the centralised reference beneath."""
    metric = METRIC_NAMES.get(record.get("metric"), record.get("metric") or "score")
    rows = setting_rows(record, setting)
    baseline = next((r["baseline"] for r in rows if r.get("baseline")), None)
    runs = runs_of(record, setting)
    by_dev = any((a.get("selected") or {}).get("by") == "best dev"
                 for r in runs.values() for a in r["algorithms"].values())
    header = ["algorithm", "seeds", f"test {metric} at best dev" if by_dev
              else f"test {metric}, final round (no dev split)", f"dev {metric}",
              "best-dev round" if by_dev else "round",
              f"minus {baseline}, paired (95% interval)" if baseline else "paired difference",
              "bytes up a round"]
    body = []
    for r in rows:
        name = r["algorithm"] + (" (best by dev)" if r["best_by_dev"] and len(rows) > 1 else "")
        if r.get("centralised"):
            lr = r["centralised"]["learning_rate"]   # None: one run at the rows' rate
            name = r["algorithm"] + ("" if lr is None else f", lr {lr:g}")
        body.append([name, len(r["seeds"]), cell(r["test"].values()), cell(r["dev"].values()),
                     span(r["rounds"].values()),
                     "baseline" if r["algorithm"] == baseline else describe(r["difference"]),
                     "-" if r["bytes_up"] is None else f"{r['bytes_up']:,.0f}"])
    for key, value in guesses(runs).items():
        body.append([GUESS_NAMES.get(key, key), "", f"{value:.3f}", "", "", "", ""])
    return markdown_table(header, body)


def choices_markdown(record):
    """A table per declared choice: each candidate's mean dev score and the chosen one."""
    metric = METRIC_NAMES.get(record.get("metric"), "score")
    parts = []
    for o in choice_outcomes(record):
        body = [[c, ", ".join(map(str, o["seeds"][c])) or "-",
                 "-" if o["means"][c] is None else f"{o['means'][c]:.3f}",
                 "**chosen**" if c == o["chosen"] else ""] for c in o["candidates"]]
        state = "" if o["complete"] else (" (not chosen yet: every candidate needs its runs "
                                          "on the same seeds, all it declares, first)")
        parts.append(f"{o['what']}, chosen by {o['algorithm']}'s mean dev {metric} over "
                     f"the seeds{state}:\n\n" + markdown_table(
                         ["candidate", "seeds", f"mean dev {metric}", ""], body))
    return "\n\n".join(parts)


def markdown(record, heading_level=3):
    """The record's choices and tables in Markdown, a heading per setting shown (a grid
    record: its grid's tables, :mod:`tffre.grid_report`)."""
    from tffre import grid_report
    parts = []
    choices = choices_markdown(record)
    if choices:
        parts.append(choices)
    if grid_report.is_grid(record):
        return "\n\n".join(parts + [t for t in [grid_report.markdown(record)] if t])
    for setting in shown_settings(record):
        note = (record.get("settings", {}).get(setting) or {}).get("note")
        parts.append("#" * heading_level + f" {setting}\n\n" + (f"{note}\n\n" if note else "")
                     + setting_markdown(record, setting))
    return "\n\n".join(parts)


def headline_rows(record):
    """One row per result setting (the shown settings less the candidates of a choice, where
    others remain; else the chosen candidate): the best algorithm by dev with its test score,
    the baseline's, the centralised reference's and the best guess (the README's table)."""
    out = []
    shown = shown_settings(record)
    candidates = {c for o in choice_outcomes(record) for c in o["candidates"]}
    results = [s for s in shown if s not in candidates]
    # A chosen candidate is the comparison's result unless other settings build on the
    # choice (fedlcc-cdr's threshold: its result is the structural-entropy setting).
    for setting in results or shown:
        rows = setting_rows(record, setting)
        best = next((r for r in rows if r["best_by_dev"]), None)
        base = next((r for r in rows if r["algorithm"] == (best or {}).get("baseline")), None)
        central = next((r for r in rows if r.get("centralised")), None)
        found = guesses(runs_of(record, setting))
        guess = max((v for k, v in found.items() if k in ("majority", "all_positive",
                                                            "majority_accuracy")), default=None)
        out.append({"comparison": record.get("title") or record["comparison"],
                    "setting": setting, "best": best, "baseline": base, "central": central,
                    "guess": guess, "lookup": found.get("lookup_accuracy")})
    return out


def headline_markdown(records):
    """The README's table: one line per comparison and shown setting (see
    :func:`headline_rows`); "no difference shown" where the best row's interval against its
    baseline holds 0."""
    body = []
    for record in records:
        for h in headline_rows(record):
            best, base = h["best"], h["baseline"]
            if best is None:
                continue
            versus = "baseline" if base is best or base is None else \
                f"{base['algorithm']} {cell(base['test'].values())}; " \
                f"{describe(best['difference'])}"
            body.append([h["comparison"] if h["setting"] == h["comparison"]
                         else f"{h['comparison']}: {h['setting']}",
                         f"{best['algorithm']} {cell(best['test'].values())}", versus,
                         "-" if h["central"] is None else cell(h["central"]["test"].values()),
                         "-" if h["guess"] is None else f"{h['guess']:.3f}",
                         len(best["seeds"])])
    if not body:     # no result yet (a choice still waiting for its candidates' seeds)
        return ""
    return markdown_table(["comparison", "best by dev (test at best dev)",
                            "against the baseline (paired)", "centralised (same budget)",
                            "guess", "seeds"], body)


def csv_rows(record):
    """One row per setting, algorithm and seed: the selected round, dev and test scores."""
    out = []
    for run in record["runs"]:
        for name, a in run["algorithms"].items():
            chosen = a.get("selected") or {}
            out.append({"comparison": record["comparison"], "setting": run["setting"],
                        "algorithm": name, "seed": run["seed"], "round": chosen.get("round"),
                        f"dev_{record.get('metric')}": chosen.get("dev"),
                        f"test_{record.get('metric')}": chosen.get("test"),
                        "bytes_uploaded_per_round": a.get("bytes_uploaded_per_round"),
                        "wall_seconds": run.get("wall_seconds")})
    return out


def plot_curves(record, path):
    """Test score per round of each shown setting's algorithms: the mean over seeds and a
    band of ± one sd (one panel per setting); writes ``path`` (PNG). A grid record gets its
    grid's plot instead (:func:`tffre.grid_report.plot`)."""
    from tffre import grid_report
    if grid_report.is_grid(record):
        return grid_report.plot(record, path)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    import numpy as np
    settings = shown_settings(record)
    metric = record.get("metric") or "f1"
    fig, axes = plt.subplots(1, max(1, len(settings)), figsize=(5 * max(1, len(settings)), 3.6),
                             squeeze=False)
    for ax, setting in zip(axes[0], settings):
        runs = runs_of(record, setting)
        central = centralised_outcome(runs)
        names = [n for n in algorithms_of(runs) if not n.startswith(CENTRALISED)]
        if central is not None:
            names.append(central["name"])
        for name in names:
            curves = {}
            for run in runs.values():
                a = run["algorithms"].get(name)
                if a is None or f"test_{metric}" not in a["rounds"]:
                    continue
                for rnd, v in zip(a["rounds"]["round"], a["rounds"][f"test_{metric}"]):
                    if v is not None:
                        curves.setdefault(rnd, []).append(v)
            if not curves:
                continue
            x = sorted(curves)
            mean = np.array([np.mean(curves[r]) for r in x])
            sd = np.array([np.std(curves[r], ddof=1) if len(curves[r]) > 1 else 0.0 for r in x])
            label = "centralised (same budget)" if name.startswith(CENTRALISED) else name
            line, = ax.plot(x, mean, label=label, marker="." if len(x) < 40 else None)
            ax.fill_between(x, mean - sd, mean + sd, alpha=0.2, color=line.get_color())
        for key, value in guesses(runs).items():
            if key in ("majority", "majority_accuracy"):
                ax.axhline(value, color="grey", linestyle="--", linewidth=1, label="majority")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_title(setting, fontsize=10)
        ax.set_xlabel("round (centralised: epoch)")
        ax.set_ylabel(f"test {METRIC_NAMES.get(metric, metric)}")
        ax.legend(fontsize=7)
    fig.suptitle(record.get("title") or record["comparison"], fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None, *, prog="python -m tffre report"):
    """Renders the records or run folders of ``argv``; returns the exit code."""
    from tffre.errors import OneLineParser   # bad arguments: one line, as every command
    from tffre.records import RecordError, load
    parser = OneLineParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="a record (.json), a run's folder, or a folder of run folders")
    parser.add_argument("--out", default=None,
                        help="write report.md, report.csv and the curves here")
    parser.add_argument("--save-record", default=None, metavar="FILE",
                        help="also save what PATH holds as one record (a run folder, or a "
                        "folder of run folders: a record to commit)")
    parser.add_argument("--name", default=None,
                        help="with --save-record: the record's comparison name (default: "
                        "the folder's name)")
    args = parser.parse_args(argv)
    try:
        records = [load(p) for p in args.paths]
    except RecordError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 1
    if args.save_record:
        from tffre.records import new_record, write_record
        if len(records) != 1:
            parser.error("--save-record takes one PATH")
        name = args.name or records[0]["comparison"]
        saved = new_record(name, title=records[0].get("title") if not args.name else name,
                           baseline=records[0].get("baseline"),
                           choices=records[0].get("choices", ()),
                           settings=records[0].get("settings"), runs=records[0]["runs"],
                           grid=records[0].get("grid"))
        write_record(args.save_record, saved)
        records = [saved]
        print(f"saved {args.save_record}", file=sys.stderr)
    text = "\n\n".join(f"## {r.get('title') or r['comparison']}\n\n" + markdown(r)
                       for r in records)
    print(text)
    if args.out:
        import pandas as pd
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "report.md"), "w", encoding="utf-8") as f:
            f.write(text + "\n")
        pd.DataFrame([row for r in records for row in csv_rows(r)]).to_csv(
            os.path.join(args.out, "report.csv"), index=False)
        for r in records:
            plot_curves(r, os.path.join(args.out, f"{r['comparison']}_curves.png"))
        print(f"wrote {args.out}/: report.md, report.csv, "
              + ", ".join(f"{r['comparison']}_curves.png" for r in records))
    return 0
