"""ChemProt (Krallinger et al. 2017, BioCreative VI Track 5) in its two public copies.

* BLUE's TSV (:func:`tffre.data.formats.blue.load_blue_tsv`): entities blinded as
  ``@CHEMICAL$`` and ``@GENE$``, the relation types already grouped into the CPR classes.
* SciBERT's JSON lines (:func:`load_scibert_chemprot`; GitHub allenai/scibert,
  ``data/text_classification/chemprot/{train,dev,test}.txt``): ``<< >>`` and ``[[ ]]``
  entity markers and ChemProt's raw relation types.

:func:`load_chemprot` reads one file of either, told apart by its content.
"""

import os

from tffre.data.formats.blue import CHEMPROT_LABELS, load_blue_tsv
from tffre.data.sentence_schema import FILES, REFormatError, check_examples, frame, label_error
from tffre.data.splits import SPLITS
from tffre.errors import collect, show

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

# A ChemProt folder: BLUE's TSV files or SciBERT's JSON lines.
CHEMPROT_SPLIT_FILES = {split: (f"{split}.tsv", f"{split}.txt") for split in SPLITS}


def _scibert_row(path, lineno, line, stem, raw_labels):
    """The example row of one line of SciBERT's ChemProt JSON lines."""
    record = FILES.json_object(path, lineno, line)
    for field in ("text", "label"):
        if field not in record:
            raise FILES.error(path, lineno, f"field {field}", "missing field")
        if not isinstance(record[field], str):
            raise FILES.error(path, lineno, f"field {field}",
                              f"must be a string, got {show(record[field])}")
    marked, label = record["text"], record["label"]
    if label != CHEMPROT_LABELS[0] and label not in CHEMPROT_GROUPS:
        raise label_error(path, lineno, label, CHEMPROT_RAW_LABELS)
    # Each entity is "<< name >>" or "[[ name ]]": the marker, the name, the closing marker.
    spans = []
    for k, (opening, closing) in enumerate(SCIBERT_MARKERS, 1):
        count = marked.count(opening)
        if count != 1:
            raise FILES.error(path, lineno, "field text", f"expected one {opening.strip()!r} "
                              f"marker (e{k}), found {count}")
        start = marked.index(opening) + len(opening)
        end = marked.find(closing, start)
        if end < 0:
            raise FILES.error(path, lineno, "field text", f"no {closing.strip()!r} after the "
                              f"{opening.strip()!r} marker (e{k})")
        if end == start:
            raise FILES.error(path, lineno, "field text", f"empty entity e{k}")
        spans.append((start - len(opening), start, end, end + len(closing)))
    (a0, _, _, a1), (b0, _, _, b1) = spans
    if max(a0, b0) < min(a1, b1):
        raise FILES.error(path, lineno, "field text", "the << >> and [[ ]] markers overlap")
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
    lines = FILES.read_lines(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    rows = []
    for lineno, line in enumerate(lines, 1):
        if line.strip():
            with collect(problems, REFormatError):
                rows.append(_scibert_row(path, lineno, line, stem, raw_labels))
    if not rows:
        raise FILES.error(path, None, None, "no examples")
    labels = list(CHEMPROT_RAW_LABELS if raw_labels else CHEMPROT_LABELS)
    return check_examples(frame(rows), labels, os.path.basename(path), problems), labels


def _is_json_lines(path):
    """True if the first non-blank line of a file starts with "{" (SciBERT's ChemProt)."""
    return next((line for line in FILES.read_lines(path) if line.strip()), "").lstrip()[:1] == "{"


def load_chemprot(path, raw_labels=False, problems=None):
    """One ChemProt file, BLUE's TSV or SciBERT's JSON lines (told apart by the content)."""
    if _is_json_lines(path):
        return load_scibert_chemprot(path, raw_labels, problems)
    if raw_labels:
        raise FILES.error(path, None, None, "raw_labels: BLUE's ChemProt TSV holds only the CPR "
                          "groups; the raw relation types are in SciBERT's JSON lines")
    return load_blue_tsv(path, "chemprot", problems)
