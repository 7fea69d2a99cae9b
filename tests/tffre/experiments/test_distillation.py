"""FedED's Table 8 over several (B, E) settings, on hand-written runs' metrics."""

import pandas as pd

from tffre.experiments.distillation import rounds_table


def write_run(folder, curves):
    """A run folder whose metrics.csv holds ``curves`` ({algorithm: test F1 per round})."""
    folder.mkdir()
    rows = [{"algorithm": name, "round": r, "test_f1": f1}
            for name, f1s in curves.items() for r, f1 in enumerate(f1s, start=1)]
    pd.DataFrame(rows).to_csv(folder / "metrics.csv", index=False)
    return str(folder)


def test_rounds_to_the_target_per_setting_with_the_papers_rows(tmp_path):
    runs = {(4, 1): write_run(tmp_path / "B4_E1", {"FedAvgT": [0.3, 0.55, 0.6],
                                                  "FedAttT": [0.2, 0.4, 0.45],
                                                  "FedED": [0.6, 0.4, 0.7]}),
            (8, 1): write_run(tmp_path / "B8_E1", {"FedAvgT": [0.1, 0.2, 0.5],
                                                  "FedED": [0.49, 0.51, 0.2]})}
    table = rounds_table(runs, 0.5)
    assert list(table.index) == ["B=4 E=1", "B=8 E=1"]
    # By hand: the first round at or above 0.5; none reached, or no run of it: missing.
    assert table.loc["B=4 E=1", ["FedAvgT", "FedED"]].tolist() == [2, 1]
    assert table.loc["B=8 E=1", ["FedAvgT", "FedED"]].tolist() == [3, 2]
    assert pd.isna(table.loc["B=4 E=1", "FedAttT"]) and pd.isna(table.loc["B=8 E=1", "FedAttT"])
    # FedED Table 8 has B=8 E=1 (48, 48, 20 rounds on i2b2) and no B=4 E=1.
    assert table.loc["B=8 E=1", ["paper FedAvgT", "paper FedAttT", "paper FedED"]].tolist() == \
        [48, 48, 20]
    assert table.loc["B=4 E=1", ["paper FedAvgT", "paper FedED"]].isna().all()
