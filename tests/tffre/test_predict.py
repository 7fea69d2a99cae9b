"""The predict command line: texts and JSON lines in, labels with probabilities out; errors."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from tffre.bundle import save_bundle
from tffre.models import logistic_regression, mean_embedding_logistic
from tffre.predict import main
from tffre.text import FeatureEncoder, MedicalSegmenter, TextEncoder, Vocabulary

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
LABELS = ["no symptom", "symptom"]


@pytest.fixture(scope="module")
def text_bundle(tmp_path_factory):
    """Mean-vector logistic model: 咳嗽/发热 -> "symptom", 你好/谢谢 -> "no symptom"."""
    vocab = Vocabulary(["咳嗽", "发热", "你好", "谢谢"])
    matrix = np.array([[0, 0], [0, 0], [1, 0], [1, 0], [0, 1], [0, 1]], np.float32)
    model = mean_embedding_logistic(2, 8, embedding_matrix=matrix)
    model.get_layer("softmax").kernel.assign(np.array([[0, 4], [4, 0]], np.float32))
    folder = str(tmp_path_factory.mktemp("predict") / "text_model")
    save_bundle(folder, model, label_names=LABELS,
                encoder=TextEncoder(MedicalSegmenter(dictionary=""), vocab, 8))
    return folder


@pytest.fixture(scope="module")
def feature_bundle(tmp_path_factory):
    model = logistic_regression(2, 2)
    model.set_weights([np.array([[3, -3], [0, 0]], np.float32), np.zeros(2, np.float32)])
    folder = str(tmp_path_factory.mktemp("predict") / "feature_model")
    save_bundle(folder, model, label_names=["pos", "neg"], encoder=FeatureEncoder(2))
    return folder


P = float(1 / (1 + np.exp(-4.0)))   # softmax of logits (4, 0)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_texts_tab_separated(capsys, text_bundle):
    code, lines, _ = run(capsys, "--model", text_bundle, "--text", "咳嗽", "--text", "谢谢")
    assert code == 0
    assert lines == [f"1\tsymptom\t{P:.4f}", f"2\tno symptom\t{P:.4f}"]


def test_top_k_and_json(capsys, text_bundle):
    code, lines, _ = run(capsys, "--model", text_bundle, "--text", "发热", "--top-k", "2")
    assert code == 0 and lines == [f"1\tsymptom\t{P:.4f}", f"1\tno symptom\t{1 - P:.4f}"]
    code, lines, _ = run(capsys, "--model", text_bundle, "--text", "你好", "--json")
    assert code == 0
    assert json.loads(lines[0]) == {"id": 1, "predictions": [
        {"label": "no symptom", "probability": round(P, 4)}]}


def test_jsonl_input_with_ids(capsys, text_bundle, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "text": "咳嗽"}\n\n{"text": "你好"}\n', encoding="utf-8")
    code, lines, _ = run(capsys, "--model", text_bundle, "--input", str(path))
    assert code == 0
    assert lines == [f"a\tsymptom\t{P:.4f}", f"3\tno symptom\t{P:.4f}"]   # default id: line


def test_feature_model(capsys, feature_bundle, tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"x": [1, 0]}\n{"id": 7, "x": [-1.5, 2]}\n')
    code, lines, _ = run(capsys, "--model", feature_bundle, "--input", str(path), "--json")
    assert code == 0
    assert [(r["id"], r["predictions"][0]["label"]) for r in map(json.loads, lines)] == \
        [(1, "pos"), (7, "neg")]


@pytest.fixture(scope="module")
def image_bundle(tmp_path_factory):
    """Mean colour -> logits: red (4, 0), blue (0, 4); the images: a red and a blue square."""
    import tensorflow as tf
    from tffre.text.encoder import ImageEncoder
    inputs = tf.keras.Input((8, 8, 3))
    pooled = tf.keras.layers.GlobalAveragePooling2D()(inputs)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(2, activation="softmax")(pooled))
    model.set_weights([np.array([[4, 0], [0, 0], [0, 4]], np.float32), np.zeros(2, np.float32)])
    root = tmp_path_factory.mktemp("predict")
    save_bundle(str(root / "image_model"), model, label_names=["red", "blue"],
                encoder=ImageEncoder(8))
    for name, colour in (("red", [255, 0, 0]), ("blue", [0, 0, 255])):
        pixels = np.tile(np.array(colour, np.uint8), (12, 12, 1))
        (root / f"{name}.png").write_bytes(tf.io.encode_png(pixels).numpy())
    return str(root / "image_model")


def test_image_model(capsys, image_bundle, tmp_path):
    """An image bundle reads "path" lines, relative to the JSON-lines file's folder."""
    images = os.path.dirname(image_bundle)
    path = os.path.join(images, "in.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"id": "b", "path": "blue.png"}\n{"path": "%s"}\n'
                % os.path.join(images, "red.png"))
    code, lines, _ = run(capsys, "--model", image_bundle, "--input", path)
    assert code == 0
    assert lines == [f"b\tblue\t{P:.4f}", f"2\tred\t{P:.4f}"]
    for content, message in [('{"path": "none.png"}', 'in.jsonl:1: field "path": no such file'),
                             ('{"text": "x"}', 'field "path" must name an image file (this is')]:
        with open(path, "w", encoding="utf-8") as f:
            f.write(content + "\n")
        code, _, err = run(capsys, "--model", image_bundle, "--input", path)
        assert code == 2 and message in err, err
    code, _, err = run(capsys, "--model", image_bundle, "--text", "x")
    assert code == 2 and "is an image model" in err


def test_module_subprocess(text_bundle, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "s1", "text": "咳嗽"}\n{"id": "s2", "text": "你好"}\n', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "tffre.predict", "--model", text_bundle,
                           "--input", str(path)], capture_output=True, text=True, env=ENV,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == [f"s1\tsymptom\t{P:.4f}", f"s2\tno symptom\t{P:.4f}"]


@pytest.mark.parametrize("content,message", [
    ('{"text": "咳嗽"}\n{"text": "x"\n', r"in\.jsonl:2: invalid JSON"),
    ('{"text": "咳嗽"}\n{"txt": "x"}\n', r'in\.jsonl:2: missing field "text"'),
    ('{"text": 5}\n', r'in\.jsonl:1: field "text" must be a string, got number'),
    ('["咳嗽"]\n', r"in\.jsonl:1: expected a JSON object, got array"),
    ('{"text": "a", "id": [1]}\n', r'in\.jsonl:1: field "id" must be a string or a number'),
])
def test_bad_jsonl_lines(capsys, text_bundle, tmp_path, content, message):
    path = tmp_path / "in.jsonl"
    path.write_text(content, encoding="utf-8")
    code, lines, err = run(capsys, "--model", text_bundle, "--input", str(path))
    assert code == 2 and lines == []
    assert len(err.strip().splitlines()) == 1
    assert re.search(message, err), err


def test_bad_feature_lines(capsys, feature_bundle, tmp_path):
    path = tmp_path / "x.jsonl"
    for content, message in [('{"x": [1]}', 'x.jsonl:1: field "x" must have 2 numbers, got 1'),
                             ('{"x": [1, "a"]}', 'field "x" item 1 must be a number'),
                             ('{"text": "咳嗽"}', 'missing field "x" (this model takes "x"')]:
        path.write_text(content + "\n", encoding="utf-8")
        code, _, err = run(capsys, "--model", feature_bundle, "--input", str(path))
        assert code == 2 and message in err, err
    code, _, err = run(capsys, "--model", feature_bundle, "--text", "咳嗽")
    assert code == 2 and "takes numeric features" in err


def test_argument_and_model_errors(capsys, text_bundle, tmp_path):
    code, _, err = run(capsys, "--model", text_bundle, "--input", str(tmp_path / "none.jsonl"))
    assert code == 2 and "input file not found" in err and "none.jsonl" in err
    code, _, err = run(capsys, "--model", str(tmp_path / "nowhere"), "--text", "咳嗽")
    assert code == 2 and "model folder not found" in err
    code, _, err = run(capsys, "--model", str(tmp_path), "--text", "咳嗽")
    assert code == 2 and "missing bundle.json" in err
    code, _, err = run(capsys, "--model", text_bundle, "--text", "a", "--input", "f.jsonl")
    assert code == 2 and "not allowed with" in err
    code, _, err = run(capsys, "--model", text_bundle)
    assert code == 2 and "one of the arguments --text --input is required" in err
    code, _, err = run(capsys, "--model", text_bundle, "--text", "a", "--top-k", "0")
    assert code == 2 and "positive integer" in err


def test_errors_come_before_tensorflow(tmp_path):
    script = ("import sys; from tffre.predict import main\n"
              f"code = main(['--model', {str(tmp_path)!r}, '--text', 'x'], prog='tffre predict')\n"
              "print(code, 'tensorflow' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV,
                          timeout=120)
    assert proc.stdout.split() == ["2", "False"], proc.stderr
    assert proc.stderr.startswith("tffre predict: error: ") and "missing bundle.json" in proc.stderr
