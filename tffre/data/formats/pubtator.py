"""PubTator: CDR, GDA and CHR as distributed, one abstract per run of lines.

BioCreative V CDR (Li et al. 2016, Database; ``CDR_*Set.PubTator.txt``), GDA after EoG's
``gda2pubtator.py`` and CHR ship their abstracts in PubTator's format: a title line, an
abstract line, then one line per mention and per relation. :func:`load_pubtator` reads a file
with the ``bioc`` library's :mod:`bioc.pubtator` and names the file and line of every problem;
the abstracts' sentences, which the format does not give, come from :func:`split_sentences`.
"""

import bisect
import contextlib
import io
import operator
import re

import bioc.pubtator
import bioc.pubtator.decoder

from tffre.data.document_schema import FILES, DocREFormatError, Document, Mention, Relation
from tffre.errors import collect, show, text_lines

# The sentence splitter: a sentence ends at ., ? or ! (optionally followed by closing quotes or
# brackets), then whitespace, then -- possibly after an opening quote or bracket -- an upper-case
# letter or a digit.
_SENTENCE_END_RE = re.compile(r"""[.?!]["')\]]*\s+(?=["'(\[]?[A-Z0-9])""")
# Words that end in a period without ending a sentence ("e.g. Ca", "et al. Further").
ABBREVIATIONS = frozenset({"e.g.", "i.e.", "al.", "vs.", "cf.", "fig.", "figs.", "dr.", "no.",
                           "approx.", "ca.", "ref.", "refs."})


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

TITLE_RE = bioc.pubtator.decoder.TITLE_PATTERN
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
                return FILES.error(path, f"line {line.number}", f"field {name}",
                                   f"offset {show(fields[column])} is not an integer")
    return FILES.error(path, f"line {line.number}", None,
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
        for pattern, found in ((TITLE_RE, titles), (_ABSTRACT_RE, abstracts)):
            m = pattern.match(text)
            if m:
                found.append((line.number, m.group(1)))
                break
        else:
            unread.append((line.number, text))

    def fail(number, message):
        return FILES.error(path, f"line {number}", None, message), []

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
    return None, [FILES.error(path, f"line {number}", None, f"cannot read {show(text)}: "
                              f"{_PUBTATOR_LINES}") for number, text in unread]


def _pubtator_mention(path, pmid, text, ann):
    """``(start, end, text, type, ids)`` of one of bioc's annotations, checked against the
    document's text (the Mention is made once its sentence is known)."""
    loc, where = f"line {ann.pmid.number}", f"pmid {pmid}"
    if ann.pmid != pmid:
        raise FILES.error(path, loc, where, f"mention pmid {show(str(ann.pmid))} differs from the "
                          "document's")
    if not 0 <= ann.start < ann.end <= len(text):
        raise FILES.error(path, loc, where, f"mention {show(ann.text)} offsets [{ann.start}, "
                          f"{ann.end}) are outside the text (length {len(text)}) or empty")
    found = text[ann.start:ann.end]
    if found != ann.text:
        raise FILES.error(path, loc, where, f"mention offsets [{ann.start}, {ann.end}) cover "
                          f"{show(found)} but the mention text is {show(ann.text)}")
    ids = tuple(ann.id.split("|"))
    if not all(ids):
        raise FILES.error(path, loc, "field id", f"empty entity id in {show(ann.id)}")
    return ann.start, ann.end, ann.text, ann.type, ids


def _pubtator_relation(path, pmid, lines, rel):
    """The Relation of one of bioc's relations."""
    loc = f"line {rel.pmid.number}"
    if len(lines[rel.pmid.number - 1].split("\t")) >= 6:
        # bioc strips each line: a mention whose last field (the id) is empty reads as a relation.
        raise FILES.error(path, loc, "field id",
                          "empty entity id; use -1 for a mention without one")
    if rel.pmid != pmid:
        raise FILES.error(path, loc, f"pmid {pmid}", f"relation pmid {show(str(rel.pmid))} differs "
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
    lines = text_lines(FILES.read_text(path))
    docs = []
    # bioc prints each line it cannot read (numbered within the block); _block_problems names it.
    with contextlib.redirect_stdout(io.StringIO()):
        for block in _blocks(lines):
            with collect(problems, DocREFormatError):
                docs.append(_pubtator_document(path, lines, block, problems))
    if not docs:
        raise FILES.error(path, None, None, "no documents")
    return docs
