"""Small hand-made documents for the document-level RE tests, and slices of the embedded
CDR sample."""

import os

from tffre.data.document_schema import Document, Mention, Relation
from tffre.data.document_sets import sample_path


def sample_blocks(split):
    """The embedded CDR sample's PubTator documents of ``split``, as text blocks."""
    with open(os.path.join(sample_path(), f"{split}.pubtator"), encoding="utf-8") as f:
        return [b for b in f.read().split("\n\n") if b.strip()]


def write_sample_slice(folder, sizes):
    """A PubTator folder (``folder``, existing) of the first ``sizes[split]`` documents of
    each split of the embedded sample; returns it as a string."""
    for split, n in sizes.items():
        text = "\n\n".join(sample_blocks(split)[:n])
        with open(os.path.join(folder, f"{split}.pubtator"), "w", encoding="utf-8") as f:
            f.write(text + "\n\n")
    return str(folder)


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


def relation_facts(documents, featurizer=None):
    """{(document, subject, relation, object)}: the documents' relations, what a run's
    document-level RE evaluation counts as gold (every one, as BioCreative V's CID evaluation:
    one no candidate pair holds is a miss); with ``featurizer``, only those over its candidate
    pairs (``featurizer.pair_ids``), what a deployment's sites count."""
    facts = set()
    for doc in documents:
        pairs = None if featurizer is None else set(featurizer.pair_ids(doc))
        facts.update((doc.pmid, r.id1, r.type, r.id2) for r in doc.relations
                     if pairs is None or (r.id1, r.id2) in pairs)
    return facts


def fact_f1(predicted, gold):
    """Micro F1 of two sets of facts, by hand: 2PR / (P + R), 0 without a true positive."""
    hits = len(predicted & gold)
    if not hits:
        return 0.0
    precision, recall = hits / len(predicted), hits / len(gold)
    return 2 * precision * recall / (precision + recall)
