"""examples/imcs_lstm.py on the embedded sample: a short run beats the majority class, and predicts."""

import json

import pytest

BUDGET = 600   # seconds per run: a bound against a hang, not a speed test


def test_short_federated_lstm_run_beats_majority_baseline_and_predicts(tmp_path, example_here,
                                                                      cli_here):
    out = tmp_path / "imcs"
    proc = example_here("imcs_lstm.py", "--algorithm", "fedavgs,fedpap", "--num-rounds", "4",
                        "--clients", "8", "--clients-per-round", "4", "--lstm-units", "16",
                        "--out", str(out), "--no-progress", timeout=BUDGET)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    baseline = summary["majority_class_test_accuracy"]
    assert 0.6 < baseline < 0.9
    fedavgs = summary["algorithms"]["FedAvgS"]
    assert fedavgs["max_test_accuracy"] > baseline + 0.03
    # The sample has a dev split: the test accuracy at the best dev round is reported too.
    assert summary["dev_split"] == "dev" and 1 <= fedavgs["round_of_best_dev"] <= 4
    assert 0 < fedavgs["test_accuracy_at_best_dev"] <= fedavgs["max_test_accuracy"]
    for name in ("metrics.csv", "curves.png", "partition.csv", "partition.png"):
        assert (out / name).stat().st_size > 0
    # The reported figure (at the best dev round) leads; the paper's max over rounds follows.
    assert "at the round of best dev accuracy; max over rounds" in proc.stdout
    head = next(line for line in proc.stdout.splitlines() if line.startswith("algorithm"))
    assert head.index("acc@best dev") < head.index("max acc")

    # The saved model labels new text from the command line.
    model = out / "models" / "FedAvgS"
    pred = cli_here("predict", "--model", str(model), "--text", "宝宝发烧两天了", "--text", "你好",
                    timeout=300)
    assert pred.returncode == 0, pred.stderr[-2000:]
    lines = pred.stdout.strip().splitlines()
    assert len(lines) == 2
    labels = {"no present symptom", "present symptom"}
    assert all(line.split("\t")[1] in labels for line in lines)


@pytest.mark.parametrize("args,message", [
    (["--algorithm", "fedfoo"], "unknown algorithm 'fedfoo'"),
    (["--learning-rate", "-0.1"], "--learning-rate: expected a finite number >= 0"),
    (["--clients", "0"], "--clients: expected a number >= 1"),
])
def test_example_checks_arguments_before_any_work(tmp_path, args, message, example_here):
    out = tmp_path / "o"
    proc = example_here("imcs_lstm.py", *args, "--out", str(out), timeout=BUDGET)
    assert proc.returncode == 2 and message in proc.stderr
    assert not out.exists()    # no --out, partition.csv or partition.png left behind


def test_client_annotations_and_texts_stay_out_by_default(capsys):
    """The jieba dictionary uses public terms only, unless --dict-from-clients is given."""
    from argparse import Namespace
    from tffre.data import imcs_dialogues as imcs
    from tffre.tasks import imcs as job
    term = "囟门饱满"   # a norm a client annotated, not in the public dictionary
    turn = {"sentence_id": "1", "speaker": "患者", "sentence": f"孩子{term}", "dialogue_act": "Other",
            "symptom_norm": [term], "symptom_type": ["1"]}
    splits = {"train": [imcs.Dialogue("1", "train", "小儿发热", "发烧", [turn], "x.json")]}
    options = Namespace(user_dict=None, dict_from_clients=False, w2v=None,
                        w2v_from_clients=False, data="sample")
    cfg = Namespace(options=options, run=Namespace(seed=0))
    assert term not in job.segmenter_for(cfg, splits).cut(f"孩子{term}了")
    assert capsys.readouterr().out == ""
    options.dict_from_clients = True
    assert term in job.segmenter_for(cfg, splits).cut(f"孩子{term}了")
    assert "--dict-from-clients reads the clients' private" in capsys.readouterr().out
    options.dict_from_clients, options.w2v_from_clients = False, True
    kv, source = job.word_vectors(cfg, splits, job.segmenter_for(cfg, splits))
    assert "--w2v-from-clients reads the clients' private" in capsys.readouterr().out
    assert source == "pooled client texts" and kv.vector_size == 64
