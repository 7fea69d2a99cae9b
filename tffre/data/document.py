"""The document every document-level RE loader returns (PubTator, DocRED JSON, EoG ``.data``).

One shape for all formats, so the graph, the split and the model read one thing:

* :class:`Document` -- ``pmid`` (the document id; DocRED's title when it has no
  PMID), ``text`` (PubTator: title, a space, abstract), ``mentions``,
  ``relations`` and ``sentences`` (character spans into ``text``, in order,
  covering every mention).
* :class:`Mention` -- character offsets into ``text`` (end exclusive), the
  mention text, its type, its entity ids (a tuple: PubTator's composite
  ``D1|D2`` gives two; ``-1``, an unnormalised mention, gives ``("-1",)``) and
  the index of its sentence.
* :class:`Relation` -- the relation type and the two entity ids.
"""

import dataclasses
from typing import List, Tuple

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
