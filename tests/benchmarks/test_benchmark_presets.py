"""The benchmarks' presets are valid runs, and the real-corpora benchmark keeps its records:
each preset resolves as `python -m tffre run` would take it (no TensorFlow, no data read), so a
broken preset fails here and not an hour into a benchmark; the protocol (choices on dev, the
centralised reference on the chosen setting, records that resume) runs on invented runs."""

import json
import math
import os
import sys

import pytest

from tffre import config

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import privacy_utility  # noqa: E402
import real_corpora  # noqa: E402


# Every run of the benchmark but synthetic at epsilon 3: resolving an adaptive-clip target
# calibrates sigma (half a minute at 100 of 1,000 clients), and 3 takes the path of 8.
RUNS = [(w, e) for w in sorted(privacy_utility.WORKLOADS) for e in privacy_utility.EPSILONS
        if (w, e) != ("synthetic", 3.0)]


@pytest.mark.parametrize("workload,epsilon", RUNS)
def test_privacy_presets_resolve(tmp_path, workload, epsilon):
    preset = privacy_utility.preset_of(workload, epsilon)
    cfg = config.resolve(dict(preset, out=str(tmp_path / "o")))
    (hparams,) = cfg.hparams.values()
    if math.isinf(epsilon):
        assert not hparams.dp_on
    else:
        assert hparams.dp_target_epsilon == epsilon and hparams.dp_clip is not None
    # Adaptive clipping where it can reach the sigma the target needs, a fixed C below that.
    if workload == "synthetic" and not math.isinf(epsilon):
        assert (hparams.dp_clip == "adaptive") == (epsilon >= privacy_utility.ADAPTIVE_FROM)


def fake_root(tmp_path):
    root = tmp_path / "corpora"
    for folder in ("biobert_RE/GAD/1", "scibert_chemprot", "cdr_pubtator"):
        (root / folder).mkdir(parents=True)      # resolve checks that --data exists
        (root / folder / "train.txt").write_text(folder)
    return root


# {setting label: FedAvgT's dev F1 per round}: the top 4 wins on dev (0.80 > 0.78)
DEV = {"top 2 30 rounds": [0.70, 0.78, 0.75], "top 4 15 rounds": [0.72, 0.80, 0.79]}


def fake_run_preset(calls):
    """A run_preset that writes a finished run's folder from the preset, as a run would."""
    from tffre.jsonio import json_safe
    from tffre.provenance import provenance
    from tffre.tasks import data_path

    def run_preset(preset, out, *, prog, rerun=False):
        cfg = config.resolve(dict(preset, out=out, overwrite=True))
        # .../<setting>/seed_<s>, or .../<setting>/seed_<s>/<part> for a setting run apart
        parts = os.path.normpath(out).split(os.sep)
        at = max(i for i, p in enumerate(parts) if p.startswith("seed_"))
        calls.append((parts[at - 1], preset["seed"], bool(preset.get("centralised")))
                     + tuple(parts[at + 1:]))
        os.makedirs(out, exist_ok=True)
        label = parts[at - 1].replace("_", " ")
        dev = DEV.get(label, [0.5, 0.6, 0.55])
        names = [n for n in cfg.algorithms]
        names = [{"fedavgt": "FedAvgT"}.get(n.lower(), n) for n in names]
        if cfg.run.centralised:
            names += [f"Centralised lr {lr:g}" for lr in cfg.run.centralised_learning_rates]
        lines = ["algorithm,round,test_f1,dev_f1,round_seconds"]
        for name in names:
            for rnd, d in enumerate(dev, start=1):
                lines.append(f"{name},{rnd},{d - 0.1 + preset['seed'] / 100},{d},1.0")
        with open(os.path.join(out, "metrics.csv"), "w") as f:
            f.write("\n".join(lines) + "\n")
        summary = {"seed": preset["seed"], "config": cfg.values, "wall_seconds": 1.0,
                   "provenance": provenance(dict(cfg.values, data=data_path(
                       cfg.dataset, cfg.values["data"]))),
                   "algorithms": {n: {"max_test_f1": 1.0} for n in names},
                   "majority_class_test_f1": 0.69}
        with open(os.path.join(out, "summary.json"), "w") as f:
            json.dump(json_safe(summary), f)    # as a run writes it (a --fault as its text)
        return summary
    return run_preset


def test_real_corpora_presets_resolve(tmp_path):
    root = fake_root(tmp_path)
    declared = real_corpora.comparisons()
    assert set(declared) == {"iid-gad", "fedcmc-gad", "fedcmc-chemprot", "fedcb-gad",
                             "feded-gad", "fedlcc-cdr", "robust-imcs", "robust-gad"}
    for name, comparison in declared.items():
        for setting in comparison.settings:
            runs = real_corpora.presets(comparison, setting, str(root), str(tmp_path / "r"),
                                        None)
            if setting.inherit:     # no record yet: it waits for the choice
                assert runs.startswith("waits for")
                continue
            for seed, part, preset in runs:
                cfg = config.resolve(dict(preset, out=str(tmp_path / name / setting.label)))
                assert cfg.dataset == preset["dataset"] and cfg.run.seed == seed
    # The pairs a paper's effect is about run five seeds.
    fedcmc = declared["fedcmc-gad"].settings[0]
    assert fedcmc.seeds + fedcmc.more_seeds == (0, 1, 2, 3, 4)
    assert fedcmc.more_algorithms == "fedavgt,fedcmc"


def test_the_protocol_chooses_on_dev_then_adds_the_reference_and_resumes(tmp_path,
                                                                         monkeypatch):
    from tffre import sweep
    from tffre.records import read_record
    calls = []
    monkeypatch.setattr(sweep, "run_preset", fake_run_preset(calls))
    root, records = fake_root(tmp_path), tmp_path / "records"
    argv = ["--root", str(root), "--out", str(tmp_path / "out"), "--records", str(records),
            "--only", "iid-gad,fedcb-gad"]
    assert real_corpora.main(argv) == 0
    # Both candidates' three seeds; then the chosen top 4's again with the centralised grid;
    # then fedcb-gad at the chosen top.
    assert calls[:6] == [(f"top_{k}_{r}_rounds", s, False) for k, r in ((2, 30), (4, 15))
                         for s in (0, 1, 2)]
    assert calls[6:9] == [("top_4_15_rounds", s, True) for s in (0, 1, 2)]
    assert calls[9:] == [("alpha_0.5", s, False) for s in (0, 1, 2)]
    record = read_record(str(records / "iid-gad.json"))
    top4 = [r for r in record["runs"] if r["setting"] == "top 4 15 rounds"]
    assert all("Centralised lr 0.0001" in r["algorithms"] for r in top4)
    assert all(r["provenance"]["data_files"][0]["file"] == "train.txt" for r in top4)
    fedcb = read_record(str(records / "fedcb-gad.json"))
    assert {r["flags"]["trainable_layers"] for r in fedcb["runs"]} == {4}
    assert {r["flags"]["num_rounds"] for r in fedcb["runs"]} == {15}   # and its rounds

    # A second call finds every run in the records: it runs nothing.
    calls.clear()
    assert real_corpora.main(argv) == 0
    assert calls == []
    # Changed data (another SHA-256) reruns the runs that read it.
    (root / "biobert_RE/GAD/1/train.txt").write_text("changed")
    assert real_corpora.main(argv + ["--max-hours", "0"]) == 0
    assert calls == []      # --max-hours 0: none is started
    assert real_corpora.main(argv[:-2] + ["--only", "iid-gad", "--settings",
                                          "top 2 30 rounds"]) == 0
    assert calls == [("top_2_30_rounds", s, False) for s in (0, 1, 2)]


def test_past_max_hours_a_finished_run_folder_still_joins_the_record(tmp_path, monkeypatch):
    """A run folder that finished with the preset's flags and data (a run made before the
    record existed) joins the record without training, even when --max-hours has passed."""
    from tffre import sweep
    from tffre.records import read_record
    root, records, out = fake_root(tmp_path), tmp_path / "records", tmp_path / "out"
    comparison = real_corpora.comparisons()["iid-gad"]
    runs = real_corpora.presets(comparison, comparison.settings[0], str(root), str(records),
                                str(out / "activations"))
    # seed 0 of the top 2 and seed 2 of the top 4 finished before the call; the rest did not
    folder = out / "iid-gad" / "top_2_30_rounds" / "seed_0"
    fake_run_preset([])(runs[0][2], str(folder), prog="x")
    later = real_corpora.presets(comparison, comparison.settings[1], str(root), str(records),
                                 str(out / "activations"))
    fake_run_preset([])(later[2][2], str(out / "iid-gad" / "top_4_15_rounds" / "seed_2"),
                        prog="x")
    calls = []
    monkeypatch.setattr(sweep, "run_preset", fake_run_preset(calls))
    argv = ["--root", str(root), "--out", str(out), "--records", str(records), "--only",
            "iid-gad", "--max-hours", "0"]
    assert real_corpora.main(argv) == 0
    assert calls == []                   # read back, nothing trained or started
    record = read_record(str(records / "iid-gad.json"))
    assert [(r["setting"], r["seed"]) for r in record["runs"]] == [("top 2 30 rounds", 0),
                                                                   ("top 4 15 rounds", 2)]


def test_seeds_narrow_a_call_and_the_choice_waits_for_the_rest(tmp_path, monkeypatch):
    """``--seeds 0`` runs seed 0 of every candidate (a session's worth, joined to the record at
    once); the choice, and so the settings that inherit it, waits for the other seeds."""
    from tffre import sweep
    from tffre.records import read_record
    calls = []
    monkeypatch.setattr(sweep, "run_preset", fake_run_preset(calls))
    root, records = fake_root(tmp_path), tmp_path / "records"
    argv = ["--root", str(root), "--out", str(tmp_path / "out"), "--records", str(records),
            "--only", "fedlcc-cdr", "--seeds", "0"]
    assert real_corpora.main(argv) == 0
    assert calls == [("threshold_0.5", 0, False), ("threshold_dev", 0, False)]
    record = read_record(str(records / "fedlcc-cdr.json"))
    assert [(r["setting"], r["seed"]) for r in record["runs"]] == [("threshold 0.5", 0),
                                                                   ("threshold dev", 0)]
    calls.clear()
    assert real_corpora.main(argv[:-1] + ["1,2"]) == 0   # the rest: now dev chooses
    assert [c[:2] for c in calls[:4]] == [("threshold_0.5", 1), ("threshold_0.5", 2),
                                          ("threshold_dev", 1), ("threshold_dev", 2)]
    # only the seeds asked for, each algorithm apart, the reference with the first
    assert calls[4:] == [("structural_entropy", s, central, part) for s in (1, 2)
                         for part, central in (("fedavg", True), ("fedatt", False),
                                               ("fedlcc", False))]


def test_a_setting_run_apart_keeps_each_finished_algorithm_and_reads_as_one_run(
        tmp_path, monkeypatch):
    """fedlcc-cdr's structural-entropy setting runs each algorithm of a seed apart: a call cut
    short in a seed's third algorithm keeps the first two in the record; the next call runs
    only what is missing; the tables read each seed's parts as one run (its wall time their
    sum), and seeds 3 and 4 run FedAvg and FedLCC alone."""
    from tffre import report, sweep
    from tffre.record_scores import runs_of
    from tffre.records import read_record
    root, records = fake_root(tmp_path), tmp_path / "records"
    argv = ["--root", str(root), "--out", str(tmp_path / "out"), "--records", str(records),
            "--only", "fedlcc-cdr"]
    calls = []
    fake = fake_run_preset(calls)

    def cut(preset, out, **kwargs):      # the session ends in seed 0's FedLCC
        if preset["algorithm"] == "fedlcc" and preset["seed"] == 0:
            raise KeyboardInterrupt
        return fake(preset, out, **kwargs)
    monkeypatch.setattr(sweep, "run_preset", cut)
    with pytest.raises(KeyboardInterrupt):
        real_corpora.main(argv + ["--seeds", "0,1,2"])
    record = read_record(str(records / "fedlcc-cdr.json"))
    apart = [(r["seed"], r["part"]) for r in record["runs"] if "part" in r]
    assert apart == [(0, "fedavg"), (0, "fedatt")]
    calls.clear()
    monkeypatch.setattr(sweep, "run_preset", fake)
    assert real_corpora.main(argv + ["--seeds", "1", "--parts", "fedlcc"]) == 0
    assert calls == [("structural_entropy", 1, False, "fedlcc")]     # one algorithm of a seed
    # Seed 1 holds FedLCC alone: its FedAvg not run yet, nothing stands in as the baseline.
    alone = read_record(str(records / "fedlcc-cdr.json"))
    alone["runs"] = [r for r in alone["runs"] if r["seed"] == 1]
    assert [r["difference"] for r in report.setting_rows(alone, "structural entropy")
            if not r.get("centralised")] == [None]
    assert "| FedLCC | 1 |" in report.setting_markdown(alone, "structural entropy")
    assert "baseline" not in report.setting_markdown(alone, "structural entropy")
    calls.clear()
    assert real_corpora.main(argv) == 0
    assert calls[0] == ("structural_entropy", 0, False, "fedlcc")   # what was missing first
    assert ("structural_entropy", 0, True, "fedavg") not in calls
    assert calls[-4:] == [("structural_entropy", s, False, part) for s in (3, 4)
                          for part in ("fedavg", "fedlcc")]
    record = read_record(str(records / "fedlcc-cdr.json"))
    runs = runs_of(record, "structural entropy")
    assert sorted(runs) == [0, 1, 2, 3, 4]
    assert list(runs[0]["algorithms"]) == ["FedAvg", "Centralised lr 3e-05",
                                           "Centralised lr 0.0001", "Centralised lr 0.0003",
                                           "FedAtt", "FedLCC"]
    assert runs[0]["parts"] == ["fedavg", "fedatt", "fedlcc"] and runs[0]["wall_seconds"] == 3.0
    assert list(runs[3]["algorithms"]) == ["FedAvg", "FedLCC"]
    rows = {r["algorithm"]: r for r in report.setting_rows(record, "structural entropy")}
    assert rows["FedLCC"]["seeds"] == [0, 1, 2, 3, 4] and rows["FedAtt"]["seeds"] == [0, 1, 2]
    assert rows["centralised (same budget)"]["seeds"] == [0, 1, 2]


def test_a_defence_grid_chooses_the_client_rate_on_clean_dev_then_runs_every_cell(
        tmp_path, monkeypatch):
    """robust-imcs: the three rates' clean runs first; dev (FedAvg's mean) picks 0.3; then
    every defence by every fault condition at 0.3, the defence's and fault's flags set."""
    from tffre import grid_report, sweep
    from tffre.records import read_record
    calls = []
    monkeypatch.setitem(DEV, "none, clean, lr 0.3", [0.6, 0.9, 0.7])
    monkeypatch.setattr(sweep, "run_preset", fake_run_preset(calls))
    records = tmp_path / "records"
    argv = ["--root", str(fake_root(tmp_path)), "--out", str(tmp_path / "out"), "--records",
            str(records), "--only", "robust-imcs"]
    assert real_corpora.main(argv) == 0
    assert calls[:9] == [(f"none,_clean,_lr_{lr}", s, False) for lr in ("0.1", "0.3", "1")
                         for s in (0, 1, 2)]
    cells = len(real_corpora.DEFENCES) * len(real_corpora.FAULTS) - 1
    assert len(calls) == 9 + 3 * cells
    record = read_record(str(records / "robust-imcs.json"))
    by_setting = {r["setting"]: r["flags"] for r in record["runs"] if r["seed"] == 0}
    assert {h["learning_rate"] for s, f in by_setting.items() if "lr" not in s
            for h in f["hparams"].values()} == {0.3}
    flags = by_setting["krum, 3 scale:-5"]
    assert (flags["faulty_clients"], flags["fault"], flags["executor"]) == (3, "scale:-5",
                                                                           "local")
    assert {h["robust"] for h in flags["hparams"].values()} == {"krum"}
    assert {h["robust_f"] for h in flags["hparams"].values()} == {3}
    assert by_setting["bulyan, clean"]["faulty_clients"] == 0
    assert "prefix_cache" not in by_setting["bulyan, clean"]     # no encoder: no cache
    # The grid: the chosen candidate is the clean, undefended cell; the others are not shown.
    found, rows, columns = grid_report.cells(record)
    assert found[("none", "clean")] == "none, clean, lr 0.3"
    assert rows == list(real_corpora.DEFENCES) and columns[0] == "clean" and len(columns) == 7
    assert "lr 0.1" not in grid_report.markdown(record)
