"""``--dataset text --model encoder``: a tiny random BERT (tests/tffre/tiny_encoder.py, never a
download) over the texts' word pieces, mean-pooled, learns a learnable fixture above the
majority guess and its bundle predicts through ``python -m tffre predict``; the split encoder
(``--trainable-layers``, ``--lora-rank``) trains only its top; each model's options are
refused with the other; the word pieces are packed as the Hugging Face tokenizer cuts them."""

import json
import os
import sys

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir))
from tiny_encoder import VOCAB, make_encoder_folder  # noqa: E402

from tffre import cli  # noqa: E402
from tffre import config as config_lib  # noqa: E402
from tffre import tasks  # noqa: E402
from tffre.errors import ConfigError  # noqa: E402
from tffre.predict import main as predict_main  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "fixtures", "texts")
NOTES = os.path.abspath(os.path.join(FIXTURES, "encoder_notes.csv"))
ARGS = ["--dataset", "text", "--model", "encoder", "--data", NOTES, "--algorithm", "FedAvg",
        "--max-len", "12", "--dev-fraction", "0", "--clients-per-round", "2",
        "--learning-rate", "0.01", "--num-iters", "3", "--executor", "local",
        "--checkpoint-every", "0", "--no-progress"]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    folder, _ = make_encoder_folder(str(tmp_path_factory.mktemp("enc") / "tiny"),
                                    weights="safetensors")
    return folder


def test_test_split_is_balanced():
    test = pd.read_csv(NOTES).query("split == 'test'")
    assert sorted(test["label"]) == ["cardiac", "cardiac", "respiratory", "respiratory"]


def test_the_encoder_learns_and_predict_reads_its_bundle(encoder, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.run_main(ARGS + ["--encoder", encoder, "--num-rounds", "4",
                                "--out", str(out)]) == 0
    metrics = pd.read_csv(out / "metrics.csv")
    assert metrics["train_loss"].iloc[-1] < metrics["train_loss"].iloc[0]
    assert metrics["test_accuracy"].max() > 0.5   # the majority guess of the 2 + 2 test texts
    bundle = out / "models" / "FedAvg"
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["encoder"] == "wordpieces" and manifest["metadata"]["model"] == "encoder"
    # predict on the test texts: its labels score the saved round's test accuracy
    test = pd.read_csv(NOTES).query("split == 'test'")
    capsys.readouterr()
    argv = ["--model", str(bundle), "--json"]
    for text in test["text"]:
        argv += ["--text", text]
    assert predict_main(argv) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    predicted = [line["predictions"][0]["label"] for line in lines]
    saved = metrics.set_index("round").loc[manifest["metadata"]["round"], "test_accuracy"]
    assert np.mean(np.asarray(predicted) == test["label"].to_numpy()) == pytest.approx(saved)


def prepared(encoder, tmp_path, **extra):
    cfg = config_lib.resolve({"dataset": "text", "model": "encoder", "data": NOTES,
                              "encoder": encoder, "algorithm": "FedAvg", "max_len": 12,
                              "dev_fraction": 0, "clients_per_round": 2,
                              "out": str(tmp_path / "out"), **extra})
    task = tasks.task_of("text")
    task.check(cfg)
    return task.prepare(cfg)


@pytest.mark.parametrize("flag, value, trains", [
    ("--trainable-layers", "1", ("encoder_top/encoder/layer_._0/", "classifier/")),
    ("--lora-rank", "2", ("lora_a", "lora_b", "classifier/"))])
def test_a_split_encoder_trains_only_its_top(encoder, tmp_path, flag, value, trains):
    job = prepared(encoder, tmp_path, **{flag[2:].replace("-", "_"): int(value)})
    x = job.data.clients["A"]["train"][0]
    assert x["hidden"].shape == (10, 12, 32) and x["inputs"].shape == (10, 2, 12)
    names = [v.name for v in job.model.model_fn().trainable_variables]
    assert names and all(any(t in n for t in trains) for n in names)
    assert not any("embeddings" in n for n in names)
    out = tmp_path / "run"
    assert cli.run_main(ARGS + ["--encoder", encoder, flag, value, "--num-rounds", "3",
                                "--out", str(out)]) == 0
    metrics = pd.read_csv(out / "metrics.csv")
    assert metrics["train_loss"].iloc[-1] < metrics["train_loss"].iloc[0]
    assert (out / "models" / "FedAvg" / "text_tokenizer.json").is_file()


@pytest.mark.parametrize("model, option, value, message", [
    ("lstm", "lora_rank", 2, "--lora-rank applies with --model encoder"),
    ("lstm", "encoder", "x", "--encoder applies with --model encoder"),
    ("encoder", "lstm_units", 4, "--lstm-units applies with --model lstm")])
def test_each_models_options_are_refused_with_the_other(encoder, tmp_path, model, option,
                                                         value, message):
    given = {"dataset": "text", "model": model, "data": NOTES, "out": str(tmp_path / "out"),
             **({"encoder": encoder} if model == "encoder" else {}), option: value}
    with pytest.raises(ConfigError) as err:   # the options' check, as the command line's
        config_lib.resolve(given)
    assert str(err.value) == message


def test_the_word_pieces_are_packed_with_cls_and_sep(encoder, tmp_path):
    from tffre.text.encoder import ENCODERS
    from tffre.text.text_tokenizer import TextTokenizer
    tokenizer = TextTokenizer.from_pretrained(encoder, max_length=5)
    x = tokenizer.encode(["chest pain", "the patient was given aspirin"])
    ids = {t: i for i, t in enumerate(VOCAB)}   # the tiny vocabulary's ids, by hand
    np.testing.assert_array_equal(x[0], [[ids["[CLS]"], ids["chest"], ids["pain"],
                                          ids["[SEP]"], ids["[PAD]"]], [1, 1, 1, 1, 0]])
    np.testing.assert_array_equal(x[1], [[ids["[CLS]"], ids["the"], ids["patient"], ids["was"],
                                          ids["[SEP]"]], [1, 1, 1, 1, 1]])
    assert tokenizer.stats == {"n": 2, "truncated": 1}
    again = ENCODERS["wordpieces"].load(tokenizer.save(str(tmp_path / "saved")))
    np.testing.assert_array_equal(again.encode(["chest pain"]), x[:1])


def test_a_run_saved_before_the_encoder_options_resumes(tmp_path):
    """A config.json without the encoder's options (an LSTM run of an earlier tffre) is the
    same run: an absent option is compared at its default, a saved other value is not."""
    from tffre.jsonio import json_safe
    cfg = config_lib.resolve({"dataset": "text", "data": NOTES, "out": str(tmp_path / "o")})
    saved = {k: v for k, v in json_safe(cfg.values).items()
             if k not in ("encoder", "lora_targets", "lora_init", "trainable_layers")}
    assert config_lib.differences(saved, cfg) == []
    changed = dict(saved, lora_init="kaiming")
    assert config_lib.differences(changed, cfg) == ["--lora-init 'kaiming' -> 'gaussian'"]
