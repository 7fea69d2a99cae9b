"""FedLCC Tables 3-5 from finished document-level RE runs (``examples/docre_cdr.py``)."""

import os

from tffre import paper_tables
from tffre.jsonio import read_json_object

SETTINGS = {"iid": "Federated Training (IID)",
            "structural-entropy": "Federated Training (Non-IID)"}


def results_table(runs):
    """FedLCC Tables 3-5's layout from finished runs: one row per (setting, method).

    ``runs``: [(partition, run folder)], each a :func:`tffre.experiments.run` output
    (``summary.json``). Columns: setting, method, our P / R / F1 (%, the test scores at the
    round of best dev F1), that round, our intra-/inter-sentence F1 (and Ign F1 where
    scored), and the paper's P / R / F1 for the dataset and setting ("-" where it has none:
    MOON, any intra/inter split). A centralised run is listed once, as "Centralised
    Training".
    """
    import pandas as pd
    rows, centralised = [], False
    for part, folder in runs:
        summary = read_json_object(os.path.join(folder, "summary.json"), ValueError)
        dataset = summary["config"]["dataset"]
        _, paper = paper_tables.fedlcc_reference(dataset, part)
        for name, s in summary["algorithms"].items():
            if name == "Centralised":
                if centralised:
                    continue
                centralised = True
            row = {"setting": "Centralised Training" if name == "Centralised"
                   else SETTINGS.get(part, part), "method": name}
            for key in ("precision", "recall", "f1", "intra_f1", "inter_f1", "ign_f1"):
                value = s.get(f"test_{key}_at_best_dev")
                row[key] = None if value is None else round(100 * value, 2)
            row["round"] = s.get("round_of_best_dev_f1")
            ref = paper.get(name, {})
            for key, out in (("precision", "paper P"), ("recall", "paper R"),
                             ("test_f1", "paper F1")):
                row[out] = None if ref.get(key) is None else round(100 * ref[key], 2)
            rows.append(row)
    table = pd.DataFrame(rows)
    if "ign_f1" in table and table["ign_f1"].isna().all():
        table = table.drop(columns="ign_f1")   # Ign F1 is DocRED's
    return table
