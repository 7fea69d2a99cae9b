"""A grid record's tables and plot (tffre.grid_report), on a record computed by hand."""

import numpy as np
import scipy.stats

from tffre import grid_report, report
from tffre.records import new_record


def run(setting, seed, dev, test):
    return {"setting": setting, "seed": seed, "metric": "accuracy", "flags": {},
            "guesses": {"majority_accuracy": 0.8},
            "algorithms": {"FedAvg": {"selected": {"round": 2, "dev": dev, "test": test,
                                                   "by": "best dev"},
                                      "rounds": {"round": [2], "dev_accuracy": [dev],
                                                 "test_accuracy": [test]}}}}


def facets(defence, faults, fault=None, faulty=0):
    return {"facets": {"defence": defence, "faults": faults, "fault": fault,
                       "faulty": faulty}}


# {setting: [(dev, test) of seeds 0, 1, 2]}; "none, clean, lr 1" loses the client-rate choice
SCORES = {"none, clean, lr 0.1": [(0.90, 0.88), (0.92, 0.90), (0.91, 0.89)],
          "none, clean, lr 1": [(0.80, 0.99), (0.81, 0.99), (0.82, 0.99)],
          "median, clean": [(0.89, 0.87), (0.90, 0.88), (0.88, 0.86)],
          "none, 3 nan": [(0.50, 0.81), (0.55, 0.80), (0.52, 0.82)],
          "median, 3 nan": [(0.85, 0.84), (0.86, 0.86), (0.87, 0.85)]}


def grid_record():
    settings = {"none, clean, lr 0.1": facets("none", "clean"),
                "none, clean, lr 1": facets("none", "clean"),
                "median, clean": facets("median", "clean"),
                "none, 3 nan": facets("none", "3 nan", "nan", 3),
                "median, 3 nan": facets("median", "3 nan", "nan", 3)}
    runs = [run(s, seed, dev, test) for s, pairs in SCORES.items()
            for seed, (dev, test) in enumerate(pairs)]
    return new_record("grid", title="grid", baseline="FedAvg", settings=settings, runs=runs,
                      choices=[{"what": "rate", "candidates": ["none, clean, lr 0.1",
                                                              "none, clean, lr 1"],
                                "algorithm": "FedAvg"}],
                      grid={"rows": "defence", "columns": "faults"})


def test_the_cells_are_the_shown_settings_laid_out_by_their_facets():
    found, rows, columns = grid_report.cells(grid_record())
    assert found == {("none", "clean"): "none, clean, lr 0.1", ("median", "clean"):
                     "median, clean", ("none", "3 nan"): "none, 3 nan",
                     ("median", "3 nan"): "median, 3 nan"}
    assert rows == ["none", "median"] and columns == ["clean", "3 nan"]


def test_the_tables_hold_the_means_the_paired_differences_and_the_best_row_by_dev():
    text = grid_report.markdown(grid_record())
    # Means ± sd by hand: none, clean (the chosen lr 0.1) 0.890 ± 0.010; median, 3 nan 0.850.
    assert "| none | 0.890 ± 0.010 | 0.810 ± 0.010 |" in text
    assert "| median | 0.870 ± 0.010 | 0.850 ± 0.010 |" in text
    assert "0.99" not in text                            # the rate dev did not choose
    # Best by dev: none on clean data (0.91 > 0.89), median under 3 nan (0.86 > 0.523).
    assert "| best by dev | none | median |" in text
    # median minus none under 3 nan, paired: +0.03, +0.06, +0.03; a t interval by scipy.
    d = np.array([0.84 - 0.81, 0.86 - 0.80, 0.85 - 0.82])
    half = scipy.stats.t.ppf(0.975, 2) * d.std(ddof=1) / np.sqrt(3)
    assert f"{d.mean():+.3f} ± {d.std(ddof=1):.3f} [{d.mean() - half:+.3f}, " \
           f"{d.mean() + half:+.3f}]: no difference shown" in text
    # On clean data: -0.01, -0.02, -0.03 (mean -0.02, sd 0.01), the cost of the median here.
    assert "-0.020 ± 0.010" in text
    assert "guess: the majority class (accuracy) 0.800" in text
    # The record's Markdown is the grid's, not a table per setting.
    assert report.markdown(grid_record()).endswith(text)


def test_the_plot_is_written(tmp_path):
    path = report.plot_curves(grid_record(), str(tmp_path / "grid.png"))
    assert path.endswith("grid.png") and (tmp_path / "grid.png").stat().st_size > 1000
