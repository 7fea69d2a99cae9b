"""What a record's runs scored, read the way every table of :mod:`tffre.report` and
:mod:`tffre.grid_report` reads it: the runs of a setting, each algorithm's score at its
best-dev round, the choices dev made, the guesses, and how a cell is written.
"""

import math

from tffre.differences import paired_difference
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


def span(values):
    """"3" or "2-5": the range of ``values`` (the best-dev rounds over the seeds)."""
    kept = sorted(v for v in values if v is not None)
    if not kept:
        return "-"
    return str(kept[0]) if kept[0] == kept[-1] else f"{kept[0]}-{kept[-1]}"


def merged_runs(runs):
    """``runs`` with the parts of each setting's seed made one run, in the order first seen:
    its algorithms those of every part (the first part's first: it carries the centralised
    reference), its wall time their sum, its peak memory their largest, its flags,
    provenance and guesses the first part's, and ``"parts"`` naming them. Whole runs pass
    unchanged."""
    out, at = [], {}
    for run in runs:
        if run.get("part") is None:
            out.append(run)
            continue
        key = (run["setting"], run["seed"])
        if key not in at:
            at[key] = len(out)
            out.append(dict(run, algorithms=dict(run["algorithms"]), parts=[run["part"]]))
            continue
        whole = out[at[key]]
        whole["algorithms"].update(run["algorithms"])
        whole["parts"].append(run["part"])
        times = [t for t in (whole.get("wall_seconds"), run.get("wall_seconds")) if t is not None]
        whole["wall_seconds"] = round(sum(times), 1) if times else None
        whole["peak_rss_mib"] = _largest(whole.get("peak_rss_mib"), run.get("peak_rss_mib"))
    return out


def _largest(a, b):
    """The larger of two peak-memory figures (numbers, or {what: MiB} alike)."""
    if a is None or b is None:
        return a if b is None else b
    if isinstance(a, dict):     # peak_rss_mib's {"python", "tff_worker", "total"}
        return {k: _largest(a.get(k), b.get(k)) for k in dict.fromkeys([*a, *b])}
    return max(a, b)


def runs_of(record, setting):
    """{seed: run} of ``setting``, a seed's parts made one run (:func:`merged_runs`)."""
    return {r["seed"]: r for r in merged_runs(record["runs"]) if r["setting"] == setting}


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
    else the first of ``names`` (the run's first algorithm: FLCMC's FedAvgS). None where the
    record names a baseline that ``names`` lack (a setting run apart whose baseline has not
    run yet): no other row stands in for it."""
    if record.get("baseline") and record["baseline"] not in names:
        return None
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
