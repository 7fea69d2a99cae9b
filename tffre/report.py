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

import math
import os
import sys

from tffre.differences import describe, paired_difference
from tffre.selection import best_by_dev

CENTRALISED = "Centralised"
#: How the tables name the metric of a record.
METRIC_NAMES = {"f1": "F1", "accuracy": "accuracy"}


def _mean_sd(values):
    from tffre.metrics import mean_and_sd   # here: tffre.metrics imports scikit-learn
    return mean_and_sd(values)


def cell(values, digits=3):
    """"0.753 ± 0.004" over the seeds' ``values`` (one value: "0.753 (1 seed)"; none: "-")."""
    kept = [v for v in values if v is not None and math.isfinite(v)]
    if not kept:
        return "-"
    mean, sd = _mean_sd(kept)
    if len(kept) == 1:
        return f"{mean:.{digits}f} (1 seed)"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def _span(values):
    kept = sorted(v for v in values if v is not None)
    if not kept:
        return "-"
    return str(kept[0]) if kept[0] == kept[-1] else f"{kept[0]}-{kept[-1]}"


def runs_of(record, setting):
    """{seed: run} of ``setting``."""
    return {r["seed"]: r for r in record["runs"] if r["setting"] == setting}


def selected(runs, name, part="test"):
    """{seed: the ``part`` score at the best-dev round} of algorithm ``name``."""
    out = {}
    for seed, run in runs.items():
        chosen = (run["algorithms"].get(name) or {}).get("selected")
        if chosen is not None:
            out[seed] = chosen[part]
    return out


def algorithms_of(runs):
    """The algorithm names of ``runs`` in first-seen order."""
    return list(dict.fromkeys(n for r in runs.values() for n in r["algorithms"]))


def baseline_of(record, names):
    """The algorithm differences are taken against: the record's, else FedAvgT, else FedAvg,
    else the first of ``names`` (the run's first algorithm: FLCMC's FedAvgS)."""
    for name in (record.get("baseline"), "FedAvgT", "FedAvg"):
        if name and name in names:
            return name
    return names[0] if names else None


def choice_outcomes(record):
    """[{"what", "candidates", "algorithm", "means", "seeds", "complete", "chosen"}] for each
    of the record's declared choices: the candidate settings' mean dev score of ``algorithm``
    (the choice's, else the baseline) over their seeds, and the one of highest mean. The
    choice is made only when every candidate has runs on the same seeds, and on every seed
    its setting declares (``record["settings"][c]["seeds"]``, where given) (``complete``);
    until then ``chosen`` is None and no candidate's test score is shown."""
    out = []
    for choice in record.get("choices", []):
        candidates = list(choice["candidates"])
        names = algorithms_of({i: r for i, r in enumerate(record["runs"])})
        algorithm = choice.get("algorithm") or baseline_of(record, names)
        seeds = {c: sorted(runs_of(record, c)) for c in candidates}
        scores = {c: list(selected(runs_of(record, c), algorithm, "dev").values())
                  for c in candidates}
        best, means = best_by_dev(scores)
        # Every candidate on the same seeds, and on all the seeds its setting declares.
        declared = {c: set((record.get("settings", {}).get(c) or {}).get("seeds") or ())
                    for c in candidates}
        complete = all(seeds[c] and seeds[c] == seeds[candidates[0]]
                       and declared[c] <= set(seeds[c]) for c in candidates)
        out.append({**choice, "candidates": candidates, "algorithm": algorithm,
                    "means": means, "seeds": seeds, "complete": complete,
                    "chosen": best if complete else None})
    return out


def shown_settings(record):
    """The settings whose tables are shown: every setting with runs, less the candidates a
    choice did not choose and the settings that join another's table (:func:`joined`)."""
    dropped = {c for o in choice_outcomes(record) for c in o["candidates"] if c != o["chosen"]}
    order = list(record.get("settings") or {}) + [r["setting"] for r in record["runs"]]
    return [s for s in dict.fromkeys(order) if s not in dropped and runs_of(record, s)
            and not _joins(record, s)]


def _joins(record, setting):
    return (record.get("settings", {}).get(setting) or {}).get("joins")


def joined(record, setting):
    """The settings whose rows join ``setting``'s table: those declaring ``"joins":
    setting`` (a catalog row run on its own, FedAdam at its dev-chosen server rate, beside the
    setting's baseline on the same partition and seeds), once their choice has chosen them."""
    chosen = {o["chosen"] for o in choice_outcomes(record)}
    candidates = {c for o in choice_outcomes(record) for c in o["candidates"]}
    return [s for s in dict.fromkeys(r["setting"] for r in record["runs"])
            if _joins(record, s) == setting and (s in chosen or s not in candidates)]


def centralised_outcome(runs):
    """The centralised reference of a setting's runs, or None: the entry of highest mean dev
    score among the run's "Centralised..." algorithms (one per learning rate tried), with its
    per-seed selection."""
    names = [n for n in algorithms_of(runs) if n.startswith(CENTRALISED)]
    if not names:
        return None
    chosen, means = best_by_dev({n: list(selected(runs, n, "dev").values()) for n in names})
    if chosen is None:
        return None
    rates = [r["algorithms"][chosen].get("learning_rate") for r in runs.values()
             if chosen in r["algorithms"]]
    return {"name": chosen, "tried": names, "means": means,
            "learning_rate": next((lr for lr in rates if lr is not None), None),
            "test": selected(runs, chosen), "dev": selected(runs, chosen, "dev"),
            "rounds": selected(runs, chosen, "round")}


def setting_rows(record, setting):
    """The rows of one setting's table, as dicts (see the module docstring)."""
    runs = runs_of(record, setting)
    names = algorithms_of(runs)
    federated = [n for n in names if not n.startswith(CENTRALISED)]
    baseline = baseline_of(record, federated)
    # A joined setting's rows (:func:`joined`), named with its label where theirs is taken.
    sources = [(n, n, runs) for n in federated]
    for other in joined(record, setting):
        extra = runs_of(record, other)
        sources += [(n if n not in federated else f"{n} ({other})", n, extra)
                    for n in algorithms_of(extra) if not n.startswith(CENTRALISED)]
    best, _ = best_by_dev({label: list(selected(r, n, "dev").values())
                           for label, n, r in sources})
    rows = []
    for label, name, source in sources:
        test, dev = selected(source, name), selected(source, name, "dev")
        diff = None if label == baseline or baseline is None else \
            paired_difference(test, selected(runs, baseline))
        up = [r["algorithms"][name].get("bytes_uploaded_per_round") for r in source.values()
              if name in r["algorithms"]]
        rows.append({"algorithm": label, "seeds": sorted(test), "test": test, "dev": dev,
                     "rounds": selected(source, name, "round"), "difference": diff,
                     "baseline": baseline, "best_by_dev": label == best,
                     "bytes_up": up[0] if up else None})
    central = centralised_outcome(runs)
    if central is not None:
        rows.append({"algorithm": "centralised (same budget)", "seeds": sorted(central["test"]),
                     "test": central["test"], "dev": central["dev"],
                     "rounds": central["rounds"], "difference": None, "baseline": None,
                     "best_by_dev": False, "bytes_up": None, "centralised": central})
    return rows


def guesses(runs):
    """{guess key: mean over the seeds} of a setting's runs."""
    keys = dict.fromkeys(k for r in runs.values() for k in r.get("guesses", {}))
    return {k: _mean_sd([r["guesses"][k] for r in runs.values() if k in r["guesses"]])[0]
            for k in keys}


GUESS_NAMES = {"majority": "guess: the majority class", "all_positive":
               "guess: a relation for every pair", "majority_accuracy":
               "guess: the majority class (accuracy)", "lookup_accuracy":
               "lookup: a training sentence's label, else the majority"}


def markdown_table(header, rows):
    """A Markdown table of ``header`` and ``rows`` (each a list of cells, written with str)."""
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


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
                     _span(r["rounds"].values()),
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
