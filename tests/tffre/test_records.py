"""tffre.records: a record's runs from hand-written run folders."""

import json

import pytest

from tffre.record_scores import merged_runs
from tffre.records import (FORMAT, RecordError, has_run, load, new_record, read_record,
                           run_entry, with_run, write_record)

METRICS_HEADER = "algorithm,round,test_f1,dev_f1,test_accuracy,round_seconds"


def write_run(folder, seed, rows, *, algorithms=("FedAvgT",), guesses=None, dev=True):
    """A finished run's folder: metrics.csv from ``rows`` {name: [(test, dev), ...]}."""
    folder.mkdir(parents=True)
    lines = [METRICS_HEADER]
    for name in algorithms:
        for rnd, (test, d) in enumerate(rows[name], start=1):
            lines.append(f"{name},{rnd},{test},{d if dev else ''},0.5,2.0")
    (folder / "metrics.csv").write_text("\n".join(lines) + "\n")
    summary = {"seed": seed, "config": {"dataset": "gad", "seed": seed, "num_rounds": 3},
               "provenance": {"commit": "abc", "data_files": []}, "wall_seconds": 12.5,
               "peak_rss_mib": {"python": 100.0},
               "algorithms": {n: {"max_test_f1": max(t for t, _ in rows[n]),
                                  "bytes_uploaded_per_round": 1000.0,
                                  "mean_round_ms": 2000.0} for n in algorithms}}
    summary.update(guesses or {"majority_class_test_f1": 0.69, "all_positive_test_f1": 0.69})
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_a_run_entry_keeps_every_round_and_the_dev_selection(tmp_path):
    folder = write_run(tmp_path / "top_2" / "seed_3", 3,
                       {"FedAvgT": [(0.5, 0.6), (0.7, 0.8), (0.9, 0.7)]})
    entry = run_entry(str(folder))
    assert entry["setting"] == "top_2" and entry["seed"] == 3 and entry["metric"] == "f1"
    fedavg = entry["algorithms"]["FedAvgT"]
    assert fedavg["rounds"]["round"] == [1, 2, 3]
    assert fedavg["rounds"]["test_f1"] == [0.5, 0.7, 0.9]
    # dev peaks at round 2: the reported figure is round 2's test 0.7, not the max 0.9
    assert fedavg["selected"] == {"round": 2, "dev": 0.8, "test": 0.7, "by": "best dev"}
    assert fedavg["bytes_uploaded_per_round"] == 1000.0
    assert entry["guesses"] == {"majority": 0.69, "all_positive": 0.69}
    assert entry["flags"]["num_rounds"] == 3 and entry["provenance"]["commit"] == "abc"
    assert entry["wall_seconds"] == 12.5


def test_a_run_without_dev_reports_its_last_round(tmp_path):
    folder = write_run(tmp_path / "syn", 0, {"FedAvgT": [(0.5, 0), (0.9, 0), (0.6, 0)]},
                       dev=False)
    chosen = run_entry(str(folder))["algorithms"]["FedAvgT"]["selected"]
    assert chosen == {"round": 3, "dev": None, "test": 0.6, "by": "final round (no dev split)"}


def test_records_round_trip_and_replace_a_run(tmp_path):
    a = run_entry(str(write_run(tmp_path / "s" / "seed_0", 0, {"FedAvgT": [(0.5, 0.6)]})))
    b = run_entry(str(write_run(tmp_path / "s" / "seed_1", 1, {"FedAvgT": [(0.4, 0.3)]})))
    record = new_record("demo", title="Demo", baseline="FedAvgT", settings={"s": {}},
                        runs=[b, a])
    path = write_record(str(tmp_path / "r" / "demo.json"), record)
    back = read_record(path)
    assert back["format"] == FORMAT and [r["seed"] for r in back["runs"]] == [0, 1]
    assert has_run(back, "s", 1) and not has_run(back, "s", 2)
    again = with_run(back, dict(a, wall_seconds=99.0))
    assert len(again["runs"]) == 2
    assert [r["wall_seconds"] for r in again["runs"] if r["seed"] == 0] == [99.0]


def test_the_parts_of_a_seed_are_kept_apart_and_read_as_one_run(tmp_path):
    """A setting run an algorithm at a time: each part its own entry (a part replaces only
    itself), one run to a reader: the algorithms of both, the times summed (12.5 + 12.5),
    the larger peak memory."""
    def part(seed, name, rows, rss):
        folder = write_run(tmp_path / f"seed_{seed}" / name.lower(), seed, {name: rows},
                           algorithms=(name,))
        return dict(run_entry(str(folder), setting="s", part=name.lower()),
                    peak_rss_mib={"python": rss})
    first, second = part(0, "FedAvg", [(0.5, 0.6)], 100.0), part(0, "FedLCC", [(0.4, 0.7)], 300.0)
    record = new_record("demo", title="Demo", settings={"s": {"parts": ["fedavg", "fedlcc"]}},
                        runs=[second])
    record = with_run(with_run(record, first), dict(second, wall_seconds=20.0))
    record = read_record(write_record(str(tmp_path / "demo.json"), record))   # declared order
    assert [(r["part"], r["wall_seconds"]) for r in record["runs"]] == [("fedavg", 12.5),
                                                                         ("fedlcc", 20.0)]
    assert has_run(record, "s", 0, "fedlcc") and not has_run(record, "s", 0, "fedatt")
    (whole,) = merged_runs(record["runs"] + [part(1, "FedAvg", [(0.1, 0.2)], 5.0)])[:1]
    assert list(whole["algorithms"]) == ["FedAvg", "FedLCC"]
    assert whole["parts"] == ["fedavg", "fedlcc"] and whole["wall_seconds"] == 32.5
    assert whole["peak_rss_mib"] == {"python": 300.0}
    assert whole["algorithms"]["FedLCC"]["selected"]["test"] == 0.4
    assert first["algorithms"].keys() == {"FedAvg"}          # the entries are not changed
    whole_run = run_entry(str(write_run(tmp_path / "w" / "seed_0", 0, {"FedAvgT": [(0.5, 0.6)]})))
    assert merged_runs([whole_run]) == [whole_run] and "part" not in whole_run
    # A folder of part folders (<setting>/seed_<s>/<part>), as `tffre report` reads one.
    write_run(tmp_path / "cdr" / "se" / "seed_0" / "fedavg", 0, {"FedAvg": [(0.5, 0.6)]},
              algorithms=("FedAvg",))
    write_run(tmp_path / "cdr" / "se" / "seed_0" / "fedlcc", 0, {"FedLCC": [(0.4, 0.7)]},
              algorithms=("FedLCC",))
    loaded = load(str(tmp_path / "cdr"))
    assert [(r["setting"], r["seed"], r["part"]) for r in loaded["runs"]] == [
        ("se", 0, "fedavg"), ("se", 0, "fedlcc")]
    assert list(merged_runs(loaded["runs"])[0]["algorithms"]) == ["FedAvg", "FedLCC"]


def test_load_reads_a_record_a_run_or_a_folder_of_runs(tmp_path):
    for seed in (0, 1):
        write_run(tmp_path / "runs" / "top_2" / f"seed_{seed}", seed,
                  {"FedAvgT": [(0.5, 0.6)]})
    record = load(str(tmp_path / "runs"))
    assert [(r["setting"], r["seed"]) for r in record["runs"]] == [("top_2", 0), ("top_2", 1)]
    assert len(load(str(tmp_path / "runs" / "top_2" / "seed_1"))["runs"]) == 1


def test_bad_input_names_the_file(tmp_path):
    with pytest.raises(RecordError, match="no such record file or run folder"):
        load(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordError, match="holds no finished run"):
        load(str(tmp_path / "empty"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "other"}')
    with pytest.raises(RecordError, match=r"bad.json: not a tffre record"):
        read_record(str(bad))
    bad.write_text(json.dumps({"format": FORMAT, "runs": [{"setting": "s"}]}))
    with pytest.raises(RecordError, match=r"runs\[0\] has no 'seed'"):
        read_record(str(bad))
    half = tmp_path / "half"
    half.mkdir()
    (half / "metrics.csv").write_text(METRICS_HEADER + "\n")
    with pytest.raises(RecordError, match="no summary.json"):
        run_entry(str(half))
