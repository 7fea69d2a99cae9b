"""Sentence-level relation-extraction (RE) loaders: i2b2 2010, BLUE/BioBERT TSV, PGR, JSON lines.

Every loader returns ``(examples, labels)``: a pandas DataFrame with the columns
:data:`COLUMNS`, in that order, and the dataset's label list with its negative label
first. One row is one candidate entity pair in one sentence:

* ``example_id`` (str) -- unique within what one call returns;
* ``text`` (str) -- the sentence;
* ``e1_start``, ``e1_end``, ``e2_start``, ``e2_end`` (int) -- character offsets into
  ``text``, end exclusive;
* ``e1_type``, ``e2_type`` (str) -- the entity types;
* ``label`` (str) -- one of the labels.

The two spans never overlap, with one exception: BLUE ChemProt marks a mention that
is both the chemical and the gene with a single ``@CHEM-GENE$``, and that example has
``e1 == e2`` (identical spans, both typed ``CHEM-GENE``). :func:`load_re` on a folder
of splits adds an eleventh column, ``split`` ("train", "dev" or "test").

Sources, read in the formats their authors publish:

* :func:`load_i2b2` -- i2b2/n2c2 2010 relations: ``txt/``, ``concept/``, ``rel/``.
* :func:`load_blue_tsv`, :func:`load_blue_folder` -- GAD, EU-ADR (BioBERT) and
  ChemProt (BLUE), entities blinded as ``@GENE$``-style placeholders.
* :func:`load_scibert_chemprot` -- ChemProt as SciBERT ships it (GitHub allenai/scibert,
  ``data/text_classification/chemprot/{train,dev,test}.txt``): JSON lines with ``<< >>``
  and ``[[ ]]`` entity markers and ChemProt's raw relation types.
* :func:`load_pgr` -- PGR, Phenotype-Gene Relations (Sousa et al. 2019, GitHub
  lasigeBioTM/PGR ``corpora/*/{train,test}.tsv``).
* :func:`load_jsonl` -- this project's generic format, one example per JSON line.
* :func:`load_re` -- any of these from a file or a folder of splits;
  :func:`load_relation_splits` -- the train/dev/test examples a run uses, gaps filled by
  :func:`tffre.data.splits.complete_splits`.

Bad input raises :class:`REFormatError` with a one-line message that names the file,
the 1-based line and the field or entity at fault; a missing path raises
:class:`REFileNotFoundError`, which is both an ``REFormatError`` and a
``FileNotFoundError``. Given a list as ``problems``, the loaders are lenient instead:
each bad line (record, row) is skipped and its message appended there
(:class:`tffre.errors.collect`); errors about a whole file or folder still raise. Given a
list as ``notes``, the folder loaders append what a user should know about what was read
(an empty split file read as no split).
"""

import html
import json
import os
import re
import warnings

import numpy as np
import pandas as pd

from tffre.data.splits import DEV_FRACTION, SPLITS, TEST_FRACTION, complete_splits
from tffre.errors import (MessageFileNotFoundError, collect, one_line, read_utf8, show,
                          text_lines)

COLUMNS = ("example_id", "text", "e1_start", "e1_end", "e2_start", "e2_end", "e1_type", "e2_type",
           "label")
SPLIT_COLUMN = "split"
OFFSET_COLUMNS = ("e1_start", "e1_end", "e2_start", "e2_end")
STRING_COLUMNS = ("example_id", "text", "e1_type", "e2_type", "label")
DATASETS = ("i2b2", "gad", "euadr", "chemprot", "pgr", "jsonl")

I2B2_RELATIONS = ("TrIP", "TrWP", "TrCP", "TrAP", "TrNAP", "TeRP", "TeCP", "PIP")
I2B2_LABELS = ("None",) + I2B2_RELATIONS
I2B2_CONCEPT_TYPES = ("problem", "test", "treatment")
CHEMPROT_LABELS = ("false", "CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9")
# ChemProt's relation types and the group (CPR class) each belongs to, after the ChemProt
# annotation guidelines (Krallinger et al. 2017, BioCreative VI Track 5, CHEMPROT guidelines
# v6, Zenodo record 4957138). Only CPR:3, 4, 5, 6 and 9 are evaluated ("Overview of the
# BioCreative VI chemical-protein interaction Track", Krallinger et al. 2017), and SciBERT's
# copy holds exactly the 13 types of those groups.
CHEMPROT_GROUPS = {
    "UPREGULATOR": "CPR:3", "ACTIVATOR": "CPR:3", "INDIRECT-UPREGULATOR": "CPR:3",
    "DOWNREGULATOR": "CPR:4", "INHIBITOR": "CPR:4", "INDIRECT-DOWNREGULATOR": "CPR:4",
    "AGONIST": "CPR:5", "AGONIST-ACTIVATOR": "CPR:5", "AGONIST-INHIBITOR": "CPR:5",
    "ANTAGONIST": "CPR:6",
    "SUBSTRATE": "CPR:9", "PRODUCT-OF": "CPR:9", "SUBSTRATE_PRODUCT-OF": "CPR:9",
}
# raw_labels=True: the 13 types, after the negative label (SciBERT's copy has no negative).
CHEMPROT_RAW_LABELS = ("false",) + tuple(CHEMPROT_GROUPS)
# SciBERT's entity markers, "<< " ... " >>" (e1) and "[[ " ... " ]]" (e2), each with one space
# inside; they mark the two entities in text order, not which is the chemical, so both are
# typed SCIBERT_TYPE.
SCIBERT_MARKERS = (("<< ", " >>"), ("[[ ", " ]]"))
SCIBERT_TYPE = "ENTITY"
BINARY_LABELS = ("0", "1")
# Negative labels that load_jsonl puts first when it infers the label list, in this priority.
NEGATIVE_LABELS = ("None", "false", "0")

# The type for a ChemProt mention that is both entities; see the module docstring.
CHEM_GENE = "CHEM-GENE"
BLUE_HEADER = "index\tsentence\tlabel"
BLUE_TASKS = {
    # task: (labels, placeholder types the task's sentences may hold)
    "gad": (BINARY_LABELS, ("GENE", "DISEASE")),
    "euadr": (BINARY_LABELS, ("GENE", "DISEASE")),
    "chemprot": (CHEMPROT_LABELS, ("CHEMICAL", "GENE", CHEM_GENE)),
}
BLUE_SPLIT_FILES = {split: f"{split}.tsv" for split in SPLITS}
# A ChemProt folder: BLUE's TSV files or SciBERT's JSON lines.
CHEMPROT_SPLIT_FILES = {split: (f"{split}.tsv", f"{split}.txt") for split in SPLITS}

# PGR column indices (0-based), as in lasigeBioTM/PGR corpora/*/{train,test}.tsv, whose header is
# FILE_ID SENTENCE GENE PHENOTYPE GENE_ID PHENOTYPE_ID GENE_START_POSITION GENE_END_POSITION
# PHENOTYPE_START_POSITION PHENOTYPE_END_POSITION RELATION [CONFIRMATION].
PGR_FILE_ID = 0
PGR_SENTENCE = 1
PGR_GENE = 2
PGR_PHENOTYPE = 3
PGR_GENE_ID = 4
PGR_PHENOTYPE_ID = 5
PGR_GENE_START = 6
PGR_GENE_END = 7
PGR_PHENOTYPE_START = 8
PGR_PHENOTYPE_END = 9
PGR_RELATION = 10
PGR_HEADER = ("FILE_ID", "SENTENCE", "GENE", "PHENOTYPE", "GENE_ID", "PHENOTYPE_ID",
              "GENE_START_POSITION", "GENE_END_POSITION", "PHENOTYPE_START_POSITION",
              "PHENOTYPE_END_POSITION", "RELATION")
# The 10_12_2018 test.tsv adds a curator column, CONFIRMATION (C/I/U), which is ignored.
PGR_COLUMN_COUNTS = (len(PGR_HEADER), len(PGR_HEADER) + 1)
PGR_LABELS = BINARY_LABELS
PGR_RELATIONS = {"true": "1", "false": "0"}
PGR_SPLIT_FILES = BLUE_SPLIT_FILES

JSONL_REQUIRED = COLUMNS[1:]
JSONL_SPLIT_FILES = {split: f"{split}.jsonl" for split in SPLITS}


class REFormatError(ValueError):
    """Malformed relation-extraction input. The message is one line naming file, line and field."""


class REFileNotFoundError(REFormatError, MessageFileNotFoundError):
    """A file or folder an RE loader needs does not exist; the message names the path."""


# --------------------------------------------------------------------------- shared helpers


def _error(path, line, where, message):
    """An REFormatError "file line N: where: message", forced onto one line."""
    loc = os.path.basename(str(path))
    if line is not None:
        loc += f" line {line}"
    if where:
        loc += f": {where}"
    return REFormatError(one_line(f"{loc}: {message}"))


def _require_file(path, what="file"):
    if not os.path.isfile(path):
        raise REFileNotFoundError(f"{path}: no such {what}")


def _require_dir(path, what="folder"):
    if not os.path.isdir(path):
        raise REFileNotFoundError(f"{path}: no such {what}")


def _read_lines(path, allow_empty=False):
    """The lines of a UTF-8 file (BOM and CR dropped); an empty file is refused unless allowed."""
    _require_file(path)
    content = read_utf8(path, lambda line, message: _error(path, line, None, message))
    if not content.strip() and not allow_empty:
        raise _error(path, None, None, "empty file")
    return text_lines(content)


def _is_blank(path):
    """True if the file holds nothing but whitespace (and perhaps a UTF-8 BOM)."""
    with open(path, "rb") as f:
        return not f.read().lstrip(b"\xef\xbb\xbf").strip()


def _label_error(path, line, label, labels, field="label"):
    return _error(path, line, f"field {field}",
                  f"unknown label {show(label)}; valid: {', '.join(labels)}")


def _span_problem(text, s1, e1, s2, e2, t1, t2):
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


def _frame(rows):
    """A DataFrame of the schema from row tuples in COLUMNS order."""
    columns = list(zip(*rows)) if rows else [()] * len(COLUMNS)
    data = {}
    for name, values in zip(COLUMNS, columns):
        data[name] = (np.asarray(values, dtype=np.int64) if name in OFFSET_COLUMNS
                      else pd.Series(list(values), dtype=object))
    return pd.DataFrame(data, columns=list(COLUMNS))


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


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
        if not _is_int(values[name]):
            raise fail(name, f"must be an integer, got {show(values[name])}")
    problem = _span_problem(values["text"], *(int(values[c]) for c in OFFSET_COLUMNS),
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


# --------------------------------------------------------------------------- i2b2 2010

_CONCEPT = r'c="(.*)" (\d+):(\d+) (\d+):(\d+)'
_CON_RE = re.compile(rf'^{_CONCEPT}\|\|t="([^"]*)"$')
_REL_RE = re.compile(rf'^{_CONCEPT}\|\|r="([^"]*)"\|\|{_CONCEPT}$')
# ASCII whitespace only, so a non-breaking space inside a token does not split it.
_TOKEN_RE = re.compile(r"[^ \t\n\r\f\v]+")
# Which concept types each relation joins; the first type is e1.
_I2B2_PAIRS = {("treatment", "problem"): "Tr", ("test", "problem"): "Te",
               ("problem", "problem"): "PIP"}


def _i2b2_pair_kind(type_a, type_b):
    """The oriented (e1 type, e2 type) of a candidate pair of concept types, or None."""
    for kind in _I2B2_PAIRS:
        if (type_a, type_b) == kind or (type_b, type_a) == kind:
            return kind
    return None


def _i2b2_relation_kind(relation):
    return next(kind for kind, prefix in _I2B2_PAIRS.items() if relation.startswith(prefix))


class _I2b2Doc:
    """One i2b2 document: its text lines and their token character spans."""

    def __init__(self, path, con_path):
        self.path, self.con_path = path, con_path
        self.lines = _read_lines(path)
        self._tokens = {}

    def tokens(self, line):
        """Character spans of the whitespace tokens of 1-based ``line``."""
        if line not in self._tokens:
            text = self.lines[line - 1]
            self._tokens[line] = [(m.start(), m.end()) for m in _TOKEN_RE.finditer(text)]
        return self._tokens[line]

    def resolve(self, path, lineno, where, text, l1, t1, l2, t2):
        """Checks a concept reference ``text L:T L:T``; returns its (line, start char, end char)."""
        if l1 != l2:
            raise _error(path, lineno, where, f"concept {show(text)} spans lines {l1} and {l2}; "
                         "a concept must lie on one line")
        if not 1 <= l1 <= len(self.lines):
            raise _error(path, lineno, where, f"line {l1} is outside "
                         f"{os.path.basename(self.path)} ({len(self.lines)} lines)")
        spans = self.tokens(l1)
        if not 0 <= t1 <= t2 < len(spans):
            raise _error(path, lineno, where, f"tokens {t1}..{t2} are outside line {l1} of "
                         f"{os.path.basename(self.path)} ({len(spans)} tokens)")
        line_text = self.lines[l1 - 1]
        found = " ".join(line_text[s:e] for s, e in spans[t1:t2 + 1])
        # The release lowercases concept text, so compare case-insensitively.
        if found.lower() != text.lower():
            raise _error(path, lineno, where, f"concept text {show(text)} does not match tokens "
                         f"{l1}:{t1} {l2}:{t2} of {os.path.basename(self.path)}, "
                         f"which read {show(found)}")
        return l1, spans[t1][0], spans[t2][1]


def _matching_lines(path, pattern, what, expected, problems, allow_empty=False):
    """Yields (line number, match) for each non-blank line of an i2b2 annotation file;
    a line ``pattern`` does not match is refused naming the file, line and field c."""
    for lineno, raw in enumerate(_read_lines(path, allow_empty=allow_empty), 1):
        line = raw.strip()
        if not line:
            continue
        m = pattern.match(line)
        if m:
            yield lineno, m
            continue
        with collect(problems, REFormatError):
            raise _error(path, lineno, "field c", f"malformed {what} line {show(line)}; "
                         f"expected {expected}")


def _parse_concept_ref(match, offset):
    """(text, l1, t1, l2, t2) from a regex match, starting at group ``offset``."""
    text = match.group(offset)
    l1, t1, l2, t2 = (int(match.group(offset + k)) for k in range(1, 5))
    return text, l1, t1, l2, t2


def _i2b2_concepts(doc, con_path, problems):
    """{(line, tok_start, tok_end): (type, start char, end char)} from a .con file."""
    concepts, where_defined = {}, {}
    for lineno, m in _matching_lines(con_path, _CON_RE, "concept",
                                     'c="text" L:T L:T||t="type"', problems):
        with collect(problems, REFormatError):
            _i2b2_concept(doc, con_path, lineno, m, concepts, where_defined)
    return concepts


def _i2b2_concept(doc, con_path, lineno, m, concepts, where_defined):
    """Checks one .con line and adds its concept to ``concepts``."""
    text, l1, t1, l2, t2 = _parse_concept_ref(m, 1)
    ctype = m.group(6)
    if ctype not in I2B2_CONCEPT_TYPES:
        raise _error(con_path, lineno, "field t", f"unknown concept type {show(ctype)}; "
                     f"valid: {', '.join(I2B2_CONCEPT_TYPES)}")
    _, start, end = doc.resolve(con_path, lineno, "field c", text, l1, t1, l2, t2)
    key = (l1, t1, t2)
    if key in concepts and concepts[key][0] != ctype:
        raise _error(con_path, lineno, "field t", f"concept {show(text)} {l1}:{t1} {l2}:{t2} "
                     f"is typed {ctype!r} here and {concepts[key][0]!r} on line "
                     f"{where_defined[key]}")
    concepts.setdefault(key, (ctype, start, end))
    where_defined.setdefault(key, lineno)


def _i2b2_relations(doc, rel_path, concepts, problems):
    """{frozenset of two concept keys: (relation, (e1 key, e2 key))} from a .rel file."""
    relations, where_defined = {}, {}
    if not os.path.isfile(rel_path):
        return relations  # a document without a .rel file has no relations
    for lineno, m in _matching_lines(rel_path, _REL_RE, "relation",
                                     'c="text" L:T L:T||r="type"||c="text" L:T L:T', problems,
                                     allow_empty=True):
        with collect(problems, REFormatError):
            _i2b2_relation(doc, rel_path, lineno, m, concepts, relations, where_defined)
    return relations


def _i2b2_relation(doc, rel_path, lineno, m, concepts, relations, where_defined):
    """Checks one .rel line and adds its relation to ``relations``."""
    relation = m.group(6)
    if relation not in I2B2_RELATIONS:
        raise _label_error(rel_path, lineno, relation, I2B2_LABELS, field="r")
    keys = []
    for entity, offset in (("e1", 1), ("e2", 7)):
        text, l1, t1, l2, t2 = _parse_concept_ref(m, offset)
        doc.resolve(rel_path, lineno, f"entity {entity}", text, l1, t1, l2, t2)
        key = (l1, t1, t2)
        if key not in concepts:
            raise _error(rel_path, lineno, f"entity {entity}", f"concept {show(text)} "
                         f"{l1}:{t1} {l2}:{t2} is not in {os.path.basename(doc.con_path)}")
        keys.append(key)
    (type_a, start_a, end_a), (type_b, start_b, end_b) = concepts[keys[0]], concepts[keys[1]]
    kind = _i2b2_pair_kind(type_a, type_b)
    if keys[0] == keys[1] or keys[0][0] != keys[1][0] or kind is None or (
            max(start_a, start_b) < min(end_a, end_b)):
        raise _error(rel_path, lineno, "field r", f"{relation} joins a {type_a} on line "
                     f"{keys[0][0]} and a {type_b} on line {keys[1][0]}, which is not a "
                     "candidate pair (treatment-problem, test-problem or problem-problem, "
                     "two distinct non-overlapping concepts on one line)")
    if kind != _i2b2_relation_kind(relation):
        raise _error(rel_path, lineno, "field r", f"{relation} must join a "
                     f"{' and a '.join(_i2b2_relation_kind(relation))}, not a {type_a} "
                     f"and a {type_b}")
    # Treatment/test is e1 whatever the line's order; problem-problem keeps the .rel order.
    order = tuple(keys) if type_a == kind[0] else (keys[1], keys[0])
    pair = frozenset(keys)
    if pair in relations and relations[pair] != (relation, order):
        raise _error(rel_path, lineno, "field r", f"{relation} contradicts the relation on "
                     f"line {where_defined[pair]}")
    relations[pair] = (relation, order)
    where_defined.setdefault(pair, lineno)


def _i2b2_document(txt_path, con_path, rel_path, stem, problems):
    """The example rows of one i2b2 document."""
    doc = _I2b2Doc(txt_path, con_path)
    concepts = _i2b2_concepts(doc, con_path, problems)
    relations = _i2b2_relations(doc, rel_path, concepts, problems)
    by_line = {}
    for key in sorted(concepts, key=lambda k: (k[0], concepts[k][1], concepts[k][2])):
        by_line.setdefault(key[0], []).append(key)
    rows = []
    for line, keys in sorted(by_line.items()):
        text, count = doc.lines[line - 1], 0
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                kind = _i2b2_pair_kind(concepts[a][0], concepts[b][0])
                (_, sa, ea), (_, sb, eb) = concepts[a], concepts[b]
                if kind is None or max(sa, sb) < min(ea, eb):
                    continue  # not a candidate pair: e.g. test-treatment, or nested concepts
                label, order = relations.get(frozenset((a, b)), ("None", None))
                if order is None:
                    # Treatment/test first; problem-problem in text order (a precedes b).
                    order = (a, b) if concepts[a][0] == kind[0] else (b, a)
                (t1, s1, e1), (t2, s2, e2) = concepts[order[0]], concepts[order[1]]
                rows.append((f"{stem}:{line}:{count}", text, s1, e1, s2, e2, t1, t2, label))
                count += 1
    return rows


def load_i2b2(folder, problems=None):
    """Loads one split of the i2b2/n2c2 2010 relation data as ``(examples, labels)``.

    ``folder`` holds the release layout: ``txt/*.txt`` (one sentence per line, tokens
    split on whitespace), ``concept/*.con`` (``concepts/`` is accepted too, as in the
    test reference standard) and ``rel/*.rel``, one stem per document. A document
    without a ``.rel`` file has no relations; one without a ``.con`` file is an error.

    ``.con`` lines read ``c="text" L:T L:T||t="problem|test|treatment"`` (L 1-based line,
    T 0-based token, both ends inclusive, one line per concept); ``.rel`` lines read
    ``c="text" L:T L:T||r="TrAP"||c="text" L:T L:T``. Concept text must equal its tokens
    joined by one space, ignoring case.

    Examples are the candidate pairs within one text line: treatment-problem (e1 is the
    treatment), test-problem (e1 is the test) and problem-problem (e1 is the earlier
    concept, unless a ``.rel`` line names the pair the other way round). Pairs without a
    ``.rel`` line are labelled "None"; nested (overlapping) concepts are never paired.
    ``text`` is the line, ``e*_type`` the concept types, ``example_id``
    ``"{stem}:{line}:{k}"`` (k counts the line's examples), in order of document, line,
    then concept position. Labels: :data:`I2B2_LABELS`. ``problems`` (a list) makes the
    load lenient: a bad .con or .rel line, or a document without its .con, is skipped.
    """
    _require_dir(folder)
    txt_dir = os.path.join(folder, "txt")
    _require_dir(txt_dir, "folder (i2b2 data needs txt/, concept/ and rel/)")
    con_dir = os.path.join(folder, "concept")
    if not os.path.isdir(con_dir) and os.path.isdir(os.path.join(folder, "concepts")):
        con_dir = os.path.join(folder, "concepts")
    rel_dir = os.path.join(folder, "rel")
    stems = sorted(name[:-4] for name in os.listdir(txt_dir) if name.endswith(".txt"))
    if not stems:
        raise REFileNotFoundError(f"{txt_dir}: no .txt files")
    # A .con or .rel without its .txt is a misplaced file; say so rather than drop it.
    for sub, ext in ((con_dir, ".con"), (rel_dir, ".rel")):
        if os.path.isdir(sub):
            for name in sorted(os.listdir(sub)):
                if name.endswith(ext) and name[:-len(ext)] not in stems:
                    with collect(problems, REFormatError):
                        raise REFileNotFoundError(
                            f"{os.path.join(sub, name)}: no matching "
                            f"{os.path.join(txt_dir, name[:-len(ext)] + '.txt')}")
    rows = []
    for stem in stems:
        con_path = os.path.join(con_dir, stem + ".con")
        with collect(problems, REFormatError):
            _require_file(con_path, "concept file")
            rows.extend(_i2b2_document(os.path.join(txt_dir, stem + ".txt"), con_path,
                                       os.path.join(rel_dir, stem + ".rel"), stem, problems))
    examples, labels = _frame(rows), list(I2B2_LABELS)
    examples = check_examples(examples, labels, folder, problems)
    return examples, labels


# --------------------------------------------------------------------------- BLUE / BioBERT

_PLACEHOLDER_RE = re.compile(r"@([A-Z][A-Z-]*)\$")


def _blue_task(task):
    if task not in BLUE_TASKS:
        raise ValueError(f"unknown BLUE task {task!r}; valid: {', '.join(BLUE_TASKS)}")
    return BLUE_TASKS[task]


def _blue_entities(path, lineno, sentence, task):
    """(e1 start, e1 end, e1 type, e2 start, e2 end, e2 type) from a blinded sentence."""
    _, types = _blue_task(task)
    found = list(_PLACEHOLDER_RE.finditer(sentence))
    for m in found:
        if m.group(1) not in types:
            raise _error(path, lineno, "field sentence", f"placeholder {m.group()!r} is not used "
                         f"by {task}; expected {', '.join('@' + t + '$' for t in types)}")
    names = [m.group() for m in found]
    if len(found) == 1 and found[0].group(1) == CHEM_GENE:
        # One mention is both entities: e1 and e2 are the same span (see module docstring).
        m = found[0]
        return m.start(), m.end(), CHEM_GENE, m.start(), m.end(), CHEM_GENE
    if len(found) != 2 or CHEM_GENE in (m.group(1) for m in found):
        raise _error(path, lineno, "field sentence", "expected two entity placeholders or one "
                     f"@{CHEM_GENE}$, found {len(found)}: {', '.join(names) or 'none'}")
    a, b = found
    return a.start(), a.end(), a.group(1), b.start(), b.end(), b.group(1)


def _blue_columns(lines):
    """(has header, column names) of a BLUE/BioBERT TSV: the header if its first line is
    :data:`BLUE_HEADER`, else two columns or, with an id first, three (by the first line)."""
    if lines[0] == BLUE_HEADER:
        return True, ("index", "sentence", "label")
    first = next(line for line in lines if line.strip())
    if len(first.split("\t")) == 3:
        return False, ("id", "sentence", "label")
    return False, ("sentence", "label")


def _blue_row(path, lineno, line, stem, task, labels, has_header, expected, ids):
    """The example row of one line of a BLUE/BioBERT TSV; ``ids`` holds the ids seen."""
    parts = line.split("\t")
    if len(parts) != len(expected):
        note = "" if has_header else f" (no {BLUE_HEADER!r} header)"
        raise _error(path, lineno, "columns", f"expected {len(expected)} tab-separated "
                     f"columns ({', '.join(expected)}){note}, got {len(parts)}")
    fields = dict(zip(expected, parts))
    label = fields["label"].strip()
    if label not in labels:
        raise _label_error(path, lineno, label, labels)
    if len(expected) == 3:
        column = expected[0]
        index = fields[column].strip()
        if not index:
            raise _error(path, lineno, f"field {column}", f"empty {column}")
        if index in ids:
            raise _error(path, lineno, f"field {column}",
                         f"duplicate {column} {show(index)} (also line {ids[index]})")
        ids[index] = lineno
        eid = f"{stem}:{index}"
    else:
        eid = f"{stem}:{lineno}"
    s1, e1, t1, s2, e2, t2 = _blue_entities(path, lineno, fields["sentence"], task)
    return eid, fields["sentence"], s1, e1, s2, e2, t1, t2, label


def load_blue_tsv(path, task, problems=None):
    """Loads one GAD, EU-ADR or ChemProt TSV file, as BioBERT/BLUE distribute them.

    ``task`` is "gad", "euadr" or "chemprot". Three layouts are read, told apart by the
    content, whatever the file's name:

    * a first line exactly ``index<TAB>sentence<TAB>label``: that header, then three
      columns (BLUE ChemProt, BioBERT ``test.tsv``);
    * no header, three columns: an id, the sentence, the label (ChemProt as some BLUE and
      BioBERT copies ship it, e.g. ``10064839.T49.T56<TAB>...<TAB>false``);
    * no header, two columns: ``sentence<TAB>label`` (BioBERT GAD and EU-ADR
      ``train.tsv``).

    Without a header the first non-blank line's column count decides. Blank lines are
    skipped.

    The entities are blinded placeholders: ``@GENE$`` and ``@DISEASE$`` (GAD, EU-ADR),
    ``@CHEMICAL$``, ``@GENE$`` and ``@CHEM-GENE$`` (ChemProt). The two placeholders are
    e1 and e2 in text order, typed by their names (GENE, DISEASE, CHEMICAL). A sentence
    with a lone ``@CHEM-GENE$`` (one mention that is both chemical and gene) gives e1 and
    e2 the same span, both typed CHEM-GENE; any other count of placeholders is an error.

    ``example_id`` is ``"{file stem}:{index or id}"`` with three columns (the indices or
    ids must be unique), ``"{file stem}:{line}"`` with two. Labels: ["0", "1"] for GAD and
    EU-ADR, :data:`CHEMPROT_LABELS` for ChemProt; anything else is refused.
    ``problems`` (a list) makes the load lenient: a bad line is skipped.
    """
    labels, _ = _blue_task(task)
    lines = _read_lines(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    has_header, expected = _blue_columns(lines)
    rows, ids = [], {}
    for lineno, line in enumerate(lines, 1):
        if (has_header and lineno == 1) or not line.strip():
            continue
        with collect(problems, REFormatError):
            rows.append(_blue_row(path, lineno, line, stem, task, labels, has_header,
                                  expected, ids))
    if not rows:
        raise _error(path, None, None, "no examples (empty file or header only)")
    examples = check_examples(_frame(rows), list(labels), os.path.basename(path), problems)
    return examples, list(labels)


def load_blue_folder(folder, task, notes=None, problems=None):
    """Loads the splits of a BLUE/BioBERT folder as ``({split: examples}, labels)``.

    Reads whichever of ``train.tsv``, ``dev.tsv`` and ``test.tsv`` the folder holds (at
    least one), each with :func:`load_blue_tsv`. An empty file counts as absent, with a
    note in ``notes``: BioBERT's GAD and EU-ADR ship ten folds (``GAD/1`` ...
    ``GAD/10``), each with an empty ``dev.tsv``; pass one fold's folder.
    """
    labels, _ = _blue_task(task)
    frames = _load_splits(folder, BLUE_SPLIT_FILES,
                          lambda p: load_blue_tsv(p, task, problems)[0], notes, problems)
    return frames, list(labels)


def _load_splits(folder, files, load, notes=None, problems=None):
    """{split: examples} for the split files present in ``folder``; at least one is required.

    ``files`` maps each split to its file name or a tuple of names it may have (one of
    them at most may be present). An empty or blank file counts as absent: a note in
    ``notes``. In lenient mode a file that cannot be read at all is left out, its error in
    ``problems``.
    """
    _require_dir(folder)
    frames, wanted, failed = {}, [], False
    for split, names in files.items():
        names = (names,) if isinstance(names, str) else tuple(names)
        wanted += names
        present = []
        for name in names:
            path = os.path.join(folder, name)
            if not os.path.isfile(path):
                continue
            if _is_blank(path):
                if notes is not None:
                    notes.append(f"{name}: empty file, read as no {split} split")
            else:
                present.append(name)
        if len(present) > 1:
            raise _error(folder, None, None, f"two {split} files, {' and '.join(present)}; "
                         "keep one")
        if present:
            with collect(problems, REFormatError):
                frames[split] = load(os.path.join(folder, present[0]))
            failed = failed or split not in frames
    if not frames and not failed:
        raise REFileNotFoundError(f"{folder}: none of {', '.join(wanted)} (or only empty ones)")
    return frames


# --------------------------------------------------------------------------- SciBERT ChemProt


def _json_object(path, lineno, line):
    """The JSON object on one line of a JSON-lines file."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise _error(path, lineno, None, f"not valid JSON ({e.msg} at column {e.colno})") \
            from None
    if not isinstance(record, dict):
        raise _error(path, lineno, None, f"expected a JSON object, got {type(record).__name__}")
    return record


def _scibert_row(path, lineno, line, stem, raw_labels):
    """The example row of one line of SciBERT's ChemProt JSON lines."""
    record = _json_object(path, lineno, line)
    for field in ("text", "label"):
        if field not in record:
            raise _error(path, lineno, f"field {field}", "missing field")
        if not isinstance(record[field], str):
            raise _error(path, lineno, f"field {field}",
                         f"must be a string, got {show(record[field])}")
    marked, label = record["text"], record["label"]
    if label != CHEMPROT_LABELS[0] and label not in CHEMPROT_GROUPS:
        raise _label_error(path, lineno, label, CHEMPROT_RAW_LABELS)
    # Each entity is "<< name >>" or "[[ name ]]": the marker, the name, the closing marker.
    spans = []
    for k, (opening, closing) in enumerate(SCIBERT_MARKERS, 1):
        count = marked.count(opening)
        if count != 1:
            raise _error(path, lineno, "field text", f"expected one {opening.strip()!r} "
                         f"marker (e{k}), found {count}")
        start = marked.index(opening) + len(opening)
        end = marked.find(closing, start)
        if end < 0:
            raise _error(path, lineno, "field text", f"no {closing.strip()!r} after the "
                         f"{opening.strip()!r} marker (e{k})")
        if end == start:
            raise _error(path, lineno, "field text", f"empty entity e{k}")
        spans.append((start - len(opening), start, end, end + len(closing)))
    (a0, _, _, a1), (b0, _, _, b1) = spans
    if max(a0, b0) < min(a1, b1):
        raise _error(path, lineno, "field text", "the << >> and [[ ]] markers overlap")
    # The text without the markers; an offset moves left by the marker characters before it.
    cuts = sorted(c for s0, s1, e0, e1 in spans for c in ((s0, s1), (e0, e1)))
    text = "".join(marked[last:begin] for last, begin in
                   zip([0] + [c[1] for c in cuts], [c[0] for c in cuts] + [len(marked)]))

    def moved(pos):
        return pos - sum(b - a for a, b in cuts if b <= pos)

    (_, s1, e1, _), (_, s2, e2, _) = spans
    if not raw_labels:
        label = CHEMPROT_GROUPS.get(label, label)
    return (f"{stem}:{lineno}", text, moved(s1), moved(e1), moved(s2), moved(e2),
            SCIBERT_TYPE, SCIBERT_TYPE, label)


def load_scibert_chemprot(path, raw_labels=False, problems=None):
    """Loads ChemProt as SciBERT ships it (JSON lines) as ``(examples, labels)``.

    GitHub allenai/scibert, ``data/text_classification/chemprot/{train,dev,test}.txt``:
    one JSON object per line, ``{"text": ..., "label": ..., "metadata": [...]}``. The
    text marks one entity ``<< name >>`` and the other ``[[ name ]]`` (with those spaces);
    the markers are removed and become character offsets: e1 is the ``<< >>`` entity, e2
    the ``[[ ]]`` one. The markers do not say which entity is the chemical, so both are
    typed :data:`SCIBERT_TYPE`. ``metadata`` is ignored; ``example_id`` is
    ``"{file stem}:{line}"``.

    The labels are ChemProt's 13 relation types of the evaluated groups (``INHIBITOR``,
    ``AGONIST-ACTIVATOR``...); SciBERT's copy holds only related pairs, no negatives.
    By default each type becomes its group, CPR:3, 4, 5, 6 or 9 (:data:`CHEMPROT_GROUPS`,
    after ChemProt's guidelines), and the labels are :data:`CHEMPROT_LABELS`, as BLUE's
    copy; with ``raw_labels=True`` the types are kept and the labels are
    :data:`CHEMPROT_RAW_LABELS`. A label ``false`` is read as the negative either way.
    ``problems`` (a list) makes the load lenient: a bad line is skipped.
    """
    lines = _read_lines(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    rows = []
    for lineno, line in enumerate(lines, 1):
        if line.strip():
            with collect(problems, REFormatError):
                rows.append(_scibert_row(path, lineno, line, stem, raw_labels))
    if not rows:
        raise _error(path, None, None, "no examples")
    labels = list(CHEMPROT_RAW_LABELS if raw_labels else CHEMPROT_LABELS)
    return check_examples(_frame(rows), labels, os.path.basename(path), problems), labels


def _is_json_lines(path):
    """True if the first non-blank line of a file starts with "{" (SciBERT's ChemProt)."""
    return next((line for line in _read_lines(path) if line.strip()), "").lstrip()[:1] == "{"


def _load_chemprot(path, raw_labels=False, problems=None):
    """One ChemProt file, BLUE's TSV or SciBERT's JSON lines (told apart by the content)."""
    if _is_json_lines(path):
        return load_scibert_chemprot(path, raw_labels, problems)
    if raw_labels:
        raise _error(path, None, None, "raw_labels: BLUE's ChemProt TSV holds only the CPR "
                     "groups; the raw relation types are in SciBERT's JSON lines")
    return load_blue_tsv(path, "chemprot", problems)


# --------------------------------------------------------------------------- PGR

# The references html.unescape replaces (CPython's html._charref).
_CHARREF_RE = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")


def unescape_with_offsets(raw):
    """``(html.unescape(raw), pos)`` where ``pos[i]`` is where raw offset ``i`` lands.

    ``pos`` has ``len(raw) + 1`` entries; an offset inside a character reference (after
    its ``&``) maps to -1, since no character of the unescaped text starts there.
    """
    if "&" not in raw:
        return raw, list(range(len(raw) + 1))
    out, pos, n, last = [], [], 0, 0
    for m in _CHARREF_RE.finditer(raw):
        literal = raw[last:m.start()]
        out.append(literal)
        pos.extend(range(n, n + len(literal)))
        n += len(literal)
        ref = m.group()
        text = html.unescape(ref)
        if text == ref:  # not a reference html.unescape knows: keep it character for character
            pos.extend(range(n, n + len(ref)))
        else:
            pos.append(n)
            pos.extend([-1] * (len(ref) - 1))
        out.append(text)
        n += len(text)
        last = m.end()
    tail = raw[last:]
    out.append(tail)
    pos.extend(range(n, n + len(tail) + 1))
    return "".join(out), pos


def _pgr_int(path, lineno, parts, column):
    value = parts[column].strip()
    try:
        return int(value)
    except ValueError:
        raise _error(path, lineno, f"field {PGR_HEADER[column]}",
                     f"offset {show(value)} is not an integer") from None


def _pgr_entity(path, lineno, entity, raw, text, pos, start, end, expected, column):
    """Maps an entity's raw-sentence offsets onto the unescaped text; checks its string."""
    where = f"entity {entity} ({PGR_HEADER[column].lower()})"
    if not 0 <= start < end <= len(raw):
        raise _error(path, lineno, where, f"offsets [{start}, {end}) are outside the sentence "
                     f"(length {len(raw)}) or empty")
    new_start, new_end = pos[start], pos[end]
    if new_start < 0 or new_end < 0:
        raise _error(path, lineno, where, f"offsets [{start}, {end}) cut through a character "
                     f"reference in {show(raw[max(0, start - 8):end + 8])}")
    found, wanted = text[new_start:new_end], html.unescape(expected)
    if found != wanted:
        raise _error(path, lineno, where, f"sentence[{start}:{end}] is {show(found)} but "
                     f"{PGR_HEADER[column]} is {show(wanted)}")
    return new_start, new_end


def _pgr_row(path, lineno, parts, stem, skip_invalid, skipped):
    """The example row of one PGR line, or None for a row skipped by ``skip_invalid``."""
    if len(parts) not in PGR_COLUMN_COUNTS:
        raise _error(path, lineno, "columns", f"expected {len(PGR_HEADER)} tab-separated "
                     f"columns ({' '.join(PGR_HEADER)} [CONFIRMATION]), got {len(parts)}")
    relation = parts[PGR_RELATION].strip()
    label = PGR_RELATIONS.get(relation.lower())
    if label is None:
        raise _error(path, lineno, f"field {PGR_HEADER[PGR_RELATION]}",
                     f"unknown label {show(relation)}; valid: True, False (any case)")
    offsets = [_pgr_int(path, lineno, parts, c) for c in
               (PGR_GENE_START, PGR_GENE_END, PGR_PHENOTYPE_START, PGR_PHENOTYPE_END)]
    raw = parts[PGR_SENTENCE]
    text, pos = unescape_with_offsets(raw)
    try:
        s1, e1 = _pgr_entity(path, lineno, "e1", raw, text, pos, offsets[0], offsets[1],
                             parts[PGR_GENE], PGR_GENE)
        s2, e2 = _pgr_entity(path, lineno, "e2", raw, text, pos, offsets[2], offsets[3],
                             parts[PGR_PHENOTYPE], PGR_PHENOTYPE)
        problem = _span_problem(text, s1, e1, s2, e2, "GENE", "PHENOTYPE")
        if problem:
            raise _error(path, lineno, "entity e2", problem[1])
    except REFormatError as e:
        if not skip_invalid:
            raise
        skipped.append(str(e))
        return None
    return f"{stem}:{lineno}", text, s1, e1, s2, e2, "GENE", "PHENOTYPE", label


def load_pgr(path, skip_invalid=False, problems=None):
    """Loads a PGR (Phenotype-Gene Relations) TSV file as ``(examples, labels)``.

    The published layout (GitHub lasigeBioTM/PGR, ``corpora/*/{train,test}.tsv``) is
    tab-separated with the header ``FILE_ID SENTENCE GENE PHENOTYPE GENE_ID
    PHENOTYPE_ID GENE_START_POSITION GENE_END_POSITION PHENOTYPE_START_POSITION
    PHENOTYPE_END_POSITION RELATION`` (FILE_ID is the PubMed id); the 10_12_2018
    ``test.tsv`` adds a twelfth column, CONFIRMATION, which is ignored. The header line
    is skipped when present; column positions are the ``PGR_*`` constants.

    Offsets are end-exclusive character offsets into the sentence *as stored*, which
    holds HTML references (``&lt;``, ``&amp;``). ``text`` is the sentence after
    ``html.unescape`` and the offsets are mapped onto it; ``text[start:end]`` must then
    equal the unescaped GENE/PHENOTYPE column, else REFormatError names the line, the
    entity and both strings. Markup such as ``<i>`` is kept as is.

    e1 is the gene (type GENE), e2 the phenotype (type PHENOTYPE). RELATION
    ``true``/``false`` in any case becomes "1"/"0"; labels are ["0", "1"].
    ``example_id`` is ``"{file stem}:{line}"``.

    The published train files hold a few rows whose gene is not at its offsets (gene
    "AA" in 10_12_2018 train.tsv lines 1126-1127). ``skip_invalid=True`` drops rows whose
    offsets or entity strings are wrong or whose spans overlap, with one warning;
    malformed lines and unknown labels still raise. ``problems`` (a list) makes the load
    lenient: a bad line is skipped.
    """
    lines = _read_lines(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    rows, skipped = [], []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if lineno == 1 and parts[0].strip() == PGR_HEADER[PGR_FILE_ID]:
            continue
        with collect(problems, REFormatError):
            row = _pgr_row(path, lineno, parts, stem, skip_invalid, skipped)
            if row is not None:
                rows.append(row)
    if skipped:
        warnings.warn(f"load_pgr skipped {len(skipped)} invalid row(s) of {path}; first: "
                      f"{skipped[0]}", stacklevel=2)
    if not rows:
        raise _error(path, None, None, "no examples (empty file or header only)")
    examples = check_examples(_frame(rows), list(PGR_LABELS), os.path.basename(path), problems)
    return examples, list(PGR_LABELS)


# --------------------------------------------------------------------------- JSON lines


def infer_labels(found):
    """The label list for labels seen in data: sorted, a negative label moved first.

    The negative is the first of "None", "false", "0" (:data:`NEGATIVE_LABELS`) that
    occurs; the other labels keep their sorted order.
    """
    labels = sorted(set(found))
    for negative in NEGATIVE_LABELS:
        if negative in labels:
            labels.remove(negative)
            return [negative] + labels
    return labels


def _jsonl_row(path, lineno, line, stem, labels, known, ids):
    """The example row of one line of a JSON-lines file; ``ids`` holds the ids seen."""
    record = _json_object(path, lineno, line)
    for field in JSONL_REQUIRED:
        if field not in record:
            raise _error(path, lineno, f"field {field}", "missing field")
    for field in ("text", "e1_type", "e2_type"):
        if not isinstance(record[field], str):
            raise _error(path, lineno, f"field {field}",
                         f"must be a string, got {show(record[field])}")
    for field in OFFSET_COLUMNS:
        if not _is_int(record[field]):
            raise _error(path, lineno, f"field {field}",
                         f"must be an integer, got {show(record[field])}")
    label = record["label"]
    if _is_int(label):
        label = str(label)  # {"label": 0} is the natural spelling of label "0"
    if not isinstance(label, str):
        raise _error(path, lineno, "field label", f"must be a string, got {show(label)}")
    if known is not None and label not in known:
        raise _label_error(path, lineno, label, labels)
    eid = record.get("example_id", f"{stem}:{lineno}")
    if _is_int(eid):
        eid = str(eid)
    if not isinstance(eid, str):
        raise _error(path, lineno, "field example_id", f"must be a string, got {show(eid)}")
    if eid in ids:
        raise _error(path, lineno, "field example_id",
                     f"duplicate example_id {show(eid)} (also line {ids[eid]})")
    ids[eid] = lineno
    offsets = [record[c] for c in OFFSET_COLUMNS]
    problem = _span_problem(record["text"], *offsets, record["e1_type"], record["e2_type"])
    if problem:
        raise _error(path, lineno, f"field {problem[0]}", problem[1])
    return (eid, record["text"], *offsets, record["e1_type"], record["e2_type"], label)


def _jsonl_rows(path, labels, problems=None):
    """Example rows of a JSON-lines file; labels are checked only when given."""
    lines = _read_lines(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    known = None if labels is None else set(labels)
    rows, ids = [], {}
    for lineno, line in enumerate(lines, 1):
        if line.strip():
            with collect(problems, REFormatError):
                rows.append(_jsonl_row(path, lineno, line, stem, labels, known, ids))
    if not rows:
        raise _error(path, None, None, "no examples (empty file)")
    return rows


def load_jsonl(path, labels=None, problems=None):
    """Loads this project's JSON-lines RE format as ``(examples, labels)``.

    One JSON object per line with the fields of :data:`COLUMNS`; ``example_id`` is
    optional (default ``"{file stem}:{line}"``) and other keys are ignored. Blank lines
    are skipped; a line that is not a JSON object, lacks a field or has a field of the
    wrong type is an error. An integer label or id is read as its decimal string.

    With ``labels=None`` the label list is inferred by :func:`infer_labels` (sorted,
    with "None", "false" or "0" moved first); given ``labels`` (negative first) are
    returned as a list, and a label outside them is an error. ``problems`` (a list) makes
    the load lenient: a bad line is skipped.
    """
    if labels is not None:
        labels = [labels] if isinstance(labels, str) else list(labels)
    rows = _jsonl_rows(path, labels, problems)
    if labels is None:
        labels = infer_labels(row[-1] for row in rows)
    return check_examples(_frame(rows), labels, os.path.basename(path), problems), labels


# --------------------------------------------------------------------------- dispatcher


def _concat_splits(frames, labels, source, problems=None):
    """One DataFrame of the splits in SPLITS order, with a ``split`` column; checked."""
    parts = [frames[split].assign(**{SPLIT_COLUMN: split}) for split in SPLITS if split in frames]
    if not parts:  # lenient mode, where no split could be read
        return _frame([]).assign(**{SPLIT_COLUMN: pd.Series([], dtype=object)})
    return check_examples(pd.concat(parts, ignore_index=True), labels, source, problems)


def load_re(dataset, path, *, notes=None, problems=None, **options):
    """Loads any supported RE dataset from a file or folder as ``(examples, labels)``.

    ``dataset`` is one of :data:`DATASETS`; ``options`` go to the underlying loader
    (``skip_invalid`` for "pgr", ``labels`` for "jsonl", ``raw_labels`` for "chemprot":
    SciBERT's relation types instead of the CPR groups).

    * A file is loaded as one split, without a ``split`` column (not for "i2b2"). A
      "chemprot" file is BLUE's TSV or, when its first line is a JSON object, SciBERT's
      JSON lines (:func:`load_scibert_chemprot`).
    * A folder of split files -- ``train``/``dev``/``test`` with ``.tsv`` ("gad",
      "euadr", "chemprot", "pgr"), ``.txt`` (SciBERT's "chemprot") or ``.jsonl``
      ("jsonl") -- gives the splits present, concatenated in that order, with an extra
      ``split`` column. An empty file counts as absent (BioBERT's ``dev.tsv``), with a
      note in ``notes``.
    * "i2b2" takes a folder: one with ``txt/`` directly is a single split, "train"; one
      with ``train/``, ``dev/`` and/or ``test/`` sub-folders (each in the txt/concept/rel
      layout) gives those splits. Both carry the ``split`` column.

    For "jsonl" folders without given labels, the label list is inferred over all splits.
    ``notes`` and ``problems``: lists, see the module docstring.
    """
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; valid: {', '.join(DATASETS)}")
    if not os.path.exists(path):
        raise REFileNotFoundError(f"{path}: no such file or folder")
    lenient = {"problems": problems}
    if dataset == "i2b2":
        _require_dir(path)
        if os.path.isdir(os.path.join(path, "txt")):
            frames = {"train": load_i2b2(path, **options, **lenient)[0]}
        else:
            frames = {}
            for split in SPLITS:
                if os.path.isdir(os.path.join(path, split)):
                    with collect(problems, REFormatError):
                        frames[split] = load_i2b2(os.path.join(path, split), **options,
                                                  **lenient)[0]
            if not frames and not problems:
                raise REFileNotFoundError(f"{path}: neither txt/ nor train/, dev/ or test/ "
                                          "sub-folders")
        return _concat_splits(frames, list(I2B2_LABELS), path, problems), list(I2B2_LABELS)
    if dataset == "chemprot":
        if os.path.isfile(path):
            return _load_chemprot(path, **options, **lenient)
        frames = _load_splits(path, CHEMPROT_SPLIT_FILES,
                              lambda p: _load_chemprot(p, **options, **lenient)[0], notes,
                              problems)
        labels = list(CHEMPROT_RAW_LABELS if options.get("raw_labels") else CHEMPROT_LABELS)
        return _concat_splits(frames, labels, path, problems), labels
    if dataset in BLUE_TASKS:
        if os.path.isfile(path):
            return load_blue_tsv(path, dataset, **options, **lenient)
        frames, labels = load_blue_folder(path, dataset, notes, problems, **options)
        return _concat_splits(frames, labels, path, problems), labels
    if dataset == "pgr":
        if os.path.isfile(path):
            return load_pgr(path, **options, **lenient)
        frames = _load_splits(path, PGR_SPLIT_FILES,
                              lambda p: load_pgr(p, **options, **lenient)[0], notes, problems)
        return _concat_splits(frames, list(PGR_LABELS), path, problems), list(PGR_LABELS)
    # jsonl
    if os.path.isfile(path):
        return load_jsonl(path, **options, **lenient)
    labels = options.get("labels")
    frames = _load_splits(path, JSONL_SPLIT_FILES,
                          lambda p: _frame(_jsonl_rows(p, None if labels is None else
                                                       list(labels), problems)),
                          notes, problems)
    if labels is None:
        labels = infer_labels(label for df in frames.values() for label in df["label"])
    return _concat_splits(frames, list(labels), path, problems), list(labels)


def by_split(examples):
    """``{split: DataFrame}`` of :func:`load_re`'s examples: by their ``split`` column (which
    is dropped), in train/dev/test order; examples without one are all "train"."""
    if SPLIT_COLUMN not in examples:
        return {"train": examples.reset_index(drop=True)}
    return {split: examples[examples[SPLIT_COLUMN] == split].drop(columns=SPLIT_COLUMN)
            .reset_index(drop=True) for split in SPLITS if (examples[SPLIT_COLUMN] == split).any()}


def load_relation_splits(dataset, path, *, seed, dev_fraction=DEV_FRACTION,
                         test_fraction=TEST_FRACTION, notes=None, problems=None, **options):
    """``({"train", "dev", "test": DataFrame}, labels)``: the examples a run trains, selects
    and scores on.

    Loads ``path`` with :func:`load_re` (``options`` go there), splits it by the ``split``
    column (a file is all "train") and fills the gaps with
    :func:`tffre.data.splits.complete_splits`: a missing test split is a seeded
    ``test_fraction`` of train, then a missing dev split a seeded ``dev_fraction`` of what is
    left (``None`` leaves either out; a missing test is then an error). What was done is
    appended to ``notes``: for a BioBERT GAD fold, that ``dev.tsv`` is empty and which share
    of ``train.tsv`` became dev.
    """
    examples, labels = load_re(dataset, path, notes=notes, problems=problems, **options)
    if problems is not None and not len(examples):
        return {}, labels  # lenient, and nothing could be read: the problems say why
    splits = complete_splits(by_split(examples), seed=seed, dev_fraction=dev_fraction,
                             test_fraction=test_fraction, notes=notes, source=path)
    return splits, labels
