"""Seeds in a comparison: each seed runs once into its own folder, finished ones are read
back, and the table gives each F1's mean and sample sd over the seeds (numpy's)."""

import json
import os

import numpy as np
import pytest

from tffre import config, sweep
from tffre.jsonio import write_json

F1 = {0: 0.70, 1: 0.74, 2: 0.75}


def fake_run_main(calls):
    """A stand-in for ``python -m tffre run`` that writes a summary from the preset's seed."""
    def run_main(argv, *, preset, prog):
        calls.append(preset["seed"])
        os.makedirs(preset["out"], exist_ok=True)
        f1 = F1[preset["seed"]]
        # As a real run does: config.json and the summary record the run's settings; a run
        # is read back only while they match the preset's.
        values = config.resolve({"out": preset["out"], "overwrite": "--overwrite" in argv},
                                preset=preset).values
        summary = {"config": values,
                   "majority_class_test_f1": 0.69, "all_positive_test_f1": 0.69,
                   "algorithms": {"FedAvgT": {"test_f1_at_best_dev": f1, "max_test_f1": f1 + 0.01,
                                              "final_test_f1": f1 - 0.01}}}
        write_json(os.path.join(preset["out"], "config.json"), values)
        with open(os.path.join(preset["out"], "summary.json"), "w") as f:
            json.dump(summary, f)
        return 0
    return run_main


def test_seeds_run_once_and_are_read_back(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(sweep.cli, "run_main", fake_run_main(calls))
    preset = {"dataset": "gad", "seed": 99}
    first = sweep.run_seeds(preset, str(tmp_path), [0, 1], prog="x")
    assert calls == [0, 1] and sorted(os.listdir(tmp_path)) == ["seed_0", "seed_1"]
    again = sweep.run_seeds(preset, str(tmp_path), [0, 1, 2], prog="x")
    assert calls == [0, 1, 2]                         # seeds 0 and 1 were read back
    assert again[0] == first[0]
    (row,) = sweep.seeds_rows(again)
    values = np.array([F1[s] for s in (0, 1, 2)])
    assert row["F1 at best dev"] == pytest.approx(values.mean())
    assert row["F1 at best dev sd"] == pytest.approx(values.std(ddof=1))
    assert row["final F1"] == pytest.approx(values.mean() - 0.01)
    assert row["majority guess F1"] == 0.69 and row["seeds"] == 3
    assert sweep.mean_sd(row, "F1 at best dev") == \
        f"{values.mean():.3f} ± {values.std(ddof=1):.3f}"
    (one,) = sweep.seeds_rows({0: again[0]})   # one seed has no spread to show
    assert sweep.mean_sd(one, "F1 at best dev") == f"{F1[0]:.3f} (1 seed)"


@pytest.mark.parametrize("text,error", [("0,0", "distinct"), ("a", "integers"), ("", "distinct")])
def test_seed_lists_are_checked(text, error):
    with pytest.raises(ValueError, match=error):
        sweep.parse_seeds(text)
    assert sweep.parse_seeds("2, 0") == [2, 0]


def test_an_alpha_sweep_over_seeds_gives_means_and_sds(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(sweep.cli, "run_main", fake_run_main(calls))
    preset = {"dataset": "gad", "algorithm": "fedavgt"}
    code = sweep.run_sweep(["--alphas", "0.5", "--seeds", "0,2", "--out", str(tmp_path)],
                           preset=preset, prog="x", doc="", default_out=str(tmp_path))
    assert code == 0 and calls == [0, 2]
    assert sorted(os.listdir(tmp_path / "alpha_0.5")) == ["seed_0", "seed_2"]
    import pandas as pd
    table = pd.read_csv(tmp_path / "table.csv", index_col="algorithm")
    values = np.array([F1[0], F1[2]]) + 0.01        # max F1 of the fake runs
    assert table.loc["FedAvgT", "F1 alpha=0.5"] == pytest.approx(values.mean())
    assert table.loc["FedAvgT", "F1 sd alpha=0.5"] == pytest.approx(values.std(ddof=1))
    assert sweep.run_sweep(["--seeds", "0", "--seed", "3"], preset=preset, prog="x", doc="",
                           default_out=str(tmp_path)) == 2


def test_a_finished_run_with_other_settings_is_run_again(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(sweep.cli, "run_main", fake_run_main(calls))
    preset = {"dataset": "gad", "num_rounds": 7}
    sweep.run_seeds(preset, str(tmp_path), [0], prog="x")
    sweep.run_seeds(preset, str(tmp_path), [0], prog="x")
    assert calls == [0]                                   # the same settings: read back
    sweep.run_seeds(dict(preset, num_rounds=15), str(tmp_path), [0], prog="x")
    assert calls == [0, 0]                                # 7 rounds are not 15: run again



def test_a_resume_cut_short_is_not_read_back_as_finished(tmp_path, monkeypatch):
    """A resume with more rounds writes config.json when it starts; cut short, it leaves the
    new config.json beside the old run's summary, which must not pass for the longer run."""
    calls = []
    monkeypatch.setattr(sweep.cli, "run_main", fake_run_main(calls))
    preset = {"dataset": "gad", "num_rounds": 7}
    sweep.run_seeds(preset, str(tmp_path), [0], prog="x")
    longer = dict(preset, num_rounds=15)
    folder = str(tmp_path / "seed_0")
    write_json(os.path.join(folder, "config.json"),      # what the cut resume left
               config.resolve({"out": folder, "resume": True}, preset=dict(longer, seed=0)).values)
    sweep.run_seeds(longer, str(tmp_path), [0], prog="x")
    assert calls == [0, 0]                                # run, not read back
    summary = json.loads((tmp_path / "seed_0" / "summary.json").read_text())
    assert summary["config"]["num_rounds"] == 15
