"""FedCB's tables (examples/fedcb_images.py) from hand-written run folders: the mean ± sample
sd over seeds computed by hand, the paper's cells beside them, and Table 4's prompt rows."""

import json

import pandas as pd
import pytest

from tffre.experiments import debiasing


def write_run(folder, algorithms):
    """A run folder whose summary.json holds ``algorithms``: {name: (accuracy, f1, round ms,
    bytes broadcast, bytes uploaded)}."""
    folder.mkdir(parents=True)
    summary = {"algorithms": {
        name: {"final_test_accuracy": acc, "final_test_f1": f1, "mean_round_ms": ms,
               "bytes_broadcast_per_round": down, "bytes_uploaded_per_round": up}
        for name, (acc, f1, ms, down, up) in algorithms.items()}}
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return str(folder)


@pytest.fixture
def frame(tmp_path):
    runs = [
        (0.05, 0, 1.0, write_run(tmp_path / "a", {"FedCB": (0.20, 0.10, 100, 10, 4),
                                                  "FedAvg": (0.30, 0.25, 50, 20, 8)})),
        (0.05, 1, 1.0, write_run(tmp_path / "b", {"FedCB": (0.30, 0.20, 300, 10, 4),
                                                  "FedAvg": (0.30, 0.35, 70, 20, 8)})),
        (0.1, 0, 1.0, write_run(tmp_path / "c", {"FedCB": (0.40, 0.40, 200, 10, 4),
                                                 "FedAvg": (0.10, 0.05, 60, 20, 8)})),
        # FedCB with half its prompts: Table 4 only, never Table 2 or the costs.
        (0.05, 0, 0.5, write_run(tmp_path / "d", {"FedCB": (0.90, 0.80, 9000, 90, 90)})),
    ]
    return debiasing.collect(runs)


def test_collect_reads_a_row_per_run_and_algorithm(frame):
    assert len(frame) == 7
    row = frame[(frame["beta"] == 0.05) & (frame["seed"] == 1)
                & (frame["algorithm"] == "FedAvg")].iloc[0]
    assert (row["accuracy"], row["f1"], row["prompt_fraction"]) == (0.30, 0.35, 1.0)


def test_method_table_gives_mean_and_sample_sd_beside_table_2(frame):
    table = debiasing.method_table(frame, "oct-c8").set_index("method")
    # Rows in the paper's order (FedAvg before FedCB), whatever order the runs list them in.
    assert list(table.index) == ["FedAvg", "FedCB"]
    # By hand: FedCB at beta 0.05, accuracy 20 and 30 %: mean 25, sd sqrt(2 * 5^2 / 1) = 7.07;
    # F1 10 and 20 %: 15 ± 7.07. FedAvg's accuracy 30 and 30 %: sd 0.
    assert table.loc["FedCB", "beta=0.05 accuracy"] == "25.00 ± 7.07"
    assert table.loc["FedCB", "beta=0.05 f1"] == "15.00 ± 7.07"
    assert table.loc["FedAvg", "beta=0.05 accuracy"] == "30.00 ± 0.00"
    assert table.loc["FedCB", "beta=0.05 seeds"] == 2
    # One seed at beta 0.1: its value, sd 0.
    assert table.loc["FedCB", "beta=0.1 accuracy"] == "40.00 ± 0.00"
    assert table.loc["FedCB", "beta=0.1 seeds"] == 1
    # FedCB Table 2 (OCT-C8): FedCB at beta 0.05 is 79.14 ± 3.77 accuracy, 77.13 ± 5.10 F1.
    assert table.loc["FedCB", "beta=0.05 paper accuracy"] == "79.14 ± 3.77"
    assert table.loc["FedCB", "beta=0.05 paper f1"] == "77.13 ± 5.10"
    # Kvasir-v2 reads Table 3: FedAvg at beta 0.1 is 67.02 ± 1.72.
    kvasir = debiasing.method_table(frame, "kvasir").set_index("method")
    assert kvasir.loc["FedAvg", "beta=0.1 paper accuracy"] == "67.02 ± 1.72"


def test_a_missing_figure_is_left_out_of_the_mean(tmp_path):
    runs = [(0.05, 0, 1.0, write_run(tmp_path / "a", {"FedCB": (0.20, None, 1, 1, 1)})),
            (0.05, 1, 1.0, write_run(tmp_path / "b", {"FedCB": (0.40, 0.30, 1, 1, 1)}))]
    table = debiasing.method_table(debiasing.collect(runs), "oct-c8").set_index("method")
    assert table.loc["FedCB", "beta=0.05 accuracy"] == "30.00 ± 14.14"
    assert table.loc["FedCB", "beta=0.05 f1"] == "30.00 ± 0.00"


def test_prompt_table_lists_each_fraction_beside_table_4(frame):
    table = debiasing.prompt_table(frame).set_index("prompts")
    assert list(table.index) == ["FedCB(50%)", "FedCB(100%)"]
    assert table.loc["FedCB(50%)", "beta=0.05 accuracy"] == "90.00 ± 0.00"
    assert table.loc["FedCB(100%)", "beta=0.05 accuracy"] == "25.00 ± 7.07"
    # No half-prompt run at beta 0.1.
    assert table.loc["FedCB(50%)", "beta=0.1 accuracy"] == "-"
    # FedCB Table 4: 50% of the prompts at beta 0.05, 76.82 ± 5.41; at beta 0.1, 82.40 ± 3.17.
    assert table.loc["FedCB(50%)", "beta=0.05 paper accuracy"] == "76.82 ± 5.41"
    assert table.loc["FedCB(50%)", "beta=0.1 paper accuracy"] == "82.40 ± 3.17"


def test_cost_table_averages_the_main_runs_only(frame):
    table = debiasing.cost_table(frame).set_index("algorithm")
    # FedCB: (100 + 300 + 200) / 3 = 200 ms; the half-prompt run's 9000 is not counted.
    expected = pd.DataFrame({"mean_round_ms": [200.0, 60.0],
                             "bytes_broadcast_per_round": [10.0, 20.0],
                             "bytes_uploaded_per_round": [4.0, 8.0]},
                            index=pd.Index(["FedCB", "FedAvg"], name="algorithm"))
    pd.testing.assert_frame_equal(table, expected)
