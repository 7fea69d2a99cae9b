"""Small hand-made documents for the document-level RE tests."""

from tffre.data.document_schema import Document, Mention, Relation


def document(pmid, text, mentions, relations):
    """A one-passage :class:`Document`: ``mentions`` are (word, type, entity id, n), the n-th
    occurrence of ``word`` in ``text``; ``relations`` are CID (subject, object) entity ids."""
    ms = []
    for word, typ, eid, nth in mentions:
        start = -1
        for _ in range(nth + 1):
            start = text.index(word, start + 1)
        ms.append(Mention(start, start + len(word), word, typ, (eid,)))
    return Document(pmid, text, ms, [Relation("CID", a, b) for a, b in relations],
                    [(0, len(text))])
