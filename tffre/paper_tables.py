"""The papers' published figures, in one place, for side-by-side reports.

Hu and Fang, "FLCMC: Federated Learning Approach for Chinese Medicinal Text
Classification", Entropy 2024, 26(10):871 (Tables 8-11); FedCMC, "major
classifier vectors" for relation extraction (Table 2); FedED, ensemble
distillation for medical relation extraction (Tables 3-8); FedCB (Tables 2-4);
and FedLCC, federated document-level biomedical RE (Xiao, Jin and Hao; Tables 3-5, 7).
"""

# Table 8: synthetic(0.5, 0.5), logistic regression, Adam-type algorithms:
# (maximum test accuracy, minimum train loss).
TABLE_8 = {"FedAvgS": (0.72, 0.81), "FedAvgT": (0.71, 1.1), "FedProxP": (0.74, 0.70),
           "FedAttS": (0.79, 0.47), "FedPAP": (0.79, 0.48)}

# Table 9: IMCS-V2, logistic regression over mean word vectors: maximum accuracy.
TABLE_9 = {"FedAvg": 0.73, "FedProx": 0.73, "FedAtt": 0.75, "FedPA": 0.78,
           "FedAvgS": 0.76, "FedProxP": 0.78, "FedAttS": 0.79, "FedPAP": 0.82}

# Table 10: IMCS-V2, LSTM, Adam-type algorithms: (maximum accuracy, minimum loss).
TABLE_10 = {"FedAvgS": (0.8308, 0.0684), "FedProxP": (0.8692, 0.0010),
            "FedAttS": (0.8692, 0.0184), "FedPAP": (0.8769, 0.0005)}

# Table 11: IMCS-V2, LSTM: mean round time in milliseconds.
TABLE_11 = {"FedAvgS": 5816.91, "FedProxP": 8993.86, "FedAttS": 5762.10, "FedPAP": 8627.51}


# FedCMC Table 2: F1 (%) on 2010 i2b2/VA, ChemProt (CPR) and PGR, K = 10 clients,
# by label-skew alpha. {alpha: {algorithm: (i2b2, CPR, PGR)}}; centralised is alpha-free.
FEDCMC_TABLE_2 = {
    None: {"Centralised": (63.58, 55.7, 73.30)},
    0.5: {"FedAvg": (52.34, 45.91, 70.26), "MOON": (53.91, 44.67, 71.45),
          "FedRS": (55.79, 49.23, 72.10), "FedLC": (56.02, 48.20, 72.06),
          "FedCMC": (61.42, 53.72, 73.38)},
    0.05: {"FedAvg": (47.56, 42.82, 68.36), "MOON": (47.92, 43.06, 68.02),
           "FedRS": (51.98, 45.63, 70.49), "FedLC": (54.20, 46.91, 71.82),
           "FedCMC": (60.55, 51.21, 72.40)},
}
FEDCMC_COLUMNS = {"i2b2": 0, "chemprot": 1, "pgr": 2}
# FedCMC trains every baseline at learning rate 5e-5, an Adam-scale rate: its FedAvg is our
# FedAvgT (FedAvg with tf.keras Adam), so that row is shown beside both names.
FEDCMC_ALIASES = {"FedAvgT": "FedAvg"}


# FedED Tables 3-5: federated and centralised P / R / F1 (%), K = 100 (i2b2) or 50, C = 0.1.
# "Our" is FedED federated and the FedED model trained centrally. FedED trains at 2.5e-5, an
# Adam rate: its FedAvg and FedAtt are our FedAvgT and FedAttT.
FEDED_TABLES = {
    "gad": ("Table 3", {"FedAvgT": (69.89, 87.54, 77.73), "FedAttT": (72.14, 87.54, 79.1),
                        "FedED": (74.77, 88.61, 81.11), "Centralised": (77.58, 91.1, 83.8)}),
    "euadr": ("Table 4", {"FedAvgT": (71.43, 92.59, 80.65), "FedAttT": (72.22, 96.3, 82.54),
                          "FedED": (74.29, 96.3, 83.87), "Centralised": (78.79, 96.3, 86.67)}),
    "i2b2": ("Table 5", {"FedAvgT": (74.75, 70.48, 72.55), "FedAttT": (74.48, 71.32, 72.86),
                         "FedED": (75.4, 74.78, 75.09), "Centralised": (74.78, 80.1, 77.35)}),
}
# FedED Table 6: F1 (%) per i2b2 relation type: trained on the validation set only, FedAvg,
# FedAtt, FedED.
FEDED_TABLE_6 = {
    "TeRP": (79.74, 84.96, 85.24, 85.3), "TrAP": (67.75, 72.68, 71.55, 76.05),
    "TrCP": (43.11, 50.41, 47.73, 54.9), "PIP": (66.98, 71.07, 75.16, 73.69),
    "TeCP": (27.36, 49.41, 51.46, 58.02), "TrIP": (24.24, 23.08, 1.3, 48.03),
    "TrWP": (0.0, 0.0, 0.0, 11.97), "TrNAP": (22.54, 21.79, 18.79, 56.16)}
FEDED_TABLE_6_COLUMNS = ("validation set only", "FedAvgT", "FedAttT", "FedED")
# FedED Table 7: bytes uploaded per platform per round (the paper's units: MB, KB, B).
FEDED_TABLE_7 = {"FedAvgT": {"i2b2": 423e6, "gad": 423e6, "euadr": 423e6},
                 "FedAttT": {"i2b2": 423e6, "gad": 423e6, "euadr": 423e6},
                 "FedED": {"i2b2": 42e3, "gad": 5e3, "euadr": 323}}
# FedED Table 8 (i2b2, C = 0.1): rounds to a test F1 of 72% by local batch size B and
# epochs E; None: not reached in the allowed time.
FEDED_TABLE_8 = {(2, 1): (27, 28, 9), (8, 1): (48, 48, 20), (16, 1): (None, None, 34),
                 (2, 3): (20, 20, 7), (8, 3): (34, 30, 11), (16, 3): (47, 46, 15)}
FEDED_TABLE_8_TARGET = 0.72


# FedCB (Zhu et al.) Tables 2-5: {beta: {method: (accuracy, acc std, F1, F1 std)}} in %,
# ResNet-18, 3 trials, mean ± std. Our names: FedAvg/FedProx/FedDyn/FedRep/FedRoD/FedETF/FedCB.
FEDCB_TABLE_2 = {  # OCT-C8, 12 clients
    0.05: {"FedAvg": (74.82, 5.98, 72.34, 6.87), "FedDyn": (70.79, 1.94, 65.88, 5.12),
           "FedProx": (76.60, 5.43, 74.49, 6.12), "FedRep": (43.87, 7.24, 32.98, 8.83),
           "FedRoD": (70.20, 4.17, 64.24, 4.21), "FedETF": (77.79, 5.17, 74.47, 8.64),
           "FedCB": (79.14, 3.77, 77.13, 5.10)},
    0.1: {"FedAvg": (78.64, 5.44, 76.25, 7.23), "FedDyn": (73.46, 5.49, 69.86, 7.96),
          "FedProx": (78.37, 5.76, 75.64, 7.68), "FedRep": (59.37, 12.81, 55.20, 12.56),
          "FedRoD": (79.11, 5.62, 77.65, 7.17), "FedETF": (82.81, 3.76, 81.67, 5.31),
          "FedCB": (85.00, 2.66, 84.56, 2.99)}}
FEDCB_TABLE_3 = {  # Kvasir-v2, 10 clients
    0.05: {"FedAvg": (60.10, 5.76, 54.07, 9.58), "FedDyn": (55.20, 3.03, 49.84, 3.86),
           "FedProx": (59.68, 2.02, 53.11, 3.26), "FedRep": (33.06, 15.71, 23.88, 13.72),
           "FedRoD": (61.79, 2.72, 58.83, 3.40), "FedETF": (63.77, 3.73, 60.12, 6.34),
           "FedCB": (65.00, 4.36, 61.67, 6.61)},
    0.1: {"FedAvg": (67.02, 1.72, 63.93, 2.49), "FedDyn": (63.18, 2.19, 60.98, 1.41),
          "FedProx": (68.77, 1.45, 66.81, 2.53), "FedRep": (48.95, 0.62, 39.71, 2.50),
          "FedRoD": (70.10, 3.70, 68.01, 5.71), "FedETF": (69.70, 3.56, 67.15, 6.64),
          "FedCB": (70.90, 1.97, 68.73, 3.36)}}
FEDCB_TABLE_4 = {  # OCT-C8: FedCB with a fraction of the prompts
    0.05: {0.25: (76.64, 6.26, 76.05, 6.48), 0.5: (76.82, 5.41, 76.54, 4.88),
           0.75: (77.70, 3.53, 75.71, 4.51), 1.0: (79.14, 3.77, 77.13, 5.10)},
    0.1: {0.25: (83.71, 2.83, 83.45, 3.05), 0.5: (82.40, 3.17, 82.23, 3.30),
          0.75: (84.12, 4.18, 83.39, 4.79), 1.0: (85.00, 2.66, 84.56, 2.99)}}
FEDCB_TABLES = {"oct-c8": ("Table 2", FEDCB_TABLE_2), "kvasir": ("Table 3", FEDCB_TABLE_3)}


def fedcb_reference(dataset, beta):
    """(title, {method: (acc, acc std, F1, F1 std)}) of FedCB's table for ``dataset`` at
    ``beta``, or (None, {})."""
    if dataset not in FEDCB_TABLES or beta not in FEDCB_TABLES[dataset][1]:
        return None, {}
    title, table = FEDCB_TABLES[dataset]
    return f"FedCB {title} ({dataset}, beta = {beta})", table[beta]


# FedLCC Tables 3-5: P / R / F1 (%) on CDR, CHR and GDA, C = 10 clients, all clients each round;
# {dataset: (table, {setting: {method: (P, R, F1)}})}. Settings: "centralised" (the paper's
# "Our"; the centralised baselines of other papers are left out), "iid" and
# "structural-entropy" (the paper's "Non-IID"). None: not given. The paper trains every method
# with Adam (lr 2.5e-5): its FedAvg and FedAtt are our FedAvg and FedAtt rows with
# --local-optimizer adam. The paper reports no MOON row and no intra/inter-sentence split.
FEDLCC_TABLES = {
    "cdr": ("Table 3", {
        "centralised": {"Centralised": (63.00, 74.11, 68.10)},
        "iid": {"FedAvg": (69.57, 60.23, 64.55), "FedAtt": (66.83, 64.63, 65.71),
                "FedLCC": (69.56, 65.85, 67.66)},
        "structural-entropy": {"FedAvg": (64.05, 62.01, 63.01), "FedAtt": (65.93, 61.35, 63.56),
                               "FedLCC": (65.54, 65.67, 65.60)}}),
    "chr": ("Table 4", {
        "centralised": {"Centralised": (89.03, 91.13, 90.07)},
        "iid": {"FedAvg": (90.78, 90.82, 90.80), "FedAtt": (90.88, 90.47, 90.68),
                "FedLCC": (91.84, 92.14, 91.99)},
        "structural-entropy": {"FedAvg": (88.62, 90.91, 90.23), "FedAtt": (89.44, 90.93, 90.18),
                               "FedLCC": (89.18, 93.22, 91.15)}}),
    "gda": ("Table 5", {
        "centralised": {"Centralised": (82.26, 87.35, 84.73)},
        "iid": {"FedAvg": (81.37, 86.95, 84.07), "FedAtt": (82.97, 87.55, 85.20),
                "FedLCC": (83.17, 86.55, 84.83)},
        "structural-entropy": {"FedAvg": (78.83, 86.02, 82.27), "FedAtt": (80.27, 85.89, 82.98),
                               "FedLCC": (82.62, 86.09, 84.32)}}),
}
# FedLCC Table 7 (appendix): DocRED, IID only, on the dev set: (Dev Ign F1, Dev F1) in %.
FEDLCC_TABLE_7 = {"Centralised": (59.55, 61.64), "FedAvg": (50.82, 51.95),
                  "FedAtt": (52.03, 53.22), "FedLCC": (55.56, 56.34)}


def fedlcc_reference(dataset, partition):
    """(title, {method: {"precision", "recall", "test_f1"[, "ign_f1"]}} as fractions) of
    FedLCC's table for ``dataset`` ("cdr", "gda", "chr", "docred") and ``partition``
    ("iid" or "structural-entropy"), the centralised row included; (None, {}) when the
    paper has none."""
    if dataset == "docred":
        if partition != "iid":
            return None, {}
        return "FedLCC Table 7 (DocRED dev, IID)", {
            k: {"precision": None, "recall": None, "test_f1": f / 100, "ign_f1": i / 100}
            for k, (i, f) in FEDLCC_TABLE_7.items()}
    if dataset not in FEDLCC_TABLES or partition not in ("iid", "structural-entropy"):
        return None, {}
    title, settings = FEDLCC_TABLES[dataset]
    rows = {**settings["centralised"], **settings[partition]}
    split = "IID" if partition == "iid" else "Non-IID (structural entropy)"
    return f"FedLCC {title} ({dataset.upper()}, {split})", {
        k: {"precision": p / 100, "recall": r / 100, "test_f1": f / 100}
        for k, (p, r, f) in rows.items()}


def reference(dataset, model, alpha=None, algorithms=(), partition=None):
    """The paper's table for a (dataset, model) run.

    Returns (title, {algorithm: {"test_accuracy": value, "train_loss": value or None,
    "round_ms": value or None}}), or (None, {}) when the paper has no such table.
    A relation run that includes FedED (``algorithms``) is compared with FedED's
    tables; other relation runs with FedCMC Table 2; document-level runs (cdr, gda, chr,
    docred) with FedLCC's table for their ``partition``.
    """
    if dataset in FEDLCC_TABLES or dataset == "docred":
        title, rows = fedlcc_reference(dataset, partition)
        return title, {k: {**v, "test_accuracy": None, "train_loss": None, "round_ms": None}
                       for k, v in rows.items()}
    if "FedED" in algorithms and dataset in FEDED_TABLES:
        title, rows = FEDED_TABLES[dataset]
        return f"FedED {title} ({dataset})", {
            k: {"test_f1": f / 100, "precision": p / 100, "recall": r / 100,
                "test_accuracy": None, "train_loss": None, "round_ms": None}
            for k, (p, r, f) in rows.items()}
    if dataset in FEDCB_TABLES:
        title, rows = fedcb_reference(dataset, alpha)
        return title, {k: {"test_accuracy": a / 100, "test_f1": f / 100, "train_loss": None,
                           "round_ms": None} for k, (a, _, f, _) in rows.items()}
    if dataset == "synthetic" and model == "logistic":
        return "Table 8", {k: {"test_accuracy": a, "train_loss": l, "round_ms": None}
                           for k, (a, l) in TABLE_8.items()}
    if dataset == "imcs" and model == "lstm":
        return "Tables 10-11", {k: {"test_accuracy": a, "train_loss": l,
                                    "round_ms": TABLE_11.get(k)}
                                for k, (a, l) in TABLE_10.items()}
    if dataset == "imcs" and model == "mean-logistic":
        return "Table 9", {k: {"test_accuracy": a, "train_loss": None, "round_ms": None}
                           for k, a in TABLE_9.items()}
    if dataset in FEDCMC_COLUMNS:
        col = FEDCMC_COLUMNS[dataset]
        rows = {**FEDCMC_TABLE_2[None], **FEDCMC_TABLE_2.get(alpha, {})}
        rows.update({ours: rows[theirs] for ours, theirs in FEDCMC_ALIASES.items()
                     if theirs in rows})
        return f"FedCMC Table 2 ({dataset}, K = 10, alpha = {alpha})", {
            k: {"test_f1": v[col] / 100, "test_accuracy": None, "train_loss": None,
                "round_ms": None} for k, v in rows.items()}
    return None, {}
