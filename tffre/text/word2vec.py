"""Word2Vec vectors through gensim: load pretrained, train on a corpus you name, save.

Train vectors on a public corpus (plain text, one document per line, or IMCS
JSON files) and write them in word2vec text or binary format:

    python -m tffre.text.word2vec --corpus my_corpus.txt --out vectors.txt [--binary] [--dim 100]

Privacy: in federated runs the vocabulary and vectors come from a public
source (pretrained vectors such as Chinese-Word2vec-Medicine, or a public
corpus), never from pooling the clients' private training texts on a server.
"""

import argparse
import json
import os
import sys

from gensim.models import KeyedVectors, Word2Vec

from tffre.text.segment import MedicalSegmenter


def load_vectors(path):
    """Loads word2vec vectors in text or binary format (binary if ``.bin``, else tried both).

    Raises ValueError naming the file if neither format parses.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"word vectors not found: {path}")
    order = (True, False) if path.endswith(".bin") else (False, True)
    errors = []
    for binary in order:
        try:
            return KeyedVectors.load_word2vec_format(path, binary=binary, unicode_errors="ignore")
        except Exception as err:  # gensim raises several types on a format mismatch
            errors.append(f"{'binary' if binary else 'text'}: {err}")
    raise ValueError(f"{path}: not word2vec text or binary format ({'; '.join(errors)})")


def save_vectors(keyed_vectors, path, binary=False):
    """Writes vectors in word2vec text (default) or binary format."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    keyed_vectors.save_word2vec_format(path, binary=binary)
    return path


def train_word2vec(token_lists, vector_size=100, window=5, min_count=1, epochs=10, seed=0):
    """Trains skip-gram Word2Vec on segmented sentences; returns ``KeyedVectors``.

    One worker thread, so the same seed gives the same vectors.
    """
    model = Word2Vec(sentences=token_lists, vector_size=vector_size, window=window,
                     min_count=min_count, sg=1, epochs=epochs, seed=seed, workers=1)
    return model.wv


def read_corpus(paths, segmenter):
    """Segmented sentences from plain-text files (a line each) or IMCS JSON files."""
    sentences = []
    for path in paths:
        if path.endswith(".json"):
            with open(path, encoding="utf-8") as f:
                records = json.load(f)
            for record in records.values():
                texts = [record.get("self_report", record.get("self-report", ""))]
                texts += [t.get("sentence", "") for t in record.get("dialogue", [])]
                sentences += [segmenter.cut(t) for t in texts if t]
        else:
            with open(path, encoding="utf-8") as f:
                sentences += [segmenter.cut(line) for line in f if line.strip()]
    return [s for s in sentences if s]


def train_word2vec_on_files(paths, out, vector_size=100, binary=False, seed=0, epochs=10,
                            dictionary=None):
    """Segments the corpus files with the medical dictionary, trains and saves vectors."""
    segmenter = MedicalSegmenter(dictionary)
    sentences = read_corpus(paths, segmenter)
    if not sentences:
        raise ValueError(f"no text found in {', '.join(paths)}")
    kv = train_word2vec(sentences, vector_size=vector_size, seed=seed, epochs=epochs)
    return save_vectors(kv, out, binary=binary)


def main(argv=None):
    """``python -m tffre.text.word2vec``: train vectors on a corpus you name."""
    parser = argparse.ArgumentParser(prog="python -m tffre.text.word2vec",
                                     description="Train Word2Vec vectors on a public corpus.")
    parser.add_argument("--corpus", nargs="+", required=True,
                        help="text files (one document per line) or IMCS JSON files")
    parser.add_argument("--out", required=True, help="output vectors file")
    parser.add_argument("--binary", action="store_true", help="word2vec binary format")
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for path in args.corpus:
        if not os.path.isfile(path):
            parser.exit(2, f"{parser.prog}: error: --corpus: no such file: {path}\n")
    out = train_word2vec_on_files(args.corpus, args.out, vector_size=args.dim,
                                  binary=args.binary, seed=args.seed, epochs=args.epochs)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
