"""The papers' comparisons on real corpora under one protocol, each kept as a committed record.

    python benchmarks/real_corpora.py --root ROOT --only iid-gad        # one comparison
    python benchmarks/real_corpora.py --root ROOT --max-hours 6        # what fits in 6 hours
    python benchmarks/real_corpora.py --root ROOT --only fedlcc-cdr --seeds 0   # one seed
    python benchmarks/real_corpora.py --root ROOT --only fedlcc-cdr --settings \
        "structural entropy" --seeds 0 --parts fedlcc        # one algorithm of a seed

``ROOT`` holds the public copies (docs/real-corpora.md says where to get each):

* ``biobert_RE/GAD/1``: BioBERT's fold 1 of GAD (BioMedBERT/biomedbert at 93fd69d,
  ``datasets/RE/``);
* ``scibert_chemprot``: SciBERT's ChemProt JSON lines (allenai/scibert,
  ``data/text_classification/chemprot/``);
* ``cdr_pubtator``: BioCreative V CDR's official split, written by
  ``python -m tffre data prepare cdr --from COPY --out ROOT/cdr_pubtator``.

**The protocol.** Every run reports the test score at its round of best dev score. A
comparison's choices (GAD's trainable layers; CDR's decision threshold) are made by the
baseline's mean dev score over the seeds, and only the chosen setting's test scores are
shown. The centralised reference trains the pooled data for the federated run's example
passes at each learning rate of :data:`CENTRAL_RATES` and keeps the rate of best mean dev
score ("centralised (same budget)"). Each algorithm is set against its baseline (FedAvgT or
FedAvg) by the paired difference over seeds with a 95% interval. Five seeds where a paper's
effect is at stake (FedCMC, FedED and FedLCC against their baselines), three elsewhere.

**Records.** Each comparison's record, ``--records``/<comparison>.json (default
``benchmarks/results/``, committed), gains a run as soon as it finishes, with its per-round
dev and test scores, every flag, the data files' SHA-256, tffre's commit, the packages, the
machine, its time, memory and bytes (:mod:`tffre.records`). A run the record already holds
with the same flags and data is not run again, so a comparison continues where the last call
(on any machine) stopped. The run folders go to ``--out``/<comparison>/<setting>/seed_<s>/.
``python -m tffre report benchmarks/results/<comparison>.json`` renders a record's tables.

Every comparison trains the top layers of all-MiniLM-L6-v2 on each client's cached
activations of the frozen layers below (``--trainable-layers``, :mod:`tffre.models.partial`).
"""

import argparse
import dataclasses
import os
import sys
import time
from typing import Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDS = os.path.join(HERE, "results")
#: The centralised reference's learning rates (the federated rows use 3e-4).
CENTRAL_RATES = (3e-5, 1e-4, 3e-4)
# Sentence-level RE: 64 word pieces (GAD's p95 is 71), batch 8, Adam 3e-4 (the task's
# defaults), one local epoch a round, 10 clients all every round.
SENTENCE = {"max_len": 64, "batch_size": 8, "learning_rate": 3e-4, "num_epochs": 1,
            "num_iters": 0, "clients": 10, "clients_per_round": 10, "executor": "local",
            "checkpoint_every": 5, "no_progress": True, "no_train_loss": True}
# Document-level RE: 512 word pieces (one window: CDR's median abstract has 340), the top 2
# layers, batch 4, Adam 3e-4, 6 rounds, 10 clients all every round.
DOCUMENT = {"trainable_layers": 2, "max_len": 512, "batch_size": 4, "learning_rate": 3e-4,
            "local_optimizer": "adam", "num_epochs": 1, "num_iters": 0, "clients": 10,
            "clients_per_round": 10, "executor": "local", "checkpoint_every": 5,
            "no_progress": True, "no_train_loss": True, "num_rounds": 6}
#: Options that name where a run reads or writes, compared by content (SHA-256) instead.
PATH_OPTIONS = ("data", "w2v", "server_data", "user_dict", "encoder", "out", "prefix_cache")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting of a comparison: its flags and seeds.

    Attributes:
      label: its name in the record and the tables.
      preset: the ``python -m tffre run`` flags of its runs (``data`` relative to ROOT).
      seeds: the seeds of ``preset``'s algorithms.
      more_seeds: further seeds, run with ``more_algorithms`` only (the pair a paper's
        effect is about, to five seeds).
      more_algorithms: the algorithms of ``more_seeds``.
      inherit: (comparison, choice, keys), or a tuple of them: the flags ``keys`` are taken
        from the candidate that choice chose (GAD's trainable layers and rounds); the setting
        waits until it has.
      centralised: the setting also trains the centralised reference (once chosen, where it
        is a candidate).
      note: one line the tables print under its heading.
      facets: ((facet, value), ...): the setting's place in its comparison's grid.
      joins: the label of the setting whose table its rows join (a catalog row run on its own
        on the same partition and seeds, paired with that setting's baseline), once its
        choice has chosen it (:func:`tffre.record_scores.joined`).
      parts: each algorithm of a seed runs apart, in its own folder
        (``seed_<s>/<algorithm>``) and record entry, the centralised reference with the
        first: a seed of hours is recorded an algorithm at a time, so a session cut short
        keeps what it finished. The figures are those of one run (each algorithm starts
        from the seed alone: tests/tffre/test_runner.py).
    """
    label: str
    preset: dict
    seeds: Tuple[int, ...] = (0, 1, 2)
    more_seeds: Tuple[int, ...] = ()
    more_algorithms: Optional[str] = None
    inherit: Optional[tuple] = None
    centralised: bool = False
    note: str = ""
    facets: Tuple[tuple, ...] = ()
    joins: Optional[str] = None
    parts: bool = False


@dataclasses.dataclass(frozen=True)
class Comparison:
    """A comparison: its settings in run order, its baseline, its choices ({"what",
    "candidates", "algorithm"}, made by :func:`tffre.record_scores.choice_outcomes`) and, for a
    grid of settings, the two facets its tables lay them out by (:mod:`tffre.grid_report`)."""
    name: str
    title: str
    baseline: str
    settings: Tuple[Setting, ...]
    choices: Tuple[dict, ...] = ()
    grid: Optional[Tuple[str, str]] = None


def comparisons():
    """{name: :class:`Comparison`}, in the order ``--only`` runs them by default."""
    gad = {"dataset": "gad", "data": "biobert_RE/GAD/1"}
    iid = dict(gad, algorithm="fedavgt", partition="iid", **SENTENCE)
    layers = ("iid-gad", "trainable layers", ("trainable_layers", "num_rounds"))
    skew = "fedavgt,moon,fedrs,fedlc,fedcmc"
    threshold = ("fedlcc-cdr", "decision threshold", ("threshold",))
    cdr = {"dataset": "cdr", "data": "cdr_pubtator", "partition": "structural-entropy",
           **DOCUMENT}
    out = [
        # The top 2 for 30 rounds and the top 4 for 15 cost about the same a seed; dev picks.
        Comparison("iid-gad", "GAD fold 1, IID, 10 clients: FedAvgT", "FedAvgT", (
            Setting("top 2 30 rounds", dict(iid, trainable_layers=2, num_rounds=30),
                    centralised=True),
            Setting("top 4 15 rounds", dict(iid, trainable_layers=4, num_rounds=15),
                    centralised=True)),
            ({"what": "trainable layers", "candidates": ("top 2 30 rounds",
                                                         "top 4 15 rounds")},)),
        # FedCMC Table 2's comparison at iid-gad's chosen top and rounds (so iid-gad's
        # centralised reference is at the same union, top and budget), and the catalog rows.
        with_catalog(Comparison(
            "fedcmc-gad", "GAD fold 1, label skew, 10 clients: FedCMC and its baselines",
            "FedAvgT", tuple(
                Setting(f"alpha {a}", dict(gad, algorithm=skew, alpha=a, **SENTENCE),
                        more_seeds=(3, 4), more_algorithms="fedavgt,fedcmc", inherit=layers,
                        note=f"label-Dirichlet alpha {a}; the centralised reference is "
                             "iid-gad's (the same union, top and budget)")
                for a in (0.5, 0.05)))),
        # ChemProt: 96 word pieces (its p95 is 110-125), the top 2, 6 rounds, three rows.
        with_catalog(Comparison(
            "fedcmc-chemprot", "ChemProt, label skew, 10 clients: FedCMC", "FedAvgT",
            tuple(Setting(f"alpha {a}", {"dataset": "chemprot", "data": "scibert_chemprot",
                                         "alpha": a, "algorithm": "fedavgt,fedlc,fedcmc",
                                         **dict(SENTENCE, max_len=96), "trainable_layers": 2,
                                         "num_rounds": 6},
                          more_seeds=(3, 4), more_algorithms="fedavgt,fedcmc",
                          centralised=a == 0.5)
                  for a in (0.5, 0.05)))),
        Comparison("fedcb-gad", "GAD fold 1, alpha 0.5, 10 clients: FedCB's frozen classifier",
                   "FedAvg", (Setting("alpha 0.5", dict(gad, algorithm="fedavg,fedcb",
                                                        alpha=0.5, local_optimizer="adam",
                                                        **SENTENCE), inherit=layers,
                                      note="both with Adam; the centralised reference is "
                                           "iid-gad's"),)),
        # FedED's setting: 100 IID clients, 10% a round, 20% of train as the server's D_v.
        Comparison("feded-gad", "GAD fold 1, 100 clients, 10 a round: FedED's predictions-only "
                   "upload", "FedAvgT", (Setting("100 clients", dict(
                       gad, algorithm="fedavgt,feded", partition="iid", server_fraction=0.2,
                       representation="cls_entities",
                       **dict(SENTENCE, clients=100, clients_per_round=10), num_rounds=30),
                       seeds=(0, 1, 2, 3, 4), inherit=("iid-gad", "trainable layers",
                                                       ("trainable_layers",)),
                       centralised=True),)),
        # CDR: the decision threshold (0.5, the authors', or tuned on dev at each evaluation)
        # is chosen by FedAvg's mean dev F1; then FedLCC and its baselines at that threshold.
        Comparison("fedlcc-cdr", "CDR, structural-entropy split, 10 clients: FedLCC", "FedAvg", (
            Setting("threshold 0.5", dict(cdr, algorithm="fedavg", threshold=0.5)),
            Setting("threshold dev", dict(cdr, algorithm="fedavg", threshold="dev")),
            Setting("structural entropy", dict(cdr, algorithm="fedavg,fedatt,fedlcc"),
                    more_seeds=(3, 4), more_algorithms="fedavg,fedlcc", inherit=threshold,
                    centralised=True, parts=True)),
            ({"what": "decision threshold", "candidates": ("threshold 0.5", "threshold dev"),
              "algorithm": "FedAvg"},)),
    ]
    out += [defence_grid("robust-imcs", "IMCS-V2 sample, the main job's setting: what each "
                         "defence costs and saves", imcs_main_job(), (0.1, 0.3, 1.0),
                         note="the main job's setting (examples/imcs_lstm.py) with client SGD "
                              "on the local executor"),
            defence_grid("robust-gad", "GAD fold 1, alpha 0.5, 10 clients: what each defence "
                         "costs and saves", dict(gad, alpha=0.5, **SENTENCE), (0.03, 0.1, 0.3),
                         inherit=layers, note="iid-gad's chosen top and rounds")]
    return {c.name: c for c in out}


#: The catalog rows that join the FedCMC comparisons: {row: (flags, the rate chosen on dev,
#: its candidates)}. FedAdam and FedYogi train their clients as FedAvgT does (tf.keras Adam at
#: the setting's rate), so they differ from the baseline in the server step alone; their server
#: rate is chosen. SCAFFOLD's correction (x - y_i)/(K eta_l) is the mean gradient of K plain SGD
#: steps, so its clients take SGD, whose rate is chosen instead (at the baselines' Adam rate SGD
#: barely moves), with the paper's server rate eta_g = 1.
CATALOG = {"FedAdam": ({"algorithm": "fedadam", "local_optimizer": "adam"},
                       "server_learning_rate", (1e-3, 3e-3, 1e-2)),
           "FedYogi": ({"algorithm": "fedyogi", "local_optimizer": "adam"},
                       "server_learning_rate", (1e-3, 3e-3, 1e-2)),
           "SCAFFOLD": ({"algorithm": "scaffold"}, "learning_rate", (0.03, 0.1, 0.3))}


def with_catalog(comparison):
    """``comparison`` with the rows of :data:`CATALOG` beside each of its settings: for each
    row, one setting per rate (the row alone, the setting's flags otherwise), a choice of the
    rate by the row's mean dev score, and the chosen one's rows joining the setting's table
    (paired with its baseline on the same partition and seeds)."""
    settings, choices = list(comparison.settings), list(comparison.choices)
    for parent in comparison.settings:
        for row, (flags, rate, values) in CATALOG.items():
            name = rate.replace("_", " ")
            candidates = tuple(Setting(
                f"{parent.label}, {row} {name} {v:g}", dict(parent.preset, **flags, **{rate: v}),
                inherit=parent.inherit, joins=parent.label) for v in values)
            settings += candidates
            choices.append({"what": f"{row}'s {name}, {parent.label}",
                            "candidates": tuple(c.label for c in candidates),
                            "algorithm": row})
    return dataclasses.replace(comparison, settings=tuple(settings), choices=tuple(choices))


#: The defences of a defence grid: {row: flags}. Ten clients a round in both grids: Krum
#: needs n > 2f + 2 (f <= 3) and Bulyan n >= 4f + 3 (f <= 1); the trimmed mean cuts 3 of 10
#: at each end, as many as the worst case of 3 faulty clients; the norm bound M = 1.
DEFENCES = {"none": {}, "median": {"robust": "median"},
            "trimmed mean": {"robust": "trimmed-mean", "robust_beta": 0.3},
            "krum": {"robust": "krum", "robust_f": 3},
            "multi-krum": {"robust": "multi-krum", "robust_f": 3},
            "bulyan": {"robust": "bulyan", "robust_f": 1},
            "norm bound": {"robust": "norm-bound", "robust_norm_bound": 1.0}}
#: The faults of a defence grid: (kind, faulty clients), clean data first.
FAULTS = ((None, 0),) + tuple((kind, n) for kind in ("flip-labels", "scale:-5", "noise:1")
                              for n in (1, 3))


def imcs_main_job():
    """The main job's preset (``examples/imcs_lstm.py``), less its ``out`` and the options of
    its own algorithms (FedProx's mu, FedAtt's stepsize) that FedAvg and FedAdam do not take."""
    import importlib.util
    path = os.path.join(HERE, "..", "examples", "imcs_lstm.py")
    spec = importlib.util.spec_from_file_location("tffre_benchmark_imcs_lstm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {k: v for k, v in module.PRESET.items() if k not in ("out", "mu", "stepsize")}


def defence_grid(name, title, base, rates, inherit=None, note=""):
    """FedAvg and FedAdam under every defence of :data:`DEFENCES` by every fault condition
    of :data:`FAULTS`, three seeds, on the local executor (where the upload faults run).
    The client learning rate (client SGD) is chosen first by FedAvg's mean dev score on
    clean data without a defence among ``rates``; the chosen candidate is the grid's clean,
    undefended cell and every other cell takes its rate."""
    base = dict(base, algorithm="fedavg,fedadam", executor="local")
    choice = (name, "client learning rate", ("learning_rate",))
    parents = (inherit,) if inherit else ()

    def facets(defence, kind, n):
        faults = "clean" if kind is None else f"{n} {kind}"
        return (("defence", defence), ("faults", faults), ("fault", kind), ("faulty", n))

    candidates = tuple(Setting(f"none, clean, lr {lr:g}", dict(base, learning_rate=lr),
                               inherit=parents or None, note=note,
                               facets=facets("none", None, 0)) for lr in rates)
    cells = tuple(
        Setting(f"{defence}, {facets(defence, kind, n)[1][1]}",
                dict(base, **flags, **({"faulty_clients": n, "fault": kind} if kind else {})),
                inherit=parents + (choice,), note=note, facets=facets(defence, kind, n))
        for defence, flags in DEFENCES.items() for kind, n in FAULTS
        if (defence, kind) != ("none", None))
    return Comparison(name, title, "FedAvg", candidates + cells,
                      ({"what": "client learning rate",
                        "candidates": tuple(c.label for c in candidates),
                        "algorithm": "FedAvg"},), grid=("defence", "faults"))


def setting_folder(out, comparison, label):
    """``out/<comparison>/<setting>``, the setting's spaces as underscores."""
    return os.path.join(out, comparison, label.replace(" ", "_"))


def record_path(records, name):
    """The record file of comparison ``name``."""
    return os.path.join(records, f"{name}.json")


def read_or_new(records, comparison):
    """The comparison's record, or a new one holding its declarations."""
    from tffre.records import new_record, read_record
    path = record_path(records, comparison.name)
    settings = {s.label: dict({"note": s.note} if s.note else {}, seeds=list(s.seeds),
                              **({"facets": dict(s.facets)} if s.facets else {}),
                              **({"joins": s.joins} if s.joins else {}),
                              **({"parts": parts_of(s, s.seeds[0])} if s.parts else {}))
                for s in comparison.settings}
    declared = dict(title=comparison.title, baseline=comparison.baseline,
                    choices=[dict(c, candidates=list(c["candidates"]))
                             for c in comparison.choices], settings=settings)
    if comparison.grid:
        declared["grid"] = dict(zip(("rows", "columns"), comparison.grid))
    if os.path.exists(path):
        return dict(read_record(path), **declared)
    return new_record(comparison.name, **declared)


def chosen(records, name, what):
    """The candidate that choice ``what`` of comparison ``name`` chose, or None while its
    candidates' seeds are not all in its record."""
    from tffre import report
    from tffre.records import has_run, read_record
    path = record_path(records, name)
    declared = comparisons()[name]
    if not os.path.exists(path):
        return None
    record = read_record(path)
    for choice in declared.choices:
        if choice["what"] != what:
            continue
        settings = {x.label: x for x in declared.settings}
        complete = all(has_run(record, c, s, part) for c in choice["candidates"]
                       for s in settings[c].seeds for part in parts_of(settings[c], s))
        if not complete:
            return None
        record = dict(record, choices=[dict(choice, candidates=list(choice["candidates"]))])
        return report.choice_outcomes(record)[0]["chosen"]
    raise KeyError(f"{name} declares no choice {what!r}")


def parts_of(setting, seed):
    """The parts of ``setting``'s run of ``seed``: its algorithms where it runs them apart
    (:attr:`Setting.parts`), else [None] (one whole run)."""
    if not setting.parts:
        return [None]
    algorithms = setting.more_algorithms if seed in setting.more_seeds and \
        seed not in setting.seeds else setting.preset["algorithm"]
    return algorithms.split(",")


def presets(comparison, setting, root, records, cache):
    """[(seed, part, preset)] of ``setting``'s runs (``part`` None for a whole run, else the
    algorithm it runs: :func:`parts_of`), or a string saying why it waits (a choice not made
    yet)."""
    preset = dict(setting.preset)
    if "data" in preset:      # else the task's embedded sample
        preset["data"] = os.path.join(root, preset["data"])
    from tffre.tasks import task_of
    if cache and "prefix_cache" in task_of(preset["dataset"]).Options.names():
        preset["prefix_cache"] = cache      # the encoders' cached activations
    inherits = setting.inherit or ()
    for source, what, keys in (inherits,) if inherits and isinstance(inherits[0], str) \
            else inherits:
        label = chosen(records, source, what)
        if label is None:
            return f"waits for {source}'s choice of {what}"
        parent = next(s for s in comparisons()[source].settings if s.label == label)
        preset.update({k: parent.preset[k] for k in keys})
    central = setting.centralised
    candidate = [c for c in comparison.choices if setting.label in c["candidates"]]
    if central and candidate:   # a candidate trains the reference once dev has chosen it
        central = chosen(records, comparison.name, candidate[0]["what"]) == setting.label
    if central:
        preset.update(centralised=True, centralised_learning_rates=CENTRAL_RATES)
    runs = [(s, preset) for s in setting.seeds]
    runs += [(s, dict(preset, algorithm=setting.more_algorithms, centralised=False,
                      centralised_learning_rates=None)) for s in setting.more_seeds]
    out = []
    for s, p in runs:
        for i, part in enumerate(parts_of(setting, s)):
            apart = {} if part is None else {"algorithm": part}
            if i > 0:       # the centralised reference runs with the first part only
                apart.update(centralised=False, centralised_learning_rates=None)
            out.append((s, part, dict(p, seed=s, **apart)))
    return out


def same_flags(run, preset, out):
    """True when ``run`` (a record's run entry) was made with ``preset``'s flags, the paths
    aside (they differ between machines; the data are compared by content)."""
    from tffre import config
    # Resolved as a run into a folder that does not exist: only the flags matter here.
    cfg = config.resolve({"out": os.path.join(out, "flags-check")}, preset=preset)
    skip = lambda name: name in config.OPERATIONAL or name in PATH_OPTIONS  # noqa: E731
    return not config.differences(run["flags"], cfg, skip=skip)


def same_data(run, preset, out):
    """True when ``run`` read the files ``preset`` names now (by SHA-256); ``out`` is the
    run's folder."""
    from tffre import config
    from tffre.provenance import data_files, input_paths
    from tffre.tasks import data_path
    # Resolved, so an option the preset leaves to the task (IMCS's embedded sample) counts.
    values = config.resolve({"out": os.path.join(os.path.dirname(out), "data-check")},
                            preset=preset).values
    values = dict(values, data=data_path(preset["dataset"], values.get("data")))
    now = sorted((f["option"], f["file"], f["sha256"]) for f in data_files(input_paths(values)))
    before = sorted((f["option"], f["file"], f["sha256"])
                    for f in (run.get("provenance") or {}).get("data_files", []))
    return now == before


def folder_entry(folder, label, part=None):
    """The run entry of the finished run in ``folder``, or None (none, or not readable)."""
    from tffre.records import RecordError, run_entry
    if not os.path.exists(os.path.join(folder, "summary.json")):
        return None
    try:
        return run_entry(folder, setting=label, part=part)
    except RecordError:
        return None


def run_comparison(comparison, args, deadline):
    """Runs what ``comparison``'s record lacks, adding each finished run to it; returns the
    record. A run folder that finished with the same flags and data joins the record without
    training (even past --max-hours); one made on other data is run again."""
    from tffre.records import run_entry, with_run, write_record
    from tffre.sweep import run_preset
    record = read_or_new(args.records, comparison)
    path = record_path(args.records, comparison.name)
    if record["runs"]:      # today's declarations (settings, seeds, notes) into the record
        write_record(path, record)
    cache = os.path.join(args.out, "activations")
    for setting in comparison.settings:
        if args.settings and setting.label not in args.settings:
            continue
        runs = presets(comparison, setting, args.root, args.records, cache)
        if isinstance(runs, str):
            print(f"{comparison.name}, {setting.label}: {runs}")
            continue
        for seed, part, preset in runs:
            if args.seeds is not None and seed not in args.seeds or \
                    part is not None and args.parts and part not in args.parts:
                continue
            folder = os.path.join(setting_folder(args.out, comparison.name, setting.label),
                                  f"seed_{seed}", *([part] if part else []))
            what = f"{setting.label}, seed {seed}" + (f", {part}" if part else "")
            held = [r for r in record["runs"]
                    if (r["setting"], r["seed"], r.get("part")) == (setting.label, seed, part)]
            if held and same_flags(held[0], preset, folder) and same_data(held[0], preset,
                                                                          folder):
                continue
            entry = folder_entry(folder, setting.label, part)
            if entry is None or not (same_flags(entry, preset, folder)
                                     and same_data(entry, preset, folder)):
                if time.time() > deadline:   # the finished folders after it still join
                    print(f"{comparison.name}, {what}: not started (--max-hours reached)")
                    continue
                print(f"\n=== {comparison.name}: {what} ===", flush=True)
                started = time.perf_counter()
                # Other data: train it again; other (resumable) flags: resume it there.
                run_preset(preset, folder, prog="benchmarks/real_corpora.py",
                           rerun=entry is not None and not same_data(entry, preset, folder))
                entry = run_entry(folder, setting=setting.label, part=part)
                print(f"{comparison.name}, {what}: {time.perf_counter() - started:.0f} s",
                      flush=True)
            # Read again: another call may have recorded runs of other settings meanwhile.
            record = with_run(read_or_new(args.records, comparison), entry)
            write_record(path, record)
            print(f"{path}: {what} recorded", flush=True)
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the folder of the public copies")
    parser.add_argument("--only", default=None, help="comma-separated comparisons")
    parser.add_argument("--settings", default=None,
                        help="comma-separated settings to run (default: every one)")
    parser.add_argument("--seeds", default=None,
                        help="comma-separated seeds to run (default: every one); a choice "
                        "waits for all of its candidates' seeds")
    parser.add_argument("--parts", default=None,
                        help="comma-separated algorithms (--algorithm values) to run of a "
                        "setting that runs its algorithms apart (default: every one)")
    parser.add_argument("--out", default="results/real_corpora", help="the run folders")
    parser.add_argument("--records", default=RECORDS, help="the records' folder")
    parser.add_argument("--max-hours", type=float, default=None,
                        help="start no run after this many hours")
    args = parser.parse_args(argv)
    declared = comparisons()
    names = args.only.split(",") if args.only else list(declared)
    unknown = [n for n in names if n not in declared]
    if unknown:
        parser.error(f"unknown comparison(s) {', '.join(unknown)}; valid: "
                     f"{', '.join(declared)}")
    args.settings = [s.strip() for s in args.settings.split(",")] if args.settings else None
    if args.settings:
        known = {s.label for n in names for s in declared[n].settings}
        missing = [s for s in args.settings if s not in known]
        if missing:
            parser.error(f"unknown setting(s) {', '.join(missing)}; valid: "
                         f"{', '.join(sorted(known))}")
    args.seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
    args.parts = [p.strip() for p in args.parts.split(",")] if args.parts else None
    deadline = float("inf") if args.max_hours is None else time.time() + 3600 * args.max_hours
    from tffre import report
    for name in names:
        comparison = declared[name]
        # Twice: a choice made by the first pass's runs lets the chosen candidate add its
        # centralised reference and the settings that inherit it start in the second.
        for _ in range(2):
            record = run_comparison(comparison, args, deadline)
        if record["runs"]:
            print(f"\n## {comparison.title}\n\n{report.markdown(record)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
