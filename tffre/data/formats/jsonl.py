"""This project's generic sentence-level format: one example per JSON line.

Each line is a JSON object with the fields of :data:`tffre.data.sentence_schema.COLUMNS`
(``example_id`` optional), so any corpus converted to the schema can be read without a loader
of its own. :func:`load_jsonl` reads one file; the label list is given or inferred
(:func:`infer_labels`).
"""

import os

from tffre.data.files import is_int
from tffre.data.sentence_schema import (COLUMNS, FILES, OFFSET_COLUMNS, REFormatError,
                                        check_examples, frame, label_error, span_problem)
from tffre.data.splits import SPLITS
from tffre.errors import collect, show

JSONL_REQUIRED = COLUMNS[1:]
JSONL_SPLIT_FILES = {split: f"{split}.jsonl" for split in SPLITS}
# Negative labels that load_jsonl puts first when it infers the label list, in this priority.
NEGATIVE_LABELS = ("None", "false", "0")


def infer_labels(found):
    """The label list for labels seen in data: sorted, a negative label moved first.

    The negative is the first of "None", "false", "0" (:data:`NEGATIVE_LABELS`) that
    occurs; the other labels keep their sorted order.
    """
    labels = sorted(set(found))
    for negative in NEGATIVE_LABELS:
        if negative in labels:
            labels.remove(negative)
            return [negative] + labels
    return labels


def _jsonl_row(path, lineno, line, stem, labels, known, ids):
    """The example row of one line of a JSON-lines file; ``ids`` holds the ids seen."""
    record = FILES.json_object(path, lineno, line)
    for field in JSONL_REQUIRED:
        if field not in record:
            raise FILES.error(path, lineno, f"field {field}", "missing field")
    for field in ("text", "e1_type", "e2_type"):
        if not isinstance(record[field], str):
            raise FILES.error(path, lineno, f"field {field}",
                              f"must be a string, got {show(record[field])}")
    for field in OFFSET_COLUMNS:
        if not is_int(record[field]):
            raise FILES.error(path, lineno, f"field {field}",
                              f"must be an integer, got {show(record[field])}")
    label = record["label"]
    if is_int(label):
        label = str(label)  # {"label": 0} is the natural spelling of label "0"
    if not isinstance(label, str):
        raise FILES.error(path, lineno, "field label", f"must be a string, got {show(label)}")
    if known is not None and label not in known:
        raise label_error(path, lineno, label, labels)
    eid = record.get("example_id", f"{stem}:{lineno}")
    if is_int(eid):
        eid = str(eid)
    if not isinstance(eid, str):
        raise FILES.error(path, lineno, "field example_id", f"must be a string, got {show(eid)}")
    if eid in ids:
        raise FILES.error(path, lineno, "field example_id",
                          f"duplicate example_id {show(eid)} (also line {ids[eid]})")
    ids[eid] = lineno
    offsets = [record[c] for c in OFFSET_COLUMNS]
    problem = span_problem(record["text"], *offsets, record["e1_type"], record["e2_type"])
    if problem:
        raise FILES.error(path, lineno, f"field {problem[0]}", problem[1])
    return (eid, record["text"], *offsets, record["e1_type"], record["e2_type"], label)


def jsonl_rows(path, labels, problems=None):
    """Example rows of a JSON-lines file; labels are checked only when given."""
    lines = FILES.read_lines(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    known = None if labels is None else set(labels)
    rows, ids = [], {}
    for lineno, line in enumerate(lines, 1):
        if line.strip():
            with collect(problems, REFormatError):
                rows.append(_jsonl_row(path, lineno, line, stem, labels, known, ids))
    if not rows:
        raise FILES.error(path, None, None, "no examples (empty file)")
    return rows


def load_jsonl(path, labels=None, problems=None):
    """Loads this project's JSON-lines RE format as ``(examples, labels)``.

    One JSON object per line with the fields of :data:`COLUMNS`; ``example_id`` is
    optional (default ``"{file stem}:{line}"``) and other keys are ignored. Blank lines
    are skipped; a line that is not a JSON object, lacks a field or has a field of the
    wrong type is an error. An integer label or id is read as its decimal string.

    With ``labels=None`` the label list is inferred by :func:`infer_labels` (sorted,
    with "None", "false" or "0" moved first); given ``labels`` (negative first) are
    returned as a list, and a label outside them is an error. ``problems`` (a list) makes
    the load lenient: a bad line is skipped.
    """
    if labels is not None:
        labels = [labels] if isinstance(labels, str) else list(labels)
    rows = jsonl_rows(path, labels, problems)
    if labels is None:
        labels = infer_labels(row[-1] for row in rows)
    return check_examples(frame(rows), labels, os.path.basename(path), problems), labels
