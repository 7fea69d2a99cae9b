"""PGR, Phenotype-Gene Relations (Sousa et al. 2019, NAACL): TSV with character offsets.

The published files (GitHub lasigeBioTM/PGR, ``corpora/*/{train,test}.tsv``) give each
sentence with its gene and phenotype as strings and as character offsets into the sentence
as stored, HTML character references included. :func:`load_pgr` reads one file into the
sentence-level schema (:mod:`tffre.data.sentence_schema`), the references unescaped and the
offsets mapped onto the unescaped text (:func:`unescape_with_offsets`).
"""

import html
import os
import re
import warnings

from tffre.data.sentence_schema import (BINARY_LABELS, FILES, REFormatError, check_examples,
                                        frame, span_problem)
from tffre.errors import collect, show

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
        raise FILES.error(path, lineno, f"field {PGR_HEADER[column]}",
                          f"offset {show(value)} is not an integer") from None


def _pgr_entity(path, lineno, entity, raw, text, pos, start, end, expected, column):
    """Maps an entity's raw-sentence offsets onto the unescaped text; checks its string."""
    where = f"entity {entity} ({PGR_HEADER[column].lower()})"
    if not 0 <= start < end <= len(raw):
        raise FILES.error(path, lineno, where, f"offsets [{start}, {end}) are outside the sentence "
                          f"(length {len(raw)}) or empty")
    new_start, new_end = pos[start], pos[end]
    if new_start < 0 or new_end < 0:
        raise FILES.error(path, lineno, where, f"offsets [{start}, {end}) cut through a character "
                          f"reference in {show(raw[max(0, start - 8):end + 8])}")
    found, wanted = text[new_start:new_end], html.unescape(expected)
    if found != wanted:
        raise FILES.error(path, lineno, where, f"sentence[{start}:{end}] is {show(found)} but "
                          f"{PGR_HEADER[column]} is {show(wanted)}")
    return new_start, new_end


def _pgr_row(path, lineno, parts, stem, skip_invalid, skipped):
    """The example row of one PGR line, or None for a row skipped by ``skip_invalid``."""
    if len(parts) not in PGR_COLUMN_COUNTS:
        raise FILES.error(path, lineno, "columns", f"expected {len(PGR_HEADER)} tab-separated "
                          f"columns ({' '.join(PGR_HEADER)} [CONFIRMATION]), got {len(parts)}")
    relation = parts[PGR_RELATION].strip()
    label = PGR_RELATIONS.get(relation.lower())
    if label is None:
        raise FILES.error(path, lineno, f"field {PGR_HEADER[PGR_RELATION]}",
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
        problem = span_problem(text, s1, e1, s2, e2, "GENE", "PHENOTYPE")
        if problem:
            raise FILES.error(path, lineno, "entity e2", problem[1])
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
    lines = FILES.read_lines(path)
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
        raise FILES.error(path, None, None, "no examples (empty file or header only)")
    examples = check_examples(frame(rows), list(PGR_LABELS), os.path.basename(path), problems)
    return examples, list(PGR_LABELS)
