"""EoG ``.data``: the files of the edge-oriented graph model (Christopoulou et al. 2019, EMNLP).

GitHub fenchri/edge-oriented-graph preprocesses CDR and GDA into one line per document (its
tokenised sentences and every candidate entity pair with its mentions), the files FedLCC-style
CDR/GDA code reads. :func:`load_eog` reads one file; :func:`eog_variants` tells the two files
EoG writes for one split (``train.data`` and, hypernym negatives marked, ``train_filter.data``)
apart.
"""

import os
import re

from tffre.data.document_schema import (FILES, DocREFormatError, Document, Mention, Relation,
                                        token_layout)
from tffre.errors import collect, show, text_lines

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


def _eog_ints(path, lineno, where, value):
    try:
        return [int(v) for v in value.split(":")]
    except ValueError:
        raise FILES.error(path, lineno, where, f"{show(value)} is not a ':'-separated "
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
        raise FILES.error(path, lineno, None, "expected 'PMID<TAB>sentences' and "
                          f"{EOG_PAIR_FIELDS} fields per pair, got {len(parts)} field(s)")
    pmid, body, rest = parts[0], parts[1], parts[2:]
    if len(rest) % EOG_PAIR_FIELDS:
        raise FILES.error(path, lineno, f"pmid {pmid}", f"{len(rest)} fields after the "
                          f"text, not a multiple of {EOG_PAIR_FIELDS} (one group per pair)")
    sentences = [s.split(" ") for s in body.split("|")]
    text, token_spans, sentence_spans = token_layout(sentences)
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
            raise FILES.error(path, lineno, where, f"direction {show(pair[EOG_DIRECTION])} "
                              f"and cross {show(pair[EOG_CROSS])} must be one of "
                              f"{'/'.join(EOG_DIRECTIONS)} and {'/'.join(EOG_CROSS_VALUES)}; "
                              "are the fields shifted?")
        for arg, base in EOG_ARGS:
            eid, _names, etype, starts, ends, sent_ids = pair[base:base + len(EOG_ARG_FIELDS)]
            if not eid:
                raise FILES.error(path, lineno, f"{where} {arg} id", "empty entity id")
            if eid in seen:
                continue  # an entity recurs in every pair it is part of
            seen.add(eid)
            fields = [_eog_ints(path, lineno, f"{where} {arg} {name}", value) for name, value in
                      (("starts", starts), ("ends", ends), ("sentences", sent_ids))]
            if not len(fields[0]) == len(fields[1]) == len(fields[2]):
                raise FILES.error(path, lineno, f"{where} {arg}", f"{len(fields[0])} starts, "
                                  f"{len(fields[1])} ends and {len(fields[2])} sentence ids")
            for start, end, sid in zip(*fields):
                if not 0 <= sid < len(sentences):
                    raise FILES.error(path, lineno, f"{where} {arg} sentences", f"sentence "
                                      f"{sid} is outside the document ({len(sentences)} sentences)")
                if not first_token[sid] <= start < end <= first_token[sid + 1]:
                    raise FILES.error(path, lineno, f"{where} {arg}", f"tokens "
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
    for lineno, line in enumerate(text_lines(FILES.read_text(path)), 1):
        if line.strip():
            with collect(problems, DocREFormatError):
                docs.append(_eog_line(path, lineno, line))
    if not docs:
        raise FILES.error(path, None, None, "no documents")
    return docs


def eog_variants(names):
    """``{"filter": name, "plain": name}`` if ``names`` are one EoG split written twice
    (``train.data`` and ``train_filter.data``), else None."""
    if len(names) != 2:
        return None
    stems = sorted((os.path.splitext(n)[0].lower(), n) for n in names
                   if os.path.splitext(n)[1].lower() == ".data")
    if len(stems) == 2 and stems[1][0] == stems[0][0] + EOG_FILTER_SUFFIX:
        return {"plain": stems[0][1], "filter": stems[1][1]}
    return None
