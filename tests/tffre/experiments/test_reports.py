"""tffre.experiments' printed tables, from hand-written summaries."""

from tffre.experiments import format_docre_report


def test_the_document_table_says_every_gold_pair_counts_and_how_many_were_unscorable():
    summary = {"dataset": "cdr", "majority_class_test_f1": 0.0, "all_positive_test_f1": 0.4722,
               "splits": {"test": {"unscorable_gold_pairs": 3}},
               "algorithms": {"FedAvg": {"test_f1_at_best_dev": 0.5, "test_precision_at_best_dev":
                                         0.4, "test_recall_at_best_dev": 2 / 3,
                                         "round_of_best_dev_f1": 2, "mean_round_ms": 10.0,
                                         "bytes_uploaded_per_round": 100.0}}}
    head, columns, row = format_docre_report(summary).splitlines()[:3]
    assert head.startswith("cdr: relations, every gold pair counted, % (test at the round of "
                           "best dev F1); 3 test gold pair(s) no candidate pair holds, counted "
                           "as misses; guessing no relation scores F1 0.00")
    assert row.split()[:5] == ["FedAvg", "40.00", "66.67", "50.00", "2"]
