"""Word2Vec save/load in text and binary format, training, and the training command."""

import subprocess
import sys

import numpy as np
import pytest

from tffre.text import Vocabulary
from tffre.text.word2vec import load_vectors, save_vectors, train_word2vec

SENTENCES = [["宝宝", "咳嗽", "三天"], ["不", "咳嗽"], ["发热", "两天", "了"], ["咳嗽", "发热"]] * 20


@pytest.mark.parametrize("binary,name", [(False, "v.txt"), (True, "v.bin"), (True, "v.vec")])
def test_save_and_load_round_trip(tmp_path, binary, name):
    kv = train_word2vec(SENTENCES, vector_size=8, seed=1, epochs=2)
    path = save_vectors(kv, str(tmp_path / name), binary=binary)
    loaded = load_vectors(path)
    assert loaded.index_to_key == kv.index_to_key
    np.testing.assert_allclose(loaded.vectors, kv.vectors, atol=1e-5)


def test_training_is_seeded():
    a = train_word2vec(SENTENCES, vector_size=8, seed=3, epochs=2)
    b = train_word2vec(SENTENCES, vector_size=8, seed=3, epochs=2)
    np.testing.assert_array_equal(a.vectors, b.vectors)


def test_unreadable_vectors_name_the_file(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("this is not\na vectors file\n")
    with pytest.raises(ValueError, match="bad.txt: not word2vec"):
        load_vectors(str(bad))


def test_train_command_on_a_named_corpus(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("宝宝咳嗽三天了\n医生说是支气管肺炎\n不咳嗽也不发烧\n" * 10, encoding="utf-8")
    out = tmp_path / "vec.bin"
    proc = subprocess.run([sys.executable, "-m", "tffre.text.word2vec", "--corpus", str(corpus),
                           "--out", str(out), "--binary", "--dim", "16", "--epochs", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-1500:]
    kv = load_vectors(str(out))
    assert kv.vector_size == 16 and "支气管肺炎" in kv.key_to_index


def test_vocabulary_encoding_and_embedding_matrix():
    kv = train_word2vec(SENTENCES, vector_size=4, seed=0, epochs=1)
    vocab = Vocabulary.from_vectors(kv)
    ids = vocab.encode([["咳嗽", "未知词"], ["宝宝", "咳嗽", "三天", "发热"]], max_len=3)
    assert ids.dtype == np.int32 and ids.shape == (2, 3)
    assert ids[0, 1] == 1 and ids[0, 2] == 0        # OOV = 1, padding = 0
    assert ids[1].tolist() == [vocab.index["宝宝"], vocab.index["咳嗽"], vocab.index["三天"]]
    matrix = vocab.embedding_matrix(kv)
    np.testing.assert_array_equal(matrix[0], 0)
    np.testing.assert_allclose(matrix[vocab.index["发热"]], kv["发热"])
    assert vocab.oov_rate([["咳嗽", "未知词"]]) == 0.5
