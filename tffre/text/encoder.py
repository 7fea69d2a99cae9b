"""Input encoders that travel with a saved model: text -> token ids, or numeric features.

A trained model is only usable on new inputs with the preprocessing it was
trained with. :class:`TextEncoder` bundles the jieba segmenter (its merged
user dictionary), the vocabulary and the padded length; :class:`FeatureEncoder`
checks and packs numeric feature vectors. Both ``save(folder)`` to small plain
files and come back with ``load(folder)``.
"""

import os

import numpy as np

from tffre.jsonio import read_json_object, write_json
from tffre.text.segment import MedicalSegmenter
from tffre.text.vocab import Vocabulary
from tffre.errors import positive_int

FORMAT_VERSION = 1
_SPECIAL = ["<pad>", "<oov>"]


def _read_json(path):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"encoder file not found: {path}")
    config = read_json_object(path)
    if config.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported format_version {config.get('format_version')!r} "
                         f"(this tffre reads {FORMAT_VERSION})")
    return config


class TextEncoder:
    """Segments texts with jieba and maps the tokens to padded id rows.

    Args:
      segmenter: a :class:`~tffre.text.MedicalSegmenter`.
      vocab: a :class:`~tffre.text.Vocabulary`.
      max_len: tokens per row (longer texts are truncated, shorter padded with 0).
    """

    kind = "text"
    CONFIG = "text_encoder.json"
    DICTIONARY = "jieba_dict.txt"
    VOCAB = "vocab.txt"
    FILES = (CONFIG, DICTIONARY, VOCAB)

    def __init__(self, segmenter, vocab, max_len):
        self.segmenter = segmenter
        self.vocab = vocab
        self.max_len = positive_int(max_len, "max_len")

    def encode(self, texts):
        """Encodes texts as an int32 [n, max_len] array of token ids."""
        if isinstance(texts, str):  # a lone string would be encoded character by character
            raise TypeError("encode takes a list of texts, not a single string")
        return self.vocab.encode(self.segmenter.cut_all(texts), self.max_len)

    def save(self, folder):
        """Writes ``jieba_dict.txt``, ``vocab.txt`` and ``text_encoder.json`` into ``folder``."""
        bad = [t for t in self.vocab.tokens if "\n" in t or "\r" in t]
        if bad:
            raise ValueError(f"vocabulary tokens contain line breaks, vocab.txt cannot hold "
                             f"them: {bad[:3]!r}")
        os.makedirs(folder, exist_ok=True)
        self.segmenter.save_dictionary(os.path.join(folder, self.DICTIONARY))
        with open(os.path.join(folder, self.VOCAB), "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(t + "\n" for t in self.vocab.tokens))
        write_json(os.path.join(folder, self.CONFIG),
                    {"format_version": FORMAT_VERSION, "kind": self.kind,
                     "max_len": self.max_len, "vocab_size": len(self.vocab)})
        return folder

    @classmethod
    def load(cls, folder):
        """Reads an encoder written by :meth:`save`."""
        config = _read_json(os.path.join(folder, cls.CONFIG))
        max_len = positive_int(config.get("max_len"), f"{cls.CONFIG}: max_len")
        vocab_path = os.path.join(folder, cls.VOCAB)
        if not os.path.isfile(vocab_path):
            raise FileNotFoundError(f"encoder file not found: {vocab_path}")
        with open(vocab_path, encoding="utf-8", newline="") as f:
            text = f.read()
        # Split on "\n" only: str.splitlines would also break tokens at rarer separators.
        tokens = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
        if tokens[:2] != _SPECIAL:
            raise ValueError(f"{vocab_path}: must start with the lines <pad> and <oov>")
        vocab = Vocabulary(tokens[2:])
        if vocab.tokens != tokens or len(vocab) != config.get("vocab_size", len(vocab)):
            raise ValueError(f"{vocab_path}: has duplicate tokens or does not match "
                             f"vocab_size {config.get('vocab_size')}")
        segmenter = MedicalSegmenter(dictionary=os.path.join(folder, cls.DICTIONARY))
        return cls(segmenter, vocab, max_len)


class _SizeEncoder:
    """An encoder whose whole configuration is one positive int, ``FIELD``, saved as JSON."""

    kind = CONFIG = FIELD = None
    FILES = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.FILES = (cls.CONFIG,)

    def __init__(self, value):
        setattr(self, self.FIELD, positive_int(value, self.FIELD))

    def save(self, folder):
        """Writes the encoder's JSON file into ``folder``."""
        os.makedirs(folder, exist_ok=True)
        write_json(os.path.join(folder, self.CONFIG),
                   {"format_version": FORMAT_VERSION, "kind": self.kind,
                    self.FIELD: getattr(self, self.FIELD)})
        return folder

    @classmethod
    def load(cls, folder):
        """Reads an encoder written by :meth:`save`."""
        config = _read_json(os.path.join(folder, cls.CONFIG))
        return cls(positive_int(config.get(cls.FIELD), f"{cls.CONFIG}: {cls.FIELD}"))


class FeatureEncoder(_SizeEncoder):
    """Packs numeric feature vectors (a record's list ``"x"``) into a float32 array.

    Args:
      num_features: the length every vector must have.
    """

    kind = "features"
    CONFIG = "feature_encoder.json"
    FIELD = "num_features"

    def encode(self, rows):
        """Returns a float32 [n, num_features] array; ValueError names a bad row."""
        out = np.zeros((len(rows), self.num_features), np.float32)
        for i, row in enumerate(rows):
            if isinstance(row, (str, bytes)) or not hasattr(row, "__len__"):
                raise ValueError(f"row {i}: expected a list of {self.num_features} numbers, "
                                 f"got {type(row).__name__}")
            if len(row) != self.num_features:
                raise ValueError(f"row {i}: expected {self.num_features} features, "
                                 f"got {len(row)}")
            for j, v in enumerate(row):
                if isinstance(v, bool) or not isinstance(v, (int, float, np.number)):
                    raise ValueError(f"row {i}, feature {j}: expected a number, "
                                     f"got {type(v).__name__}")
            out[i] = row
        return out


class ImageEncoder(_SizeEncoder):
    """Reads image files (paths) into float32 [n, size, size, 3] in [0, 1], as training did.

    Args:
      image_size: the side every image is resized to (bilinear, antialiased).
    """

    kind = "image"
    CONFIG = "image_encoder.json"
    FIELD = "image_size"

    def encode(self, paths):
        """The images at ``paths``; an unreadable file raises ImageFolderError naming it."""
        from tffre.data.image_sets import _read_images   # TensorFlow decodes the images
        return _read_images([os.fspath(p) for p in paths], (self.image_size, self.image_size))


ENCODERS = {TextEncoder.kind: TextEncoder, FeatureEncoder.kind: FeatureEncoder,
            ImageEncoder.kind: ImageEncoder}
ENCODERS["relation"] = __import__("tffre.text.relation_tokenizer", fromlist=["RETokenizer"]).RETokenizer
ENCODERS["documents"] = __import__("tffre.text.document_features",
                                   fromlist=["DocREFeaturizer"]).DocREFeaturizer
ENCODERS["wordpieces"] = __import__("tffre.text.text_tokenizer",
                                    fromlist=["TextTokenizer"]).TextTokenizer
