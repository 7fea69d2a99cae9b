"""The benchmarks' presets are valid runs: each resolves as `python -m tffre run` would take it
(no TensorFlow, no data read), so a broken preset fails here and not an hour into a benchmark."""

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


def test_real_corpora_presets_resolve(tmp_path):
    root = tmp_path / "corpora"
    for folder in ("biobert_RE/GAD/1", "biobert_RE/euadr/1", "scibert_chemprot",
                   "cdr_pubtator"):
        (root / folder).mkdir(parents=True)      # resolve checks that --data exists
    comparisons = real_corpora.comparisons(str(root))
    assert set(comparisons) == {"iid-gad", "fedcmc-gad", "fedcmc-euadr", "fedcmc-chemprot",
                                "feded-gad", "fedcb-gad", "fedlcc-cdr"}
    for name, runs in comparisons.items():
        for label, preset in runs:
            cfg = config.resolve(dict(preset, out=str(tmp_path / name / label)))
            assert cfg.dataset == preset["dataset"]


def test_real_corpora_settings_run_apart_keep_each_others_rows(tmp_path, monkeypatch):
    """Running "top 2" and then "top 4" of iid-gad (as --settings does) leaves both settings'
    rows in iid-gad.csv and summary.json, each with its own scale (trainable layers, rounds)."""
    import pandas as pd
    from tffre import sweep
    from tffre.jsonio import read_json_object

    def fake_rows(name, label, summaries):
        return [{"comparison": name, "setting": label, "algorithm": "FedAvgT",
                 "F1 at best dev": len(label)}]

    monkeypatch.setattr(real_corpora, "rows_of", fake_rows)
    monkeypatch.setattr(sweep, "run_seeds", lambda preset, folder, seeds, prog: {
        s: {"peak_rss_mib": {"python": 1.0}, "wall_seconds": 2.0} for s in seeds})
    root, out = tmp_path / "corpora", tmp_path / "out"
    for setting in ("top 4", "top 2"):
        assert real_corpora.main(["--root", str(root), "--out", str(out), "--only", "iid-gad",
                                  "--settings", setting, "--seeds", "0"]) == 0
    table = pd.read_csv(out / "iid-gad.csv")
    assert list(table["setting"]) == ["top 2", "top 4"]
    entry = read_json_object(str(out / "summary.json"))["comparisons"]["iid-gad"]
    assert [r["setting"] for r in entry["rows"]] == ["top 2", "top 4"]
    assert entry["settings_this_call"] == ["top 2"]
    scales = entry["scale_by_setting"]
    assert (scales["top 2"]["trainable_layers"], scales["top 2"]["num_rounds"]) == (2, 30)
    assert (scales["top 4"]["trainable_layers"], scales["top 4"]["num_rounds"]) == (4, 20)


def test_real_corpora_a_seed_that_cannot_run_is_named_and_the_rest_go_on(tmp_path, monkeypatch):
    """A seed whose run stops (as EU-ADR's at alpha 0.05, which no split can serve) is named in
    summary.json's failed_seeds; the other seeds make the rows, and the call succeeds."""
    from tffre import sweep
    from tffre.jsonio import read_json_object

    def fake_run_seeds(preset, folder, seeds, prog):
        (seed,) = seeds
        if (preset["trainable_layers"], preset["num_rounds"], seed) == (4, 20, 1):
            raise SystemExit(f"{folder}/seed_1: the run failed (exit code 1)")
        return {seed: {"peak_rss_mib": {"python": 1.0}, "wall_seconds": 2.0}}

    monkeypatch.setattr(real_corpora, "rows_of", lambda name, label, summaries: [
        {"comparison": name, "setting": label, "algorithm": "FedAvgT",
         "seeds": sorted(summaries)}])
    monkeypatch.setattr(sweep, "run_seeds", fake_run_seeds)
    out = tmp_path / "out"
    assert real_corpora.main(["--root", str(tmp_path), "--out", str(out), "--only", "iid-gad",
                              "--seeds", "0,1,2"]) == 0
    entry = read_json_object(str(out / "summary.json"))["comparisons"]["iid-gad"]
    assert [(r["setting"], r["seeds"]) for r in entry["rows"]] == [
        ("top 2", [0, 1, 2]), ("top 3", [0, 1, 2]), ("top 4", [0, 2]),
        ("top 2 lr decay", [0, 1, 2]), ("top 4 15 rounds", [0, 1, 2]),
        ("top 2 96 pieces", [0, 1, 2]), ("top 2 lr 1e-4", [0, 1, 2]),
        ("top 2 threshold dev", [0, 1, 2]), ("top 2 cls entities", [0, 1, 2])]
    assert list(entry["failed_seeds"]) == ["top 4"]
    assert "seed_1: the run failed" in entry["failed_seeds"]["top 4"]["1"]


def test_real_corpora_overlapping_calls_keep_each_others_comparisons(tmp_path, monkeypatch):
    """A call that runs while another writes its comparison (two --only jobs side by side)
    leaves both comparisons in summary.json: each call adds its own to the file as it is at
    the end, not to the copy it read at the start."""
    from tffre import sweep
    from tffre.jsonio import read_json_object, write_json

    out = tmp_path / "out"
    out.mkdir()
    write_json(str(out / "summary.json"), {"comparisons": {"fedcb-gad": {"rows": []}}})

    def run_seeds_while_another_call_writes(preset, folder, seeds, prog):
        summary = read_json_object(str(out / "summary.json"))
        summary["comparisons"]["feded-gad"] = {"rows": []}       # the other call's write
        write_json(str(out / "summary.json"), summary)
        return {s: {"peak_rss_mib": {"python": 1.0}, "wall_seconds": 2.0} for s in seeds}

    monkeypatch.setattr(real_corpora, "rows_of", lambda name, label, summaries: [
        {"comparison": name, "setting": label, "algorithm": "FedAvgT"}])
    monkeypatch.setattr(sweep, "run_seeds", run_seeds_while_another_call_writes)
    assert real_corpora.main(["--root", str(tmp_path), "--out", str(out), "--only", "iid-gad",
                              "--settings", "top 2", "--seeds", "0"]) == 0
    comparisons = read_json_object(str(out / "summary.json"))["comparisons"]
    assert set(comparisons) == {"fedcb-gad", "feded-gad", "iid-gad"}


def test_real_corpora_a_longer_setting_starts_from_the_shorter_finished_run(tmp_path):
    """A seed of "iid top 4 60 rounds" begins as a copy of "iid top 4"'s finished run (to be
    resumed); an unfinished shorter run, or a longer seed already begun, is left alone."""
    out = tmp_path / "out"
    shorter = out / "feded-gad" / "iid_top_4"
    (shorter / "seed_0").mkdir(parents=True)
    (shorter / "seed_0" / "summary.json").write_text('{"rounds": 30}')
    (shorter / "seed_1").mkdir()                       # cut short: no summary.json
    (shorter / "seed_1" / "metrics.csv").write_text("x")
    longer = out / "feded-gad" / "iid_top_4_60_rounds"
    (longer / "seed_2").mkdir(parents=True)
    (shorter / "seed_2").mkdir()
    (shorter / "seed_2" / "summary.json").write_text('{"rounds": 30}')
    label = "iid top 4 60 rounds"
    assert real_corpora.EXTENDS[("feded-gad", label)] == "iid top 4"
    assert real_corpora.start_from_shorter(str(out), "feded-gad", label, 0)
    assert (longer / "seed_0" / "summary.json").read_text() == '{"rounds": 30}'
    assert not real_corpora.start_from_shorter(str(out), "feded-gad", label, 1)
    assert not (longer / "seed_1").exists()
    assert not real_corpora.start_from_shorter(str(out), "feded-gad", label, 2)
    assert not any((longer / "seed_2").iterdir())
    assert not real_corpora.start_from_shorter(str(out), "feded-gad", "iid top 4", 0)
    # A finished longer run stays as it is: the copy happens once.
    assert not real_corpora.start_from_shorter(str(out), "feded-gad", label, 0)
