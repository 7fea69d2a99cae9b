"""The FLCMC paper's published figures, in one place, for side-by-side reports.

Hu and Fang, "FLCMC: Federated Learning Approach for Chinese Medicinal Text
Classification", Entropy 2024, 26(10):871.
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


def reference(dataset, model):
    """The paper's table for a (dataset, model) run.

    Returns (title, {algorithm: {"test_accuracy": value, "train_loss": value or None,
    "round_ms": value or None}}), or (None, {}) when the paper has no such table.
    """
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
    return None, {}
