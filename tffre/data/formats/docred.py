"""DocRED (Yao et al. 2019, ACL): a JSON list of documents, tokenised, entities as vertexSets.

DocRED's files (``train_annotated.json``, ``dev.json``, ``test.json``; GitHub
thunlp/DocRED) hold each document as sentences of tokens, its entities as sets of mentions
(token spans) and its relations between entity indices. :func:`load_docred` reads one file;
:func:`fact_keys` gives the training facts for DocRED's Ign F1.
"""

import json
import os

from tffre.data.document_schema import (FILES, DocREFormatError, Document, Mention, Relation,
                                        token_layout)
from tffre.data.files import is_int
from tffre.errors import collect, show


def _docred_field(path, rec, record, field, kind, where=None):
    """``record[field]``, checked to be of ``kind`` (list/str)."""
    loc = f"record {rec}"
    if field not in record:
        raise FILES.error(path, loc, where or f"field {field}", "missing field")
    value = record[field]
    if not isinstance(value, kind):
        raise FILES.error(path, loc, where or f"field {field}", f"must be a "
                          f"{'list' if kind is list else 'string'}, got {show(value)}")
    return value


def _docred_index(path, rec, where, value, size, what):
    if not is_int(value) or not 0 <= value < size:
        raise FILES.error(path, f"record {rec}", where, f"{show(value)} is not a {what} index "
                          f"(0..{size - 1})")
    return value


def _docred_record(path, rec, record):
    """(Document, [[mention name, ...] per entity]) of one DocRED record (1-based ``rec``)."""
    loc = f"record {rec}"
    if not isinstance(record, dict):
        raise FILES.error(path, loc, None, f"expected a JSON object, got {type(record).__name__}")
    title = _docred_field(path, rec, record, "title", str)
    sents = _docred_field(path, rec, record, "sents", list)
    for k, tokens in enumerate(sents):
        if (not isinstance(tokens, list) or not tokens
                or not all(isinstance(t, str) for t in tokens)):
            raise FILES.error(path, loc, f"field sents[{k}]", "must be a non-empty list of token "
                              f"strings, got {show(tokens)}")
    if not sents:
        raise FILES.error(path, loc, "field sents", "no sentences")
    text, token_spans, sentence_spans = token_layout(sents)
    vertex_set = _docred_field(path, rec, record, "vertexSet", list)
    mentions, names = [], []
    for e, entity in enumerate(vertex_set):
        if not isinstance(entity, list) or not entity:
            raise FILES.error(path, loc, f"field vertexSet[{e}]", "must be a non-empty list of "
                              f"mentions, got {show(entity)}")
        names.append([])
        for k, m in enumerate(entity):
            where = f"field vertexSet[{e}][{k}]"
            if not isinstance(m, dict):
                raise FILES.error(path, loc, where, f"must be an object, got {show(m)}")
            for field in ("name", "sent_id", "pos", "type"):
                if field not in m:
                    raise FILES.error(path, loc, f"{where}.{field}", "missing field")
            sid = _docred_index(path, rec, f"{where}.sent_id", m["sent_id"], len(sents),
                                "sentence")
            pos = m["pos"]
            n = len(sents[sid])
            if (not isinstance(pos, list) or len(pos) != 2 or not all(map(is_int, pos))
                    or not 0 <= pos[0] < pos[1] <= n):
                raise FILES.error(path, loc, f"{where}.pos", f"{show(pos)} is not a token span "
                                  f"[start, end) of sentence {sid} ({n} tokens)")
            for field in ("name", "type"):
                if not isinstance(m[field], str):
                    raise FILES.error(path, loc, f"{where}.{field}", f"must be a string, got "
                                      f"{show(m[field])}")
            start, end = token_spans[sid][pos[0]][0], token_spans[sid][pos[1] - 1][1]
            mentions.append(Mention(start, end, text[start:end], m["type"], (str(e),), sid))
            names[-1].append(m["name"])
    relations = []
    labels = record.get("labels", [])
    if not isinstance(labels, list):
        raise FILES.error(path, loc, "field labels", f"must be a list, got {show(labels)}")
    for k, label in enumerate(labels):
        where = f"field labels[{k}]"
        if not isinstance(label, dict) or not all(f in label for f in ("h", "t", "r")):
            raise FILES.error(path, loc, where, f"must be an object with h, t and r, got "
                              f"{show(label)}")
        h = _docred_index(path, rec, f"{where}.h", label["h"], len(vertex_set), "vertexSet")
        t = _docred_index(path, rec, f"{where}.t", label["t"], len(vertex_set), "vertexSet")
        if not isinstance(label["r"], str):
            raise FILES.error(path, loc, f"{where}.r", f"must be a string, got {show(label['r'])}")
        relations.append(Relation(label["r"], str(h), str(t)))
    return Document(title, text, mentions, relations, sentence_spans), names


def _docred_records(path, problems=None):
    """[(Document, names per entity)] of a DocRED JSON file."""
    text = FILES.read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise FILES.error(path, f"line {e.lineno}", None, f"not valid JSON ({e.msg} at column "
                          f"{e.colno})") from None
    if not isinstance(data, list):
        raise FILES.error(path, None, None, f"expected a JSON list of documents, got "
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
