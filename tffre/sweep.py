"""A label-skew sweep: the same run at several Dirichlet alphas, and one table over them.

The relation examples (``examples/re_sentence.py``, ``examples/re_label_skew.py``) are
presets of ``python -m tffre run`` swept over alpha, the layout of FedCMC Table 2: rows
are algorithms, columns F1 per alpha, beside the paper's figures.
"""

import argparse
import os
import sys

import numpy as np
import pandas as pd

from tffre import cli, metrics
from tffre.jsonio import read_json_object, write_json


def run_preset(preset, out, *, prog, rerun=False):
    """Runs ``python -m tffre run`` with ``preset`` into ``out`` and returns its summary.

    A run that finished before (its ``summary.json`` exists) is read back unless ``rerun`` or
    the settings its summary records differ from the preset's (:func:`_same_settings`);
    a run cut short (its ``metrics.csv`` but no summary) is resumed from its last checkpoint
    when its options are the same, else overwritten, as is any other content of ``out``.
    SystemExit when the run fails.
    """
    summary_path = os.path.join(out, "summary.json")
    if not rerun and os.path.exists(summary_path):
        summary = read_json_object(summary_path)
        if _same_settings(preset, out, summary):
            return summary
    code = None
    if not rerun and os.path.exists(os.path.join(out, "metrics.csv")):
        code = cli.run_main(["--resume"], preset=dict(preset, out=out), prog=prog)
        if code:
            print(f"note: {out} could not be resumed; running it again")
    if code is None or code:
        argv = ["--overwrite"] if os.path.isdir(out) and os.listdir(out) else []
        code = cli.run_main(argv, preset=dict(preset, out=out), prog=prog)
    if code:
        raise SystemExit(f"{out}: the run failed (exit code {code})")
    return read_json_object(summary_path)


def _same_settings(preset, out, summary):
    """True when the run in ``out`` that wrote ``summary`` was made with ``preset``'s settings
    (or predates config.json); else says so: a changed preset (more rounds) must not read back
    another run's figures. How the run was carried out (:data:`tffre.config.OPERATIONAL`) may
    differ.

    The settings are those ``summary`` records (its ``config``), not config.json's: a resume
    with more rounds or ``--centralised`` writes config.json when it starts, so if it is cut
    short, config.json holds the new settings beside the old run's summary. A summary that
    records none (older runs) is compared through config.json."""
    saved = summary.get("config")
    if saved is None:
        path = os.path.join(out, "config.json")
        if not os.path.exists(path):
            return True
        saved = read_json_object(path)
    from tffre import config
    try:
        changed = config.differences(saved, config.resolve(
            {"out": out, "resume": True}, preset=preset))
    except ValueError as err:   # ConfigError: the preset no longer resolves as it did
        changed = [str(err)]
    if changed:
        print(f"note: {out} was run with other settings ({', '.join(changed)}); resuming it "
              f"where those allow (more rounds, the bound), else running it again")
    return not changed


#: The figures a seeds table gives per algorithm (summary.json keys), each as mean and sd.
SEED_FIGURES = (("F1 at best dev", "test_f1_at_best_dev"), ("max F1", "max_test_f1"),
                ("final F1", "final_test_f1"))


def parse_seeds(value):
    """``--seeds``: the list of comma-separated, distinct, non-negative seeds ("0,1,2")."""
    try:
        seeds = [int(s) for s in str(value).split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--seeds: expected comma-separated integers, got {value!r}") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ValueError(f"--seeds: expected distinct non-negative integers, got {value!r}")
    return seeds


def run_seeds(preset, out, seeds, *, prog):
    """Runs ``preset`` once per seed into ``out/seed_<s>/`` (each seed re-draws the split,
    the initial weights and the client order); a seed that finished before is read back, not
    repeated (:func:`run_preset`). Returns {seed: summary}."""
    summaries = {}
    for seed in seeds:
        folder = os.path.join(out, f"seed_{seed}")
        print(f"\n--- seed {seed} ---")
        summaries[seed] = run_preset(dict(preset, seed=seed), folder, prog=prog)
    return summaries


def seeds_rows(summaries):
    """One row per algorithm over the seeds' summaries: for each of :data:`SEED_FIGURES` its
    mean and sample sd (0 for one seed), the seeds, and the guesses (the same split sizes
    give them per seed; their mean is shown)."""
    first = next(iter(summaries.values()))
    rows = []
    for name in first["algorithms"]:
        row = {"algorithm": name, "seeds": len(summaries)}
        for label, key in SEED_FIGURES:
            mean, sd = metrics.mean_and_sd(s["algorithms"].get(name, {}).get(key)
                                           for s in summaries.values())
            if mean is not None:
                row[label], row[f"{label} sd"] = mean, sd
        rows.append(row)
    guesses = {}
    for label, key in (("majority guess F1", "majority_class_test_f1"),
                       ("all-positive F1", "all_positive_test_f1")):
        values = [s.get(key) for s in summaries.values() if s.get(key) is not None]
        if values:
            guesses[label] = float(np.mean(values))
    return [dict(row, **guesses) for row in rows]


def mean_sd(row, label):
    """"0.753 ± 0.004" of a :func:`seeds_rows` row's figure (or "-"); a row of one seed shows
    its value alone, "0.753 (1 seed)": one run has no spread to show."""
    if row.get(label) is None or (isinstance(row.get(label), float) and np.isnan(row[label])):
        return "-"
    if row.get("seeds") == 1:
        return f"{row[label]:.3f} (1 seed)"
    return f"{row[label]:.3f} ± {row.get(f'{label} sd', 0.0):.3f}"


def alpha_folder(out, alpha, seed=None):
    """The run folder of ``alpha`` (and of ``seed`` when a sweep runs several)."""
    folder = os.path.join(out, f"alpha_{alpha}")
    return folder if seed is None else os.path.join(folder, f"seed_{seed}")


def combined_table(out, alphas, seeds=None):
    """Rows: algorithms; columns: max test F1 per alpha (and the paper's, where it has them).

    With ``seeds``, each F1 is the mean over those seeds' runs, beside its sample sd (the
    columns "... sd")."""
    from tffre import paper_tables
    rows = {}
    for alpha in alphas:
        summaries = {s: read_json_object(os.path.join(alpha_folder(out, alpha, s),
                                                      "summary.json"))
                     for s in (seeds or [None])}
        first = next(iter(summaries.values()))
        _, reference = paper_tables.reference(first["config"]["dataset"], "encoder",
                                              alpha=alpha)
        by_name = {row["algorithm"]: row for row in seeds_rows(summaries)}
        for name in first["algorithms"]:
            column = "any alpha" if name == "Centralised" else f"alpha={alpha}"
            row = rows.setdefault(name, {})
            for label, figure in (("F1", "max F1"), ("F1@best dev", "F1 at best dev")):
                row[f"{label} {column}"] = by_name[name].get(figure)
                if seeds:
                    row[f"{label} sd {column}"] = by_name[name].get(f"{figure} sd")
            if name in reference:
                row[f"paper {column}"] = reference[name]["test_f1"]
    # Columns with no value at all (F1@best dev on data without a dev split) are left out.
    return pd.DataFrame.from_dict(rows, orient="index").dropna(axis=1, how="all")


def run_sweep(argv, *, preset, prog, doc, default_out, default_alphas="0.5,0.05",
              extra_runs=()):
    """Runs ``preset`` (overridden by ``argv``) once per ``--alphas`` value (and per seed of
    ``--seeds``, each into alpha_<a>/seed_<s>/, the table giving means and sds), then the
    table.

    Each alpha's run writes to ``--out``/alpha_<a>/ (the centralised upper bound, if the
    preset asks for it, only in the first: it does not depend on alpha); the table goes to
    ``--out``/table.csv and ``--out``/summary.json. ``extra_runs`` are (folder, title,
    overrides) runs after the sweep (e.g. an ablation), each into ``--out``/folder with
    the same flags but for the overrides, which win over them (an ablation's algorithms
    stay its own when ``--algorithm`` narrows the sweep). The runs reuse each algorithm's
    process when its settings are the same (:func:`tffre.runner.reuse_processes`). Returns
    the exit code.
    """
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--alphas", default=default_alphas)
    parser.add_argument("--seeds", default=None)
    # The run's --seed, declared here so that argparse does not read it as --seeds.
    parser.add_argument("--seed", default=None)
    parser.add_argument("--out", default=default_out)
    ours, rest = parser.parse_known_args(argv)
    if ours.seed is not None:
        rest = ["--seed", ours.seed] + rest
    if "-h" in rest or "--help" in rest:
        print(doc)
        return cli.run_main(["--help"], preset=preset, prog=prog)
    try:
        alphas = [float(a) for a in ours.alphas.split(",")]
    except ValueError:
        print(f"{prog}: error: --alphas: expected numbers, got {ours.alphas!r}", file=sys.stderr)
        return 2
    try:
        seeds = None if ours.seeds is None else parse_seeds(ours.seeds)
    except ValueError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    if seeds is not None and ours.seed is not None:
        print(f"{prog}: error: give --seed or --seeds, not both", file=sys.stderr)
        return 2
    from tffre import runner
    runner.reuse_processes()   # each algorithm's round is traced once for every alpha
    for i, alpha in enumerate(alphas):
        for seed in seeds or [None]:
            run_preset = dict(preset, alpha=alpha, out=alpha_folder(ours.out, alpha, seed),
                              centralised=preset.get("centralised", False) and i == 0)
            if seed is not None:   # each seed re-draws the split, the head and the order
                run_preset["seed"] = seed
            print(f"\n=== alpha = {alpha}" + ("" if seed is None else f", seed {seed}") + " ===")
            code = cli.run_main(rest, preset=run_preset, prog=prog)
            if code:
                return code
    table = combined_table(ours.out, alphas, seeds)
    table.to_csv(os.path.join(ours.out, "table.csv"), index_label="algorithm")
    write_json(os.path.join(ours.out, "summary.json"),
               {"alphas": alphas, "table": table.where(table.notna(), None).to_dict("index")})
    print("\nmax test F1 over rounds (as the paper reports; F1@best dev selects the round on "
          "the dev split where there is one)" + ("" if seeds is None else
                                                 f"; mean and sd over seeds {seeds}"))
    print(table.to_string(float_format=lambda v: f"{v:.4f}", na_rep="-"))
    print(f"wrote {ours.out}/table.csv, summary.json and alpha_*/")
    for folder, title, overrides in extra_runs:
        print(f"\n=== {title} ===")
        code = cli.run_main(rest, preset=dict(preset, out=os.path.join(ours.out, folder)),
                            prog=prog, fixed=overrides)
        if code:
            return code
    return 0
