"""benchmarks/robust_memory.py: each cell is a valid run as `python -m tffre run` takes it (no
TensorFlow, no data read), and a row reads a run's summary.json as the runner writes it."""

import os
import sys

import pytest

from tffre import cli, config

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import robust_memory  # noqa: E402


@pytest.mark.parametrize("executor", robust_memory.EXECUTORS)
@pytest.mark.parametrize("clients", [10, 100])
@pytest.mark.parametrize("rule", robust_memory.RULES)
def test_each_cell_resolves_with_every_client_every_round(tmp_path, clients, rule, executor):
    argv = robust_memory.cell_arguments(clients, rule, str(tmp_path / "o"), executor)
    given = vars(cli.build_run_parser().parse_args(argv))
    cfg = config.resolve({k: v for k, v in given.items() if k != "config"})
    (hparams,) = cfg.hparams.values()
    assert cfg.run.num_rounds == 2 and cfg.run.clients == cfg.run.clients_per_round == clients
    assert hparams.robust == (None if rule == "mean" else rule)
    assert cfg.run.executor == executor


def test_a_row_holds_the_rules_buffer_and_the_runs_total_peak():
    # summary.json as tffre.runner.rounds writes it: 3 clients uploading 1.5 MB in all.
    summary = {"algorithms": {"FedAvg": {"bytes_uploaded_per_round": 1.5e6}},
               "peak_rss_mib": {"python": 900.0, "tff_worker": 0.0, "total": 900.0},
               "wall_seconds": 12.0}
    mean = robust_memory.cell_row(3, "mean", summary)
    median = robust_memory.cell_row(3, "median", dict(summary, peak_rss_mib={"total": 950.0}))
    assert mean["upload_mb"] == 0.5 and mean["server_buffer_mb"] == 0.5
    assert median["server_buffer_mb"] == 1.5 and median["peak_rss_mib"] == 950.0
    table = robust_memory.markdown([mean, median]).splitlines()
    assert table[2] == "| local | 3 | mean | 0.50 | 0.5 | 900 | - | 12 |"
    assert table[3] == "| local | 3 | median | 0.50 | 1.5 | 950 | +50 | 12 |"


def test_the_committed_record_shows_what_the_robustness_page_says():
    """docs/how-to/robustness.md, "What it costs": at 100 clients a round a robust rule adds a
    few buffers' worth (under 10) on the local executor and more than 50 in TFF's worker."""
    import json
    path = os.path.join(robust_memory.ROOT, "benchmarks", "measured", "robust-memory.json")
    with open(path, encoding="utf-8") as f:
        rows = json.load(f)["rows"]
    cell = {(r["executor"], r["clients"], r["rule"]): r for r in rows}
    for rule in ("median", "krum"):
        for executor, low, high in (("local", 0, 10), ("tff", 50, None)):
            row, mean = cell[(executor, 100, rule)], cell[(executor, 100, "mean")]
            buffers = (row["peak_rss_mib"] - mean["peak_rss_mib"]) * 2**20 / (
                row["server_buffer_mb"] * 1e6)
            assert buffers > low and (high is None or buffers < high), (executor, rule, buffers)
