"""The document of document-level relation extraction (DocRE), one shape for every format.

Every document loader (:mod:`tffre.data.formats`: PubTator, DocRED JSON, EoG ``.data``; any
of them through :mod:`tffre.data.document_sets`) returns :class:`Document` objects, so the
graph, the split and the model read one thing:

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

Bad input raises :class:`DocREFormatError` with a one-line message naming the file, the 1-based
line (PubTator, EoG, a JSON syntax error) or record (DocRED), and the field or document at fault
(:data:`FILES`); a missing path raises :class:`DocREFileNotFoundError`, which is both a
``DocREFormatError`` and a ``FileNotFoundError``. Given a list as ``problems``, the loaders are
lenient instead: each bad line, mention, relation or document is skipped and its message
appended there (:class:`tffre.errors.collect`); errors about a whole file or folder still raise.
Given a list as ``notes``, they append what a user should know about what was read (an empty
split file read as no split, the EoG variant chosen).
"""

import dataclasses
from typing import List, Tuple

from tffre.data.files import Files
from tffre.errors import MessageFileNotFoundError

UNNORMALISED_ID = "-1"


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


FILES = Files(DocREFormatError, DocREFileNotFoundError)


def token_layout(sentences):
    """Char spans of tokens and sentences when tokens are joined by single spaces and the
    sentences by one space: (text, token spans per sentence, sentence spans).

    The tokenised formats (DocRED, EoG) both build a document's text this way, so a mention's
    offsets are its tokens' character span.
    """
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
