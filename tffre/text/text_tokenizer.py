"""A plain text's encoder inputs (``--dataset text --model encoder``): word pieces and mask.

:class:`TextTokenizer` turns texts into what
:func:`tffre.models.relation_model.build_re_model` takes with ``representation="mean"``: an
int32 array ``[n, 2, max_length]`` whose rows are

    0  input_ids       [CLS] the text's word pieces (cut to fit) [SEP] pad
    1  attention_mask  1 on the real word pieces (specials included), 0 on padding

from a Hugging Face *fast* tokenizer (the encoder folder's). It saves beside a model bundle
(``text_tokenizer.json`` and ``tokenizer/``) so that ``python -m tffre predict --text``
reads it back (kind ``"wordpieces"`` in :data:`tffre.text.encoder.ENCODERS`).

Transformers is imported only when a tokenizer is loaded, so this module is cheap to import.
"""

import os

import numpy as np

from tffre.errors import positive_int
from tffre.jsonio import write_json
from tffre.text.relation_tokenizer import (FORMAT_VERSION, check_encoder_folder,
                                           read_saved_settings)


class TextTokenizer:
    """Word pieces of whole texts, packed as ids and attention mask.

    Args:
      tokenizer: a Hugging Face fast tokenizer (``is_fast``).
      max_length: word pieces per text, the specials ([CLS], [SEP]) included; a longer text
        keeps its head.

    ``stats`` counts, over every :meth:`encode` call since construction or
    :meth:`reset_stats`, ``n`` texts and ``truncated`` (more word pieces than fit).
    """

    kind = "wordpieces"
    CONFIG = "text_tokenizer.json"
    FOLDER = "tokenizer"
    FILES = (CONFIG, os.path.join(FOLDER, "tokenizer.json"))

    def __init__(self, tokenizer, max_length=128):
        if not getattr(tokenizer, "is_fast", False):
            raise TypeError(f"TextTokenizer needs a fast (Rust) Hugging Face tokenizer, got "
                            f"{type(tokenizer).__name__}")
        self.tokenizer = tokenizer
        self.max_length = positive_int(max_length, "max_length")
        # The tokenizer's own template ([CLS] x [SEP] for BERT) around a one-piece body.
        body = tokenizer("a", add_special_tokens=False, verbose=False)["input_ids"]
        with_specials = tokenizer("a", add_special_tokens=True, verbose=False)["input_ids"]
        cut = len(with_specials) - len(body)
        start = next(i for i in range(len(with_specials))
                     if with_specials[i:i + len(body)] == body)
        self._prefix, self._suffix = with_specials[:start], with_specials[start + len(body):]
        self._window = self.max_length - cut
        if self._window < 1:
            raise ValueError(f"max_length {self.max_length} leaves no room for the text")
        pad = tokenizer.pad_token_id
        self._pad_id = 0 if pad is None else int(pad)
        self.reset_stats()

    @classmethod
    def from_pretrained(cls, folder, max_length=128):
        """The fast tokenizer of a local encoder folder (nothing downloaded);
        :class:`tffre.text.relation_tokenizer.EncoderFolderError` for a folder without
        ``config.json`` or a tokenizer."""
        folder = check_encoder_folder(folder)
        from transformers import AutoTokenizer
        return cls(AutoTokenizer.from_pretrained(folder, use_fast=True, local_files_only=True),
                   max_length)

    @property
    def vocab_size(self):
        """The tokenizer's size (the model's embedding rows at least)."""
        return len(self.tokenizer)

    def reset_stats(self):
        self.stats = {"n": 0, "truncated": 0}

    def encode(self, texts):
        """The packed int32 array ``[n, 2, max_length]`` of ``texts`` (a list of strings);
        ValueError names a text that is not a string by its row."""
        if isinstance(texts, str):   # a lone string would be encoded character by character
            raise TypeError("encode takes a list of texts, not a single string")
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValueError(f"row {i}: text must be a string, got {type(text).__name__}")
        out = np.zeros((len(texts), 2, self.max_length), np.int32)
        out[:, 0] = self._pad_id
        if not texts:
            return out
        ids = self.tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
        truncated = 0
        for row, pieces in zip(out, ids):
            truncated += len(pieces) > self._window
            packed = self._prefix + list(pieces[:self._window]) + self._suffix
            row[0, :len(packed)] = packed
            row[1, :len(packed)] = 1
        self.stats["n"] += len(texts)
        self.stats["truncated"] += int(truncated)
        return out

    def save(self, folder):
        """Writes ``tokenizer/`` (the Hugging Face tokenizer) and ``text_tokenizer.json``."""
        os.makedirs(folder, exist_ok=True)
        self.tokenizer.save_pretrained(os.path.join(folder, self.FOLDER))
        write_json(os.path.join(folder, self.CONFIG),
                   {"format_version": FORMAT_VERSION, "kind": self.kind,
                    "max_length": self.max_length, "vocab_size": self.vocab_size})
        return folder

    @classmethod
    def load(cls, folder):
        """Reads a tokenizer written by :meth:`save` (same ids for the same texts)."""
        path, config = read_saved_settings(folder, cls.FILES)
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(os.path.join(folder, cls.FOLDER),
                                                  use_fast=True, local_files_only=True)
        loaded = cls(tokenizer, positive_int(config.get("max_length"), f"{path}: max_length"))
        if loaded.vocab_size != config.get("vocab_size", loaded.vocab_size):
            raise ValueError(f"{path}: the tokenizer has {loaded.vocab_size} tokens but "
                             f"vocab_size is {config.get('vocab_size')}")
        return loaded
