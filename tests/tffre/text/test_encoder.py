"""TextEncoder / FeatureEncoder: encoding, save/load round trips, and errors."""

import json
import os

import numpy as np
import pytest

from tffre import resources
from tffre.data import imcs_dialogues as imcs
from tffre.text import FeatureEncoder, MedicalSegmenter, TextEncoder, Vocabulary
from tffre.text.word2vec import load_vectors

SAMPLE = resources.path("imcs_sample")


@pytest.fixture(scope="module")
def sample():
    splits = imcs.load_imcs(SAMPLE, verbose=False)
    texts = list(imcs.to_examples(splits["dev"], "symptom")["text"][:300])
    vocab = Vocabulary.from_vectors(load_vectors(os.path.join(SAMPLE, "w2v_sample.txt")))
    seg = MedicalSegmenter(terms=imcs.symptom_norms(splits["train"]))
    return texts, seg, vocab


def test_encode_is_vocab_encode_of_the_segmentation(sample):
    texts, seg, vocab = sample
    enc = TextEncoder(seg, vocab, 12)
    out = enc.encode(texts)
    assert out.dtype == np.int32 and out.shape == (len(texts), 12)
    np.testing.assert_array_equal(out, vocab.encode(seg.cut_all(texts), 12))
    with pytest.raises(TypeError, match="list of texts"):
        enc.encode("孩子咳嗽")


def test_text_encoder_round_trip(sample, tmp_path):
    texts, seg, vocab = sample
    seg.add_terms(["小儿手足口"])
    enc = TextEncoder(seg, vocab, 16)
    enc.save(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["jieba_dict.txt", "text_encoder.json", "vocab.txt"]
    lines = (tmp_path / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert lines[:-1] == vocab.tokens and lines[-1] == ""
    config = json.loads((tmp_path / "text_encoder.json").read_text())
    assert config["max_len"] == 16 and config["format_version"] == 1
    loaded = TextEncoder.load(str(tmp_path))
    assert loaded.max_len == 16 and loaded.vocab.tokens == vocab.tokens
    probe = texts + ["得了小儿手足口吗"]
    np.testing.assert_array_equal(loaded.encode(probe), enc.encode(probe))
    assert "小儿手足口" in loaded.segmenter.cut("得了小儿手足口吗")


def test_text_encoder_load_errors(sample, tmp_path):
    _, seg, vocab = sample
    TextEncoder(seg, vocab, 8).save(str(tmp_path))
    (tmp_path / "vocab.txt").write_text("咳嗽\n", encoding="utf-8")
    with pytest.raises(ValueError, match="vocab.txt: must start with"):
        TextEncoder.load(str(tmp_path))
    (tmp_path / "text_encoder.json").write_text('{"format_version": 99, "max_len": 8}')
    with pytest.raises(ValueError, match="unsupported format_version 99"):
        TextEncoder.load(str(tmp_path))
    os.remove(tmp_path / "text_encoder.json")
    with pytest.raises(FileNotFoundError, match="text_encoder.json"):
        TextEncoder.load(str(tmp_path))


def test_tokens_with_line_breaks_cannot_be_saved(tmp_path):
    enc = TextEncoder(MedicalSegmenter(dictionary=""), Vocabulary(["a\nb"]), 4)
    with pytest.raises(ValueError, match="line breaks"):
        enc.save(str(tmp_path))


def test_feature_encoder(tmp_path):
    enc = FeatureEncoder(3)
    out = enc.encode([[1, 2, 3], [0.5, -1.0, 2]])
    assert out.dtype == np.float32 and out.shape == (2, 3)
    np.testing.assert_array_equal(out[1], [0.5, -1.0, 2.0])
    with pytest.raises(ValueError, match="row 1: expected 3 features, got 2"):
        enc.encode([[1, 2, 3], [1, 2]])
    with pytest.raises(ValueError, match="row 0, feature 1: expected a number"):
        enc.encode([[1, "x", 3]])
    enc.save(str(tmp_path))
    assert json.loads((tmp_path / "feature_encoder.json").read_text())["num_features"] == 3
    assert FeatureEncoder.load(str(tmp_path)).num_features == 3
    with pytest.raises(ValueError, match="positive integer"):
        FeatureEncoder(0)
