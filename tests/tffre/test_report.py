"""tffre.report: tables and choices rendered from hand-built records, checked by hand."""

import pytest

from tffre import report
from tffre.records import new_record


def run(setting, seed, selected, *, guesses=None):
    """A record's run: {algorithm: (test, dev, round)} at the selected round."""
    algorithms = {}
    for name, (test, dev, rnd) in selected.items():
        algorithms[name] = {"rounds": {"round": [rnd], "test_f1": [test], "dev_f1": [dev]},
                            "selected": {"round": rnd, "dev": dev, "test": test,
                                         "by": "best dev"},
                            "bytes_uploaded_per_round": 2000.0}
        if name.startswith("Centralised lr "):   # as the runner records a grid's entry
            algorithms[name]["learning_rate"] = float(name.split()[-1])
    return {"setting": setting, "seed": seed, "metric": "f1", "flags": {},
            "guesses": guesses or {"majority": 0.69}, "algorithms": algorithms}


def record():
    runs = []
    # "small": FedCMC beats FedAvgT on dev on average but the paired test difference is
    # +0.01, +0.03, +0.02 (interval holds 0 at 3 seeds, by hand in test_differences).
    for seed, (a, b) in enumerate([(0.70, 0.71), (0.70, 0.73), (0.70, 0.72)]):
        runs.append(run("small", seed, {"FedAvgT": (a, 0.60, 4), "FedCMC": (b, 0.61, 5),
                                        "Centralised lr 0.0001": (0.74, 0.66, 2),
                                        "Centralised lr 0.0003": (0.60, 0.62, 1)}))
    for seed, dev in enumerate([0.50, 0.52, 0.51]):
        runs.append(run("big", seed, {"FedAvgT": (0.9, dev, 3)}))
    return new_record("demo", title="Demo", baseline="FedAvgT",
                      choices=[{"what": "size", "candidates": ["big", "small"]}],
                      settings={"big": {}, "small": {"note": "the small one"}}, runs=runs)


def test_the_choice_goes_by_mean_dev_and_hides_the_other_candidate():
    outcome, = report.choice_outcomes(record())
    # FedAvgT's mean dev: big 0.51, small 0.60
    assert outcome["chosen"] == "small" and outcome["algorithm"] == "FedAvgT"
    assert outcome["means"]["big"] == pytest.approx(0.51)
    assert report.shown_settings(record()) == ["small"]
    text = report.markdown(record())
    assert "| big | 0, 1, 2 | 0.510 |  |" in text and "| small | 0, 1, 2 | 0.600 | **chosen** |" in text
    assert "0.900" not in text     # the test score of the candidate dev did not choose


def test_a_settings_table_by_hand():
    rows = {r["algorithm"]: r for r in report.setting_rows(record(), "small")}
    assert rows["FedCMC"]["best_by_dev"] and not rows["FedAvgT"]["best_by_dev"]
    assert rows["FedCMC"]["difference"]["mean"] == pytest.approx(0.02)
    central = rows["centralised (same budget)"]["centralised"]
    # lr 1e-4 has the higher mean dev (0.66 > 0.62): its test 0.74 is reported, at epoch 2
    assert central["name"] == "Centralised lr 0.0001"
    text = report.setting_markdown(record(), "small")
    assert "| FedAvgT | 3 | 0.700 ± 0.000 | 0.600 ± 0.000 | 4 | baseline | 2,000 |" in text
    assert "| FedCMC (best by dev) | 3 | 0.720 ± 0.010 | 0.610 ± 0.000 | 5 | +0.020 ± 0.010 " \
           "[-0.005, +0.045]: no difference shown | 2,000 |" in text
    assert "| centralised (same budget), lr 0.0001 | 3 | 0.740 ± 0.000 | 0.660 ± 0.000 | 2 |" \
        in text
    assert "| guess: the majority class |  | 0.690 |" in text


def test_csv_rows_and_curves(tmp_path):
    rows = report.csv_rows(record())
    assert len(rows) == 3 * 4 + 3
    assert {"setting": "small", "algorithm": "FedCMC", "seed": 1, "test_f1": 0.73}.items() \
        <= rows[5].items()
    path = report.plot_curves(record(), str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").stat().st_size > 1000 and path.endswith("c.png")


def test_the_command_writes_its_files_and_names_a_bad_path(tmp_path, capsys):
    import json
    from tffre.records import write_record
    path = write_record(str(tmp_path / "demo.json"), record())
    assert report.main([path, "--out", str(tmp_path / "out")]) == 0
    assert "## Demo" in capsys.readouterr().out
    for name in ("report.md", "report.csv", "demo_curves.png"):
        assert (tmp_path / "out" / name).exists()
    from tffre import cli
    assert cli.main(["report", path]) == 0    # python -m tffre report
    assert report.main([str(tmp_path / "nothing")]) == 1
    assert "no such record file or run folder" in capsys.readouterr().err
    assert json.loads((tmp_path / "demo.json").read_text())["comparison"] == "demo"


def test_the_headline_row_of_a_setting():
    text = report.headline_markdown([record()])
    # the shown setting is "small"; FedCMC is best by dev; the interval holds 0
    assert "| Demo: small | FedCMC 0.720 ± 0.010 | FedAvgT 0.700 ± 0.000; +0.020 ± 0.010 " \
           "[-0.005, +0.045]: no difference shown | 0.740 ± 0.000 | 0.690 | 3 |" in text


def test_save_record_makes_a_record_of_run_folders(tmp_path, capsys):
    from test_records import write_run
    from tffre.records import read_record
    for seed in (0, 1):
        write_run(tmp_path / "runs" / "seed_" f"{seed}", seed, {"FedAvgT": [(0.5, 0.6)]})
    target = tmp_path / "imcs.json"
    assert report.main([str(tmp_path / "runs"), "--save-record", str(target), "--name",
                        "main-job"]) == 0
    saved = read_record(str(target))
    assert saved["comparison"] == "main-job" and len(saved["runs"]) == 2


def test_the_headline_leaves_out_a_choice_that_other_settings_build_on():
    base = record()
    extra = [run("final", seed, {"FedAvgT": (0.8, 0.7, 2)}) for seed in range(3)]
    built = dict(base, runs=base["runs"] + extra, settings={**base["settings"], "final": {}})
    rows = report.headline_rows(built)
    assert [r["setting"] for r in rows] == ["final"]
    assert [r["setting"] for r in report.headline_rows(base)] == ["small"]


def test_a_choice_waits_for_every_candidate_and_hides_their_tests_until_then():
    base = record()
    partial = dict(base, runs=[r for r in base["runs"] if r["setting"] != "big" or r["seed"] == 0])
    outcome, = report.choice_outcomes(partial)
    assert not outcome["complete"] and outcome["chosen"] is None
    assert report.shown_settings(partial) == []
    text = report.markdown(partial)
    assert "not chosen yet" in text and "| big | 0 | 0.500 |  |" in text
    assert "0.720" not in text and "0.900" not in text


def test_a_catalog_row_chosen_on_its_own_dev_joins_its_settings_table_paired_by_seed():
    """FedAdam runs on its own at two server rates; its own mean dev picks 0.01 (0.65 >
    0.55), whose rows then join "alpha 0.5" beside FedAvgT, paired by seed."""
    runs = [run("alpha 0.5", s, {"FedAvgT": (t, 0.60, 4)})
            for s, t in enumerate([0.70, 0.72, 0.71])]
    runs += [run("alpha 0.5, FedAdam 0.001", s, {"FedAdam": (0.99, 0.55, 2)}) for s in range(3)]
    runs += [run("alpha 0.5, FedAdam 0.01", s, {"FedAdam": (t, 0.65, 3)})
             for s, t in enumerate([0.74, 0.74, 0.77])]
    candidates = ["alpha 0.5, FedAdam 0.001", "alpha 0.5, FedAdam 0.01"]
    rec = new_record("demo", title="Demo", baseline="FedAvgT", runs=runs,
                     choices=[{"what": "FedAdam's rate", "candidates": candidates,
                               "algorithm": "FedAdam"}],
                     settings={"alpha 0.5": {}, **{c: {"joins": "alpha 0.5"} for c in candidates}})
    assert report.shown_settings(rec) == ["alpha 0.5"]
    assert report.joined(rec, "alpha 0.5") == ["alpha 0.5, FedAdam 0.01"]
    rows = {r["algorithm"]: r for r in report.setting_rows(rec, "alpha 0.5")}
    assert set(rows) == {"FedAvgT", "FedAdam"}
    # Paired by hand: 0.04, 0.02, 0.06, mean 0.04; FedAdam is best by dev (0.65 > 0.60).
    assert rows["FedAdam"]["difference"]["mean"] == pytest.approx(0.04)
    assert rows["FedAdam"]["best_by_dev"]
    text = report.markdown(rec)
    assert "| FedAdam (best by dev) | 3 | 0.750 ± 0.017 | 0.650 ± 0.000 | 3 | +0.040" in text
    assert "0.990" not in text            # the rate FedAdam's dev did not choose
