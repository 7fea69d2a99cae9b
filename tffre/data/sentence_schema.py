"""The schema of sentence-level relation-extraction (RE) examples, its checks and errors.

Every sentence-level loader (:mod:`tffre.data.formats`: i2b2, BLUE, ChemProt, PGR, JSON
lines; any of them through :mod:`tffre.data.sentence_sets`) returns ``(examples, labels)``: a
pandas DataFrame with the columns :data:`COLUMNS`, in that order, and the dataset's label list
with its negative label first. One row is one candidate entity pair in one sentence:

* ``example_id`` (str) -- unique within what one call returns;
* ``text`` (str) -- the sentence;
* ``e1_start``, ``e1_end``, ``e2_start``, ``e2_end`` (int) -- character offsets into
  ``text``, end exclusive;
* ``e1_type``, ``e2_type`` (str) -- the entity types;
* ``label`` (str) -- one of the labels.

The two spans never overlap, with one exception: BLUE ChemProt marks a mention that
is both the chemical and the gene with a single ``@CHEM-GENE$``, and that example has
``e1 == e2`` (identical spans, both typed ``CHEM-GENE``). A folder of splits adds an eleventh
column, ``split`` ("train", "dev" or "test").

Bad input raises :class:`REFormatError` with a one-line message that names the file,
the 1-based line and the field or entity at fault (:data:`FILES`); a missing path raises
:class:`REFileNotFoundError`, which is both an ``REFormatError`` and a
``FileNotFoundError``. Given a list as ``problems``, the loaders are lenient instead:
each bad line (record, row) is skipped and its message appended there
(:class:`tffre.errors.collect`); errors about a whole file or folder still raise. Given a
list as ``notes``, the folder loaders append what a user should know about what was read
(an empty split file read as no split).
"""

import os

import numpy as np
import pandas as pd

from tffre.data.files import Files, is_blank, is_int
from tffre.data.splits import SPLITS
from tffre.errors import MessageFileNotFoundError, collect, one_line, show

COLUMNS = ("example_id", "text", "e1_start", "e1_end", "e2_start", "e2_end", "e1_type", "e2_type",
           "label")
SPLIT_COLUMN = "split"
OFFSET_COLUMNS = ("e1_start", "e1_end", "e2_start", "e2_end")
STRING_COLUMNS = ("example_id", "text", "e1_type", "e2_type", "label")
# The labels of the binary sets (GAD, EU-ADR, PGR): no relation, relation.
BINARY_LABELS = ("0", "1")
# The type for a ChemProt mention that is both entities; see the module docstring.
CHEM_GENE = "CHEM-GENE"


class REFormatError(ValueError):
    """Malformed relation-extraction input. The message is one line naming file, line and field."""


class REFileNotFoundError(REFormatError, MessageFileNotFoundError):
    """A file or folder an RE loader needs does not exist; the message names the path."""


FILES = Files(REFormatError, REFileNotFoundError)


def label_error(path, line, label, labels, field="label"):
    return FILES.error(path, line, f"field {field}",
                       f"unknown label {show(label)}; valid: {', '.join(labels)}")


def span_problem(text, s1, e1, s2, e2, t1, t2):
    """Why two entity spans are invalid for ``text`` as ``(field, message)``, or None if valid.

    Spans must lie in the text with start < end and must not overlap, except identical
    spans typed CHEM-GENE (BLUE's marker for one mention that is both entities).
    """
    for name, start, end in (("e1", s1, e1), ("e2", s2, e2)):
        if not 0 <= start < len(text):
            return f"{name}_start", f"{name} start {start} is outside the text (length {len(text)})"
        if not start < end <= len(text):
            return (f"{name}_end",
                    f"{name} end {end} must be > start {start} and <= text length {len(text)}")
    if max(s1, s2) < min(e1, e2):
        if (s1, e1) == (s2, e2) and t1 == t2 == CHEM_GENE:
            return None
        return ("e2_start", f"entity spans overlap: e1 [{s1}, {e1}) {show(text[s1:e1])} and "
                f"e2 [{s2}, {e2}) {show(text[s2:e2])}")
    return None


def frame(rows):
    """A DataFrame of the schema from row tuples in COLUMNS order."""
    columns = list(zip(*rows)) if rows else [()] * len(COLUMNS)
    data = {}
    for name, values in zip(COLUMNS, columns):
        data[name] = (np.asarray(values, dtype=np.int64) if name in OFFSET_COLUMNS
                      else pd.Series(list(values), dtype=object))
    return pd.DataFrame(data, columns=list(COLUMNS))


def check_examples(df, labels, source, problems=None):
    """Validates a DataFrame of the RE schema and its label list; raises REFormatError.

    ``df`` must have exactly :data:`COLUMNS`, optionally followed by ``split``
    ("train"/"dev"/"test"). Each row needs string ids, text, types and label, integer
    offsets with ``0 <= start < end <= len(text)``, spans that do not overlap (identical
    spans are allowed only when both types are ``CHEM-GENE``) and a label in ``labels``;
    example ids must be unique and ``labels`` a non-empty list of distinct strings.
    Messages read ``"{source} row {i} (example_id ...): field ...: ..."``, ``i`` 0-based.

    Returns ``df``. With a list as ``problems`` (lenient), a bad row's message is appended
    there instead and the rows without problems are returned (index reset).
    """
    if not isinstance(df, pd.DataFrame):
        raise REFormatError(f"{source}: examples must be a pandas DataFrame, got "
                            f"{type(df).__name__}")
    allowed = (list(COLUMNS), list(COLUMNS) + [SPLIT_COLUMN])
    if list(df.columns) not in allowed:
        raise REFormatError(f"{source}: columns are {list(df.columns)}; expected "
                            f"{list(COLUMNS)}, optionally followed by '{SPLIT_COLUMN}'")
    labels = list(labels) if not isinstance(labels, str) else [labels]
    if not labels or not all(isinstance(x, str) for x in labels) or len(set(labels)) < len(labels):
        raise REFormatError(f"{source}: labels must be a non-empty list of distinct strings, "
                            f"got {show(labels)}")
    known = set(labels)
    has_split = SPLIT_COLUMN in df.columns
    seen, good = {}, []
    for i, row in enumerate(df.itertuples(index=False, name=None)):
        with collect(problems, REFormatError):
            _check_row(dict(zip(df.columns, row)), i, known, labels, has_split, seen, source)
            good.append(i)
    if len(good) < len(df):
        return df.iloc[good].reset_index(drop=True)
    return df


def _check_row(values, i, known, labels, has_split, seen, source):
    """Raises the first problem of row ``i`` of :func:`check_examples`; notes its id in ``seen``."""
    eid = values["example_id"]

    def fail(field, message):
        return REFormatError(one_line(
            f"{source} row {i} (example_id {show(eid)}): field {field}: {message}"))

    for name in STRING_COLUMNS:
        if not isinstance(values[name], str):
            raise fail(name, f"must be a string, got {type(values[name]).__name__}")
    for name in OFFSET_COLUMNS:
        if not is_int(values[name]):
            raise fail(name, f"must be an integer, got {show(values[name])}")
    problem = span_problem(values["text"], *(int(values[c]) for c in OFFSET_COLUMNS),
                           values["e1_type"], values["e2_type"])
    if problem:
        raise fail(*problem)
    if values["label"] not in known:
        raise fail("label", f"unknown label {show(values['label'])}; "
                   f"valid: {', '.join(labels)}")
    if has_split and values[SPLIT_COLUMN] not in SPLITS:
        raise fail(SPLIT_COLUMN, f"unknown split {show(values[SPLIT_COLUMN])}; "
                   f"valid: {', '.join(SPLITS)}")
    if eid in seen:
        raise fail("example_id", f"duplicate example_id (also row {seen[eid]})")
    seen[eid] = i


def load_splits(folder, files, load, notes=None, problems=None):
    """{split: examples} for the split files present in ``folder``; at least one is required.

    ``files`` maps each split to its file name or a tuple of names it may have (one of
    them at most may be present); ``load`` reads one file's examples. An empty or blank file
    counts as absent: a note in ``notes``. In lenient mode a file that cannot be read at all
    is left out, its error in ``problems``.
    """
    FILES.require_folder(folder)
    frames, wanted, failed = {}, [], False
    for split, names in files.items():
        names = (names,) if isinstance(names, str) else tuple(names)
        wanted += names
        present = []
        for name in names:
            path = os.path.join(folder, name)
            if not os.path.isfile(path):
                continue
            if is_blank(path):
                if notes is not None:
                    notes.append(f"{name}: empty file, read as no {split} split")
            else:
                present.append(name)
        if len(present) > 1:
            raise FILES.error(folder, None, None, f"two {split} files, {' and '.join(present)}; "
                              "keep one")
        if present:
            with collect(problems, REFormatError):
                frames[split] = load(os.path.join(folder, present[0]))
            failed = failed or split not in frames
    if not frames and not failed:
        raise REFileNotFoundError(f"{folder}: none of {', '.join(wanted)} (or only empty ones)")
    return frames
