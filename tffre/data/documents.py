"""Document-level relation extraction (DocRE) data: the document type and its loaders.

Every loader returns :class:`Document` objects, one shape for all formats, so the graph,
the split and the model read one thing:

* :class:`Document` -- ``pmid`` (the document id; DocRED's title when it has no PMID),
  ``text`` (PubTator: title, a space, abstract), ``mentions``, ``relations``,
  ``sentences`` (character spans into ``text``, in order, covering every mention) and
  ``excluded_pairs`` (entity pairs the source leaves out of training and scoring: EoG's
  ``not_include``; empty elsewhere).
* :class:`Mention` -- character offsets into ``text`` (end exclusive,
  ``text[start:end] == mention.text``), the mention text, its type, its entity ids (a
  tuple: PubTator's composite ``D1|D2`` gives two; ``-1``, an unnormalised mention,
  gives ``("-1",)``) and the index of its sentence.
* :class:`Relation` -- the relation type and the two entity ids.

Formats:

* :func:`load_pubtator` -- CDR, GDA and CHR as distributed in PubTator format (BioCreative V
  CDR ``CDR_*Set.PubTator.txt``; GDA after EoG's ``gda2pubtator.py``), parsed by the ``bioc``
  library's :mod:`bioc.pubtator`. Sentences come from :func:`split_sentences`.
* :func:`load_docred` -- DocRED-style JSON (``title``, ``sents``, ``vertexSet``, ``labels``);
  :func:`fact_keys` gives the training facts for DocRED's Ign F1.
* :func:`load_eog` -- the ``.data`` files of the edge-oriented graph model (Christopoulou et al.
  2019, GitHub fenchri/edge-oriented-graph), which FedLCC-style CDR/GDA code reads.
* :func:`load_documents` -- any of these from a file or a folder of train/dev/test splits;
  :func:`load_document_splits` -- the train/dev/test documents a run uses, gaps filled by
  :func:`tffre.data.splits.complete_splits`.
* :func:`sample_path`, :func:`load_sample` -- the embedded, invented CDR-style sample
  (``tffre/resources/docre_sample/``, written by ``data/docre_sample/generate.py``).

Bad input raises :class:`DocREFormatError` with a one-line message naming the file, the 1-based
line (PubTator, EoG, a JSON syntax error) or record (DocRED), and the field or document at fault;
a missing path raises :class:`DocREFileNotFoundError`, which is both a ``DocREFormatError`` and
a ``FileNotFoundError``. Given a list as ``problems``, the loaders are lenient instead: each
bad line, mention, relation or document is skipped and its message appended there
(:class:`tffre.errors.collect`); errors about a whole file or folder still raise. Given a list
as ``notes``, they append what a user should know about what was read (an empty split file
read as no split, the EoG variant chosen).
"""

import bisect
import contextlib
import dataclasses
import io
import json
import operator
import os
import re
from typing import List, Tuple

import bioc.pubtator
import bioc.pubtator.decoder

from tffre import resources
from tffre.data.splits import DEV_FRACTION, SPLITS, complete_splits
from tffre.errors import MessageFileNotFoundError, collect, one_line, read_utf8, show, text_lines

FORMATS = ("pubtator", "docred", "eog")
# A split file's name holds one of these words (lower-cased, not preceded by a letter).
SPLIT_WORDS = {"train": ("train",), "dev": ("dev",), "test": ("test",)}
EXTENSIONS = {".pubtator": "pubtator", ".txt": "pubtator", ".json": "docred", ".data": "eog"}
UNNORMALISED_ID = "-1"

# EoG .data: after ``pmid<TAB>text``, 17 tab-separated fields per candidate pair, as written by
# data_processing/process.py and read by src/reader.py (``chunks(line[2:], 17)``).
EOG_PAIR_FIELDS = 17
EOG_TYPE, EOG_DIRECTION, EOG_CROSS = 0, 1, 2
EOG_CLOSEST = (3, 4)  # token span of the closest arg1 / arg2 mentions, 'start-end'
EOG_ARG_FIELDS = ("id", "names", "type", "starts", "ends", "sentences")
EOG_ARGS = (("arg1", 5), ("arg2", 11))  # where each argument's six fields start
EOG_DIRECTIONS = ("L2R", "R2L")
EOG_CROSS_VALUES = ("CROSS", "NON-CROSS")
# Pair types that are not relations: "1:NR:2" (no relation) and "not_include", which EoG's
# filter_hypernyms.py writes for a negative pair whose entity is a MeSH hypernym of a positive
# pair's (same other entity): such pairs are left out of training and scoring.
EOG_NO_RELATION = "NR"
EOG_EXCLUDED = "not_include"
# EoG's data_processing writes each split twice: train.data and, after filter_hypernyms.py,
# train_filter.data. Its configs (configs/parameters_cdr.yaml: train_filter.data,
# dev_filter.data) train and evaluate on the filtered files, so that is the default.
EOG_VARIANTS = ("filter", "plain")
EOG_VARIANT = "filter"
EOG_FILTER_SUFFIX = "_filter"

SAMPLE_FOLDER = "docre_sample"


# The sentence splitter: a sentence ends at ., ? or ! (optionally followed by closing quotes or
# brackets), then whitespace, then -- possibly after an opening quote or bracket -- an upper-case
# letter or a digit.
_SENTENCE_END_RE = re.compile(r"""[.?!]["')\]]*\s+(?=["'(\[]?[A-Z0-9])""")
# Words that end in a period without ending a sentence ("e.g. Ca", "et al. Further").
ABBREVIATIONS = frozenset({"e.g.", "i.e.", "al.", "vs.", "cf.", "fig.", "figs.", "dr.", "no.",
                           "approx.", "ca.", "ref.", "refs."})


# --------------------------------------------------------------------------- the document


@dataclasses.dataclass(frozen=True)
class Mention:
    """One entity mention: ``text == document.text[start:end]``."""

    start: int
    end: int
    text: str
    type: str
    ids: Tuple[str, ...]
    sentence: int = -1


@dataclasses.dataclass(frozen=True)
class Relation:
    """One annotated relation between entities ``id1`` and ``id2`` (e.g. CDR's CID)."""

    type: str
    id1: str
    id2: str


@dataclasses.dataclass
class Document:
    """A document with its mentions, relations and sentence spans (see the module docstring)."""

    pmid: str
    text: str
    mentions: List[Mention]
    relations: List[Relation]
    sentences: List[Tuple[int, int]]
    excluded_pairs: List[Tuple[str, str]] = dataclasses.field(default_factory=list)

    def entities(self):
        """{entity id: [mention indices]} in first-mention order; ``-1`` ids are not entities."""
        out = {}
        for i, m in enumerate(self.mentions):
            for eid in m.ids:
                if eid != UNNORMALISED_ID:
                    out.setdefault(eid, []).append(i)
        return out

    def entity_types(self):
        """{entity id: the type of its first mention}."""
        return {eid: self.mentions[idx[0]].type for eid, idx in self.entities().items()}


class DocREFormatError(ValueError):
    """Malformed DocRE input. The message is one line naming the file, line/record and field."""


class DocREFileNotFoundError(DocREFormatError, MessageFileNotFoundError):
    """A file or folder a DocRE loader needs does not exist; the message names the path."""

# --------------------------------------------------------------------------- shared helpers


def _error(path, loc, where, message):
    """A DocREFormatError "file loc: where: message" (loc e.g. "line 3"), forced onto one line."""
    text = os.path.basename(str(path))
    if loc:
        text += f" {loc}"
    if where:
        text += f": {where}"
    return DocREFormatError(one_line(f"{text}: {message}"))


def _require_file(path):
    if not os.path.isfile(path):
        what = "file (it is a folder)" if os.path.isdir(path) else "file"
        raise DocREFileNotFoundError(f"{path}: no such {what}")


def _read_text(path):
    """A UTF-8 file's text (BOM dropped); an empty or blank file is refused."""
    _require_file(path)
    text = read_utf8(path, lambda line, message: _error(path, f"line {line}", None, message))
    if not text.strip():
        raise _error(path, None, None, "empty file")
    return text


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- sentences


def split_sentences(text, protected=(), breaks=()):
    """Splits ``text`` into sentences; returns their ``(start, end)`` character spans.

    The rule: a sentence ends after ``.``, ``?`` or ``!`` (and any closing quotes or
    brackets right after it) when whitespace follows and then, possibly after an opening
    quote or bracket, an upper-case ASCII letter or a digit. A period ending one of
    :data:`ABBREVIATIONS` (``e.g.``, ``i.e.``, ``et al.``, ``vs.``, ``Fig.`` ...) ends no
    sentence. ``breaks`` are extra offsets where a sentence must start (PubTator: the
    abstract's first character, so the title is a sentence of its own). No sentence starts
    strictly inside a ``protected`` ``(start, end)`` span (the mentions): such a break is
    dropped and the two pieces stay one sentence.

    The spans are in text order, do not overlap, and are stripped of surrounding
    whitespace; every non-whitespace character lies in exactly one span. A blank text
    gives no spans.
    """
    cuts = set(b for b in breaks if 0 < b < len(text))
    for m in _SENTENCE_END_RE.finditer(text):
        end = m.start() + 1  # the word that ends in the punctuation: up to 30 characters back
        word = text[max(0, end - 30):end].rsplit(None, 1)[-1]
        if word.lower() not in ABBREVIATIONS:
            cuts.add(m.end())
    cuts = sorted(cuts)
    if cuts and protected:
        # A cut inside a mention would put the mention in two sentences: drop cuts with
        # some mention starting before and ending after them (the running maximum of ends).
        spans = sorted(protected)
        starts, reach, furthest = [s for s, _ in spans], [], 0
        for _, end in spans:
            furthest = max(furthest, end)
            reach.append(furthest)
        cuts = [c for c in cuts if not (k := bisect.bisect_left(starts, c)) or reach[k - 1] <= c]
    bounds = [0] + cuts + [len(text)]
    spans = []
    for start, end in zip(bounds, bounds[1:]):
        piece = text[start:end]
        stripped = piece.strip()
        if stripped:
            first = start + len(piece) - len(piece.lstrip())
            spans.append((first, first + len(stripped)))
    return spans


def _assign_sentences(spans, mentions):
    """(spans, Mentions) from sentence spans and ``(start, end, text, type, ids)`` tuples:
    each mention goes to the sentence it starts in (its ``sentence`` index; -1 without
    sentences); a span is widened to the mentions in it (a mention starting or ending in
    whitespace that the sentence's stripping cut off)."""
    if not spans:
        return spans, [Mention(*m) for m in mentions]
    starts = [s for s, _ in spans]
    spans = [list(span) for span in spans]
    out = []
    for start, end, text, kind, ids in mentions:
        k = max(0, bisect.bisect_right(starts, start) - 1)
        span = spans[k]
        if start < span[0]:
            span[0] = start
        if end > span[1]:
            span[1] = end
        out.append(Mention(start, end, text, kind, ids, k))
    return [tuple(span) for span in spans], out



# --------------------------------------------------------------------------- PubTator

_TITLE_RE = bioc.pubtator.decoder.TITLE_PATTERN
_ABSTRACT_RE = bioc.pubtator.decoder.ABSTRACT_PATTERN
_INTEGER_RE = re.compile(r"-?\d+")
_PUBTATOR_LINES = ("expected 'PMID|t|title', 'PMID|a|abstract', a mention (PMID, start, end, "
                   "text, type, id [, texts]) or a relation (PMID, type, id1, id2), "
                   "tab-separated")


class _Line(str):
    """A line of a PubTator file that keeps its 1-based ``number`` through bioc's parse.

    bioc's parser (:func:`bioc.pubtator.iterparse_s`) keeps no line numbers. It strips each
    line and splits mention and relation lines on tabs; a ``_Line`` keeps its number through
    ``strip()``, and the first field its ``split()`` gives (the pmid) keeps it too. So every
    mention and relation bioc builds carries, in its ``pmid``, the line it was read from.
    """

    def __new__(cls, text, number):
        line = str.__new__(cls, text)
        line.number = number
        return line

    def strip(self, chars=None):
        text = str.strip(self, chars)
        return self if len(text) == len(self) else _Line(text, self.number)

    def split(self, sep=None, maxsplit=-1):
        parts = str.split(self, sep, maxsplit)
        parts[0] = _Line(parts[0], self.number)
        return parts


def _blocks(lines):
    """The documents of a PubTator file as lists of :class:`_Line`: runs of lines that do
    not strip to nothing (bioc's rule: such a line ends a document)."""
    block = []
    for number, text in enumerate(lines, 1):
        if text.strip():
            block.append(_Line(text, number))
        elif block:
            yield block
            block = []
    if block:
        yield block


def _parse_error(path, line, error):
    """The DocREFormatError for a line bioc raised ``error`` on (a bad offset, or bioc's own)."""
    fields = str(line).strip().split("\t")
    if len(fields) >= 6:
        for column, name in ((1, "start"), (2, "end")):
            if not _INTEGER_RE.fullmatch(fields[column]):
                return _error(path, f"line {line.number}", f"field {name}",
                              f"offset {show(fields[column])} is not an integer")
    return _error(path, f"line {line.number}", None,
                  f"cannot parse {show(str(line).strip())}: {error}")


def _bioc_parse(path, block, problems):
    """``(bioc document or None, lines)``: bioc's parse of one block.

    A line bioc raises on is named in the error. In lenient mode it is recorded and
    dropped, and the block parsed again; the lines returned are those bioc read.
    """
    while True:
        lines = iter(block)
        try:
            docs = list(bioc.pubtator.iterparse_s(lines))
        except (ValueError, IndexError, TypeError) as e:
            # bioc raised on the last line it took from the iterator.
            bad = block[len(block) - operator.length_hint(lines) - 1]
            with collect(problems, DocREFormatError):
                raise _parse_error(path, bad, e) from None
            block = [line for line in block if line is not bad]
            continue
        return (docs[0] if docs else None), block


def _block_problems(path, block, doc):
    """``(error or None, errors)``: why a block is not one document, and its unread lines.

    Lines that bioc made into no mention or relation must be one title and at most one
    abstract line of the same pmid: bioc overwrites a second title (two documents without
    a blank line between them), drops a document without a pmid or text, and prints and
    skips a line it cannot read, all silently. The first error is about the document; the
    others name the lines bioc could not read (the document stands without them).
    """
    used = set()
    if doc is not None:
        used = ({ann.pmid.number for ann in doc.annotations}
                | {rel.pmid.number for rel in doc.relations})
    titles, abstracts, unread = [], [], []
    for line in block:
        if line.number in used:
            continue
        text = str.strip(line)
        for pattern, found in ((_TITLE_RE, titles), (_ABSTRACT_RE, abstracts)):
            m = pattern.match(text)
            if m:
                found.append((line.number, m.group(1)))
                break
        else:
            unread.append((line.number, text))

    def fail(number, message):
        return _error(path, f"line {number}", None, message), []

    if not titles:
        return fail(block[0].number, "document without a 'PMID|t|title' line")
    for kind, found in (("title", titles), ("abstract", abstracts)):
        if len(found) > 1:
            return fail(found[1][0], f"a second {kind} line (first on line {found[0][0]}); "
                        "separate documents with a blank line")
    title_line, pmid = titles[0]
    if not pmid:
        return fail(title_line, "empty pmid")
    if abstracts and abstracts[0][1] != pmid:
        return fail(abstracts[0][0], f"abstract pmid {show(abstracts[0][1])} differs from title "
                    f"pmid {show(pmid)} on line {title_line}")
    if doc is None:  # bioc keeps a document only with a pmid and some text
        return fail(block[0].number, "document with neither title nor abstract text")
    return None, [_error(path, f"line {number}", None, f"cannot read {show(text)}: "
                         f"{_PUBTATOR_LINES}") for number, text in unread]


def _pubtator_mention(path, pmid, text, ann):
    """``(start, end, text, type, ids)`` of one of bioc's annotations, checked against the
    document's text (the Mention is made once its sentence is known)."""
    loc, where = f"line {ann.pmid.number}", f"pmid {pmid}"
    if ann.pmid != pmid:
        raise _error(path, loc, where, f"mention pmid {show(str(ann.pmid))} differs from the "
                     "document's")
    if not 0 <= ann.start < ann.end <= len(text):
        raise _error(path, loc, where, f"mention {show(ann.text)} offsets [{ann.start}, "
                     f"{ann.end}) are outside the text (length {len(text)}) or empty")
    found = text[ann.start:ann.end]
    if found != ann.text:
        raise _error(path, loc, where, f"mention offsets [{ann.start}, {ann.end}) cover "
                     f"{show(found)} but the mention text is {show(ann.text)}")
    ids = tuple(ann.id.split("|"))
    if not all(ids):
        raise _error(path, loc, "field id", f"empty entity id in {show(ann.id)}")
    return ann.start, ann.end, ann.text, ann.type, ids


def _pubtator_relation(path, pmid, lines, rel):
    """The Relation of one of bioc's relations."""
    loc = f"line {rel.pmid.number}"
    if len(lines[rel.pmid.number - 1].split("\t")) >= 6:
        # bioc strips each line: a mention whose last field (the id) is empty reads as a relation.
        raise _error(path, loc, "field id", "empty entity id; use -1 for a mention without one")
    if rel.pmid != pmid:
        raise _error(path, loc, f"pmid {pmid}", f"relation pmid {show(str(rel.pmid))} differs "
                     "from the document's")
    return Relation(rel.type, rel.id1, rel.id2)


def _pubtator_document(path, lines, block, problems):
    """The Document of one block of a PubTator file."""
    doc, block = _bioc_parse(path, block, problems)
    problem, unread = _block_problems(path, block, doc)
    if problem is not None:
        raise problem
    for error in unread:
        with collect(problems, DocREFormatError):
            raise error
    pmid = doc.pmid
    title = doc.title or ""
    # PubTator offsets index the title, one character (a space), then the abstract.
    text = title if doc.abstract is None else title + " " + doc.abstract
    mentions, relations = [], []
    for ann in doc.annotations:
        with collect(problems, DocREFormatError):
            mentions.append(_pubtator_mention(path, pmid, text, ann))
    for rel in doc.relations:
        with collect(problems, DocREFormatError):
            relations.append(_pubtator_relation(path, pmid, lines, rel))
    breaks = [len(title) + 1] if doc.abstract is not None else []
    spans = split_sentences(text, [m[:2] for m in mentions], breaks)
    sentences, mentions = _assign_sentences(spans, mentions)
    return Document(pmid, text, mentions, relations, sentences)


def load_pubtator(path, problems=None):
    """Loads a PubTator file (CDR, GDA, CHR) as a list of :class:`Document`, in file order.

    Each document is a run of lines, documents separated by blank lines::

        PMID|t|title
        PMID|a|abstract
        PMID<TAB>start<TAB>end<TAB>text<TAB>type<TAB>id[<TAB>texts]
        PMID<TAB>type<TAB>id1<TAB>id2

    The lines are parsed by the ``bioc`` library (:func:`bioc.pubtator.iterparse_s`), one
    document at a time; its errors become :class:`DocREFormatError` naming the line, and so
    do the cases it passes over silently (a line it cannot read, a second title line, a
    document without a title). A mention's id may be composite, ``D1|D2`` (ids ``("D1",
    "D2")``; the optional seventh column holds the individual texts and is not kept), or
    ``-1`` (``("-1",)``, no normalised entity). A relation line's type is kept as written
    (``CID`` in CDR, ``GDA`` in GDA); a fifth column, if any, is ignored. Relations are
    not checked against the mentions.

    ``text`` is the title, one space, then the abstract (the title alone without an
    abstract line); PubTator offsets index that string. Every mention must satisfy
    ``text[start:end] == mention text``, else the error names the file, line, pmid,
    offsets and both strings. Sentences come from :func:`split_sentences` with the
    title as a sentence of its own and no sentence break inside a mention; each
    mention's ``sentence`` is the index of the sentence it lies in.

    ``problems``: a list for lenient loading (see the module docstring): a bad mention or
    relation line is skipped, a bad document dropped.
    """
    lines = text_lines(_read_text(path))
    docs = []
    # bioc prints each line it cannot read (numbered within the block); _block_problems names it.
    with contextlib.redirect_stdout(io.StringIO()):
        for block in _blocks(lines):
            with collect(problems, DocREFormatError):
                docs.append(_pubtator_document(path, lines, block, problems))
    if not docs:
        raise _error(path, None, None, "no documents")
    return docs

# --------------------------------------------------------------------------- token documents


def _token_layout(sentences):
    """Char spans of tokens and sentences when tokens are joined by single spaces and the
    sentences by one space: (text, token spans per sentence, sentence spans)."""
    token_spans, sentence_spans, pos = [], [], 0
    for tokens in sentences:
        spans = []
        start = pos
        for token in tokens:
            spans.append((pos, pos + len(token)))
            pos += len(token) + 1
        token_spans.append(spans)
        sentence_spans.append((start, pos - 1))
    text = " ".join(" ".join(tokens) for tokens in sentences)
    return text, token_spans, sentence_spans

# --------------------------------------------------------------------------- DocRED


def _docred_field(path, rec, record, field, kind, where=None):
    """``record[field]``, checked to be of ``kind`` (list/str)."""
    loc = f"record {rec}"
    if field not in record:
        raise _error(path, loc, where or f"field {field}", "missing field")
    value = record[field]
    if not isinstance(value, kind):
        raise _error(path, loc, where or f"field {field}", f"must be a "
                     f"{'list' if kind is list else 'string'}, got {show(value)}")
    return value


def _docred_index(path, rec, where, value, size, what):
    if not _is_int(value) or not 0 <= value < size:
        raise _error(path, f"record {rec}", where, f"{show(value)} is not a {what} index "
                     f"(0..{size - 1})")
    return value


def _docred_record(path, rec, record):
    """(Document, [[mention name, ...] per entity]) of one DocRED record (1-based ``rec``)."""
    loc = f"record {rec}"
    if not isinstance(record, dict):
        raise _error(path, loc, None, f"expected a JSON object, got {type(record).__name__}")
    title = _docred_field(path, rec, record, "title", str)
    sents = _docred_field(path, rec, record, "sents", list)
    for k, tokens in enumerate(sents):
        if (not isinstance(tokens, list) or not tokens
                or not all(isinstance(t, str) for t in tokens)):
            raise _error(path, loc, f"field sents[{k}]", "must be a non-empty list of token "
                         f"strings, got {show(tokens)}")
    if not sents:
        raise _error(path, loc, "field sents", "no sentences")
    text, token_spans, sentence_spans = _token_layout(sents)
    vertex_set = _docred_field(path, rec, record, "vertexSet", list)
    mentions, names = [], []
    for e, entity in enumerate(vertex_set):
        if not isinstance(entity, list) or not entity:
            raise _error(path, loc, f"field vertexSet[{e}]", "must be a non-empty list of "
                         f"mentions, got {show(entity)}")
        names.append([])
        for k, m in enumerate(entity):
            where = f"field vertexSet[{e}][{k}]"
            if not isinstance(m, dict):
                raise _error(path, loc, where, f"must be an object, got {show(m)}")
            for field in ("name", "sent_id", "pos", "type"):
                if field not in m:
                    raise _error(path, loc, f"{where}.{field}", "missing field")
            sid = _docred_index(path, rec, f"{where}.sent_id", m["sent_id"], len(sents),
                                "sentence")
            pos = m["pos"]
            n = len(sents[sid])
            if (not isinstance(pos, list) or len(pos) != 2 or not all(map(_is_int, pos))
                    or not 0 <= pos[0] < pos[1] <= n):
                raise _error(path, loc, f"{where}.pos", f"{show(pos)} is not a token span "
                             f"[start, end) of sentence {sid} ({n} tokens)")
            for field in ("name", "type"):
                if not isinstance(m[field], str):
                    raise _error(path, loc, f"{where}.{field}", f"must be a string, got "
                                 f"{show(m[field])}")
            start, end = token_spans[sid][pos[0]][0], token_spans[sid][pos[1] - 1][1]
            mentions.append(Mention(start, end, text[start:end], m["type"], (str(e),), sid))
            names[-1].append(m["name"])
    relations = []
    labels = record.get("labels", [])
    if not isinstance(labels, list):
        raise _error(path, loc, "field labels", f"must be a list, got {show(labels)}")
    for k, label in enumerate(labels):
        where = f"field labels[{k}]"
        if not isinstance(label, dict) or not all(f in label for f in ("h", "t", "r")):
            raise _error(path, loc, where, f"must be an object with h, t and r, got "
                         f"{show(label)}")
        h = _docred_index(path, rec, f"{where}.h", label["h"], len(vertex_set), "vertexSet")
        t = _docred_index(path, rec, f"{where}.t", label["t"], len(vertex_set), "vertexSet")
        if not isinstance(label["r"], str):
            raise _error(path, loc, f"{where}.r", f"must be a string, got {show(label['r'])}")
        relations.append(Relation(label["r"], str(h), str(t)))
    return Document(title, text, mentions, relations, sentence_spans), names


def _docred_records(path, problems=None):
    """[(Document, names per entity)] of a DocRED JSON file."""
    text = _read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise _error(path, f"line {e.lineno}", None, f"not valid JSON ({e.msg} at column "
                     f"{e.colno})") from None
    if not isinstance(data, list):
        raise _error(path, None, None, f"expected a JSON list of documents, got "
                     f"{type(data).__name__}")
    out = []
    for rec, record in enumerate(data, 1):
        with collect(problems, DocREFormatError):
            out.append(_docred_record(path, rec, record))
    return out


def load_docred(path, problems=None):
    """Loads a DocRED-style JSON file as a list of :class:`Document`, in file order.

    The file is a JSON list of documents ``{"title", "sents", "vertexSet", "labels"}``:
    ``sents`` is a list of sentences, each a list of token strings; ``vertexSet`` a list of
    entities, each a list of mentions ``{"name", "sent_id", "pos": [start, end), "type"}``
    (token indices within sentence ``sent_id``, end exclusive); ``labels`` a list of
    ``{"h", "t", "r", "evidence"}`` (vertexSet indices and the relation). ``labels`` may
    be absent (DocRED's test file): no relations. Other keys are ignored.

    ``text`` is the tokens joined by single spaces, sentence after sentence, sentences
    joined by one space; ``sentences`` are the sentences' spans in it. A mention's offsets
    are its tokens' span, its ``text`` the tokens joined by spaces (DocRED's ``name`` may
    differ, e.g. in spacing: see :func:`fact_keys`), its ``ids`` ``(str(entity index),)``,
    its ``sentence`` ``sent_id``. Mentions are listed entity by entity in vertexSet order,
    so ``Document.entities()`` follows vertexSet order. Each label is
    ``Relation(r, str(h), str(t))``; ``evidence`` is not kept. ``pmid`` is the title.
    Errors name the 1-based record and the field, e.g. ``vertexSet[2][0].pos``;
    ``problems`` (a list) makes the load lenient: a bad record is skipped.
    """
    return [doc for doc, _ in _docred_records(path, problems)]


def fact_keys(documents):
    """The set of ``(head name, tail name, relation)`` facts, for DocRED's Ign F1.

    DocRED's rule (its ``evaluation.py``): a correctly predicted relation ``r`` between
    entities ``h`` and ``t`` is *ignored* in Ign F1 when, for some mention name ``n1`` of
    ``h`` and ``n2`` of ``t``, ``(n1, n2, r)`` is among the training facts, i.e. the
    keys returned here for the training documents (every pair of mention names of each
    labelled relation's head and tail).

    ``documents`` is a list of :class:`Document` (a mention's name is its ``text``), or
    the path of a DocRED JSON file, whose ``name`` fields are then used exactly as
    DocRED's evaluation does (a name may differ from the space-joined tokens).
    """
    if isinstance(documents, (str, os.PathLike)):
        pairs = _docred_records(os.fspath(documents))
    else:
        pairs = []
        for doc in documents:
            names = {eid: [doc.mentions[i].text for i in idx]
                     for eid, idx in doc.entities().items()}
            pairs.append((doc, names))
    keys = set()
    for doc, names in pairs:
        if isinstance(names, list):
            names = {str(e): n for e, n in enumerate(names)}
        for rel in doc.relations:
            for n1 in names.get(rel.id1, ()):
                for n2 in names.get(rel.id2, ()):
                    keys.add((n1, n2, rel.type))
    return keys

# --------------------------------------------------------------------------- EoG .data


def _eog_ints(path, lineno, where, value):
    try:
        return [int(v) for v in value.split(":")]
    except ValueError:
        raise _error(path, f"line {lineno}", where, f"{show(value)} is not a ':'-separated "
                     "list of integers") from None


def _eog_relation_type(pair_type):
    """"1:CID:2" -> "CID"; None for a pair with no relation ("1:NR:2", "not_include")."""
    m = re.fullmatch(r"\d+:(.*):\d+", pair_type)
    name = m.group(1) if m else pair_type
    return None if name in (EOG_NO_RELATION, EOG_EXCLUDED) else name


def _eog_line(path, lineno, line):
    """The Document of one EoG .data line."""
    parts = line.rstrip().split("\t")  # as EoG's reader: line.rstrip().split('\t')
    if len(parts) < 2:
        raise _error(path, f"line {lineno}", None, "expected 'PMID<TAB>sentences' and "
                     f"{EOG_PAIR_FIELDS} fields per pair, got {len(parts)} field(s)")
    pmid, body, rest = parts[0], parts[1], parts[2:]
    if len(rest) % EOG_PAIR_FIELDS:
        raise _error(path, f"line {lineno}", f"pmid {pmid}", f"{len(rest)} fields after the "
                     f"text, not a multiple of {EOG_PAIR_FIELDS} (one group per pair)")
    sentences = [s.split(" ") for s in body.split("|")]
    text, token_spans, sentence_spans = _token_layout(sentences)
    # Document-level token index -> (sentence, char span); EoG counts tokens over the whole
    # document (' '.join(sentences).split(' ')).
    flat = [(k, span) for k, spans in enumerate(token_spans) for span in spans]
    first_token = [0]
    for spans in token_spans:
        first_token.append(first_token[-1] + len(spans))
    seen, by_span, relations, excluded = set(), {}, [], []
    for p in range(len(rest) // EOG_PAIR_FIELDS):
        pair = rest[p * EOG_PAIR_FIELDS:(p + 1) * EOG_PAIR_FIELDS]
        where = f"pmid {pmid} pair {p + 1}"
        if pair[EOG_DIRECTION] not in EOG_DIRECTIONS or pair[EOG_CROSS] not in EOG_CROSS_VALUES:
            raise _error(path, f"line {lineno}", where, f"direction {show(pair[EOG_DIRECTION])} "
                         f"and cross {show(pair[EOG_CROSS])} must be one of "
                         f"{'/'.join(EOG_DIRECTIONS)} and {'/'.join(EOG_CROSS_VALUES)}; are the "
                         "fields shifted?")
        for arg, base in EOG_ARGS:
            eid, _names, etype, starts, ends, sent_ids = pair[base:base + len(EOG_ARG_FIELDS)]
            if not eid:
                raise _error(path, f"line {lineno}", f"{where} {arg} id", "empty entity id")
            if eid in seen:
                continue  # an entity recurs in every pair it is part of
            seen.add(eid)
            fields = [_eog_ints(path, lineno, f"{where} {arg} {name}", value) for name, value in
                      (("starts", starts), ("ends", ends), ("sentences", sent_ids))]
            if not len(fields[0]) == len(fields[1]) == len(fields[2]):
                raise _error(path, f"line {lineno}", f"{where} {arg}", f"{len(fields[0])} starts, "
                             f"{len(fields[1])} ends and {len(fields[2])} sentence ids")
            for start, end, sid in zip(*fields):
                if not 0 <= sid < len(sentences):
                    raise _error(path, f"line {lineno}", f"{where} {arg} sentences", f"sentence "
                                 f"{sid} is outside the document ({len(sentences)} sentences)")
                if not first_token[sid] <= start < end <= first_token[sid + 1]:
                    raise _error(path, f"line {lineno}", f"{where} {arg}", f"tokens "
                                 f"{start}-{end} are not inside sentence {sid} (tokens "
                                 f"{first_token[sid]}-{first_token[sid + 1]})")
                key = (flat[start][1][0], flat[end - 1][1][1], etype)
                ids, _ = by_span.setdefault(key, ([], sid))
                if eid not in ids:
                    ids.append(eid)  # one span under two ids: a composite mention
        if pair[EOG_TYPE] == EOG_EXCLUDED:
            excluded_pair = (pair[EOG_ARGS[0][1]], pair[EOG_ARGS[1][1]])
            if excluded_pair not in excluded:
                excluded.append(excluded_pair)
        rtype = _eog_relation_type(pair[EOG_TYPE])
        if rtype is not None:
            relation = Relation(rtype, pair[EOG_ARGS[0][1]], pair[EOG_ARGS[1][1]])
            if relation not in relations:
                relations.append(relation)
    mentions = [Mention(start, end, text[start:end], etype, tuple(ids), sid)
                for (start, end, etype), (ids, sid) in sorted(by_span.items(),
                                                              key=lambda kv: kv[0][:2])]
    return Document(pmid, text, mentions, relations, sentence_spans, excluded)


def load_eog(path, problems=None):
    """Loads an EoG ``.data`` file (edge-oriented graph, Christopoulou et al. 2019).

    The layout is that of GitHub fenchri/edge-oriented-graph: written by
    ``data_processing/process.py``, read by ``src/reader.py`` (``read``). One document per
    line, tab-separated: the PMID, the sentences joined by ``|`` (tokens joined by single
    spaces), then :data:`EOG_PAIR_FIELDS` fields per candidate pair:

    0. pair type, ``1:CID:2`` (``1:GDA:2``...) or ``1:NR:2`` (no relation); EoG also
       knows ``not_include``;
    1. direction ``L2R``/``R2L`` and 2. ``CROSS``/``NON-CROSS``;
    3-4. token spans ``start-end`` of the closest arg1 and arg2 mentions;
    5-10. arg1: entity id (EoG joins an entity's ids with ``|``), mention names
       (``|``-joined), type, mention start tokens, end tokens (exclusive) and sentence
       ids (each ``:``-joined);
    11-16. arg2, the same six fields.

    Token indices count over the whole document, not per sentence. ``text`` is the
    sentences joined by one space (tokens stay joined by single spaces), so a mention's
    offsets are its tokens' character span and ``text`` its tokens; ``sentences`` are the
    sentences' spans. Each entity is read once (from its first pair, as EoG's reader);
    mentions of the same span and type are merged, their ids in order (EoG writes a
    composite mention once per id); mentions are sorted by offset. A relation is kept for
    each pair whose type is not ``NR``/``not_include``, typed by the middle of
    ``1:TYPE:2``, ``id1`` the arg1 id; duplicates are dropped. A ``not_include`` pair
    (written by EoG's ``filter_hypernyms.py`` into the ``_filter`` files) is kept as
    ``(arg1 id, arg2 id)`` in ``excluded_pairs``. The names field is not used (EoG's names
    are normalised PubTator strings). Blank lines are skipped; a document without pairs
    has no mentions. ``problems`` (a list) makes the load lenient: a bad line is skipped.
    """
    docs = []
    for lineno, line in enumerate(text_lines(_read_text(path)), 1):
        if line.strip():
            with collect(problems, DocREFormatError):
                docs.append(_eog_line(path, lineno, line))
    if not docs:
        raise _error(path, None, None, "no documents")
    return docs

# --------------------------------------------------------------------------- dispatcher


def guess_format(path):
    """The format of a DocRE file: "pubtator", "docred" or "eog".

    By extension (the last one): ``.pubtator`` and ``.txt`` are PubTator (CDR's
    ``*.PubTator.txt``), ``.json`` DocRED, ``.data`` EoG. Otherwise by content: a first
    non-blank line ``PMID|t|...`` is PubTator, one starting with ``[`` DocRED JSON, a
    tab-separated line with ``2 + 17k`` fields EoG.
    """
    ext = os.path.splitext(str(path))[1].lower()
    if ext in EXTENSIONS:
        return EXTENSIONS[ext]
    first = next((line for line in text_lines(_read_text(path)) if line.strip()), "")
    if _TITLE_RE.match(first.strip()):
        return "pubtator"
    if first.lstrip().startswith("["):
        return "docred"
    fields = first.rstrip().split("\t")
    if len(fields) >= 2 and (len(fields) - 2) % EOG_PAIR_FIELDS == 0:
        return "eog"
    raise _error(path, None, None, "cannot tell the format (PubTator, DocRED JSON or EoG "
                 "data) from the name or the first line; pass format=")


_LOADERS = {"pubtator": load_pubtator, "docred": load_docred, "eog": load_eog}


def _split_of(name):
    """The split a file name names (lower-cased, the word not preceded by a letter), or
    None when it names none or several (EoG's ``train+dev.data``)."""
    lower = name.lower()
    found = [split for split, words in SPLIT_WORDS.items()
             if any(re.search(rf"(?<![a-z]){word}", lower) for word in words)]
    return found[0] if len(found) == 1 else None


def _is_blank(path):
    """True if the file holds nothing but whitespace (and perhaps a UTF-8 BOM)."""
    with open(path, "rb") as f:
        return not f.read().lstrip(b"\xef\xbb\xbf").strip()


def _eog_pair(names):
    """``{"filter": name, "plain": name}`` if ``names`` are one EoG split written twice
    (``train.data`` and ``train_filter.data``), else None."""
    if len(names) != 2:
        return None
    stems = sorted((os.path.splitext(n)[0].lower(), n) for n in names
                   if os.path.splitext(n)[1].lower() == ".data")
    if len(stems) == 2 and stems[1][0] == stems[0][0] + EOG_FILTER_SUFFIX:
        return {"plain": stems[0][1], "filter": stems[1][1]}
    return None


def split_files(folder, *, eog_variant=EOG_VARIANT, notes=None):
    """{split: path} of the split files in ``folder`` (see :func:`load_documents`).

    An empty (or blank) file counts as absent, with a note in ``notes``. Where a split has
    both EoG files, ``train.data`` and ``train_filter.data``, ``eog_variant`` picks one
    ("filter", the default, or "plain"); which one is noted.
    """
    if eog_variant not in EOG_VARIANTS:
        raise ValueError(f"unknown EoG variant {eog_variant!r}; valid: {', '.join(EOG_VARIANTS)}")
    if not os.path.isdir(folder):
        raise DocREFileNotFoundError(f"{folder}: no such folder")
    found = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.startswith(".") or not os.path.isfile(path):
            continue
        if os.path.splitext(name)[1].lower() not in EXTENSIONS:
            continue
        split = _split_of(name)
        if split is None:
            continue
        if _is_blank(path):
            if notes is not None:
                notes.append(f"{name}: empty file, read as no {split} split")
            continue
        found.setdefault(split, []).append(name)
    chosen, eog = {}, False
    for split, names in found.items():
        pair = _eog_pair(names)
        if pair is not None:
            chosen[split], eog = pair[eog_variant], True
        elif len(names) > 1:
            raise _error(folder, None, None, f"two {split} files, {names[0]} and {names[1]}; "
                         "load the one you mean with its path")
        else:
            chosen[split] = names[0]
            stem, ext = os.path.splitext(names[0].lower())
            variant = EOG_VARIANTS[0] if stem.endswith(EOG_FILTER_SUFFIX) else EOG_VARIANTS[1]
            if ext == ".data" and variant != eog_variant and notes is not None:
                notes.append(f"{names[0]}: the only {split} file, read although the EoG "
                             f"variant asked for is {eog_variant!r}")
    if not chosen:
        raise DocREFileNotFoundError(f"{folder}: no train, dev or test file "
                                     f"({', '.join(EXTENSIONS)})")
    if eog and notes is not None:
        other = EOG_VARIANTS[1 - EOG_VARIANTS.index(eog_variant)]
        notes.append(f"EoG files: the {eog_variant!r} variant, "
                     f"{', '.join(chosen[s] for s in SPLITS if s in chosen)} (variant {other!r} "
                     f"reads the others; 'filter' marks negatives that are MeSH hypernyms of a "
                     f"positive's entity not_include, as EoG's configs train and score)")
    return {split: os.path.join(folder, chosen[split]) for split in SPLITS if split in chosen}


def load_documents(path, format=None, *, eog_variant=EOG_VARIANT, notes=None,  # noqa: A002
                   problems=None):
    """Loads DocRE data from a file (a list of :class:`Document`) or a folder of splits.

    ``format`` is "pubtator", "docred" or "eog"; by default it is guessed per file by
    :func:`guess_format` (``.pubtator``/``.txt``/PubTator content, ``.json``, ``.data``).

    A folder gives ``{split: [Document, ...]}`` for the splits it holds, in
    train/dev/test order. A file belongs to a split when its name, case-insensitively,
    contains ``train``, ``dev`` or ``test`` not preceded by a letter -- so CDR's
    ``CDR_TrainingSet.PubTator.txt``, ``CDR_DevelopmentSet.PubTator.txt`` and
    ``CDR_TestSet.PubTator.txt``, GDA's ``training.txt``/``testing.txt`` and
    ``train.data``/``dev.data``/``test.data`` all match -- and its extension is one of
    ``.pubtator``, ``.txt``, ``.json``, ``.data``. A name matching several splits
    (``train+dev.data``) or none (``rel_info.json``) is skipped, and so is an empty file
    (noted). Two files for one split are an error, except EoG's two variants of a split
    (``train.data``, ``train_filter.data``): ``eog_variant`` picks one, "filter" (the
    default, :data:`EOG_VARIANT`) or "plain" (see :func:`split_files`).

    ``notes`` and ``problems``: lists, see the module docstring. In lenient mode a split
    whose file cannot be read at all is left out, its error in ``problems``.
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; valid: {', '.join(FORMATS)}")
    if not os.path.exists(path):
        raise DocREFileNotFoundError(f"{path}: no such file or folder")
    if not os.path.isdir(path):
        return _LOADERS[format or guess_format(path)](path, problems)
    out = {}
    for split, file in split_files(path, eog_variant=eog_variant, notes=notes).items():
        with collect(problems, DocREFormatError):
            out[split] = _LOADERS[format or guess_format(file)](file, problems)
    return out


def load_document_splits(path, *, seed, format=None, eog_variant=EOG_VARIANT,  # noqa: A002
                         dev_fraction=DEV_FRACTION, dev_as_test=False, notes=None,
                         problems=None):
    """``{"train", "dev", "test": [Document]}``: the documents a run trains, selects and scores on.

    Loads ``path`` with :func:`load_documents` (a single file is the train split). A test
    split is required. With ``dev_as_test`` (DocRED, whose test labels are not public:
    FedLCC Table 7 scores the dev split) the dev split becomes the test split. A missing
    dev split is a seeded ``dev_fraction`` of train
    (:func:`tffre.data.splits.complete_splits`; ``dev_fraction=None`` leaves it out). What
    was done is appended to ``notes``.
    """
    loaded = load_documents(path, format, eog_variant=eog_variant, notes=notes,
                            problems=problems)
    splits = dict(loaded) if isinstance(loaded, dict) else {"train": loaded}
    if not splits.get("train"):
        raise ValueError(f"{path}: no training documents (a train file, or a file of training "
                         "documents)")
    if dev_as_test:
        if "dev" not in splits:
            raise ValueError(f"{path}: no dev split, which is scored as the test set here (the "
                             "test labels are not public)")
        if "test" in splits and notes is not None:
            notes.append(f"the test split ({len(splits['test'])} documents) is not used")
        splits["test"] = splits.pop("dev")
        if notes is not None:
            notes.append("the dev split is scored as the test set (its test labels are not "
                         "public; FedLCC Table 7)")
    elif "test" not in splits:
        raise ValueError(f"{path}: no test split (a file whose name holds 'test')")
    return complete_splits(splits, seed=seed, dev_fraction=dev_fraction, notes=notes,
                           what="documents", source=path)


# --------------------------------------------------------------------------- embedded sample


def sample_path():
    """The folder of the embedded, invented CDR-style sample: ``{train,dev,test}.pubtator``.

    Written by ``data/docre_sample/generate.py`` (see ``data/docre_sample/README.md``);
    shipped as package data. SYNTHETIC: no real abstract or annotation is behind it.
    """
    return resources.path(SAMPLE_FOLDER)


def load_sample():
    """The embedded sample as ``{"train": [...], "dev": [...], "test": [...]}`` Documents."""
    return load_documents(sample_path(), format="pubtator")
