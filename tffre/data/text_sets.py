"""Labelled texts from a user's own CSV or JSON-lines file (``--dataset text``).

A record is one text with one label: the columns (CSV, with a header row) or keys (JSON
lines, one object a line) :data:`TEXT` and :data:`LABEL`, and optionally :data:`SITE` (the
hospital that holds it: ``--partition site`` makes each site one client) and
:data:`SPLIT_COLUMN` (train, dev or test). Other columns or keys are ignored. A label is
read as text (JSON's ``1`` is the label ``"1"``).

Splits, as the sentence sets find them (:mod:`tffre.data.sentence_sets`):

* a folder holds ``train``, ``dev`` and ``test`` files (``.csv`` or ``.jsonl``; ``train``
  required, an empty file is read as no split), or
* one file is the whole set; a ``split`` column, when it has one, says which split each
  record is in.

A split still missing is held out of train, seeded (:func:`tffre.data.splits.complete_splits`:
test 20%, then dev ``dev_fraction``), and said in ``notes``.

Bad input raises :class:`TextFormatError`: one line naming the file, the line (a CSV's
physical line, a JSON-lines file's line) and the field, e.g. ``"notes.csv line 4: field
label: empty"``; a missing path :class:`TextFileNotFoundError`. With a list as ``problems``
the loader is lenient: each bad record is left out and its message appended there.
"""

import csv
import io
import os

from tffre.data.files import Files, is_blank
from tffre.data.splits import SPLITS, complete_splits, note_single_file
from tffre.errors import MessageFileNotFoundError, collect, show

TEXT, LABEL, SITE, SPLIT_COLUMN = "text", "label", "site", "split"
#: The file kinds a path may name, by extension.
EXTENSIONS = (".csv", ".jsonl")
TEST_FRACTION = 0.2


class TextFormatError(ValueError):
    """A text set's record cannot be read; the message names file, line and field."""


class TextFileNotFoundError(TextFormatError, MessageFileNotFoundError):
    """A text set's file or folder is not there."""


FILES = Files(TextFormatError, TextFileNotFoundError)


def _kind(path):
    ext = os.path.splitext(str(path))[1].lower()
    if ext not in EXTENSIONS:
        raise FILES.error(path, None, None, f"not a .csv or .jsonl file (got {show(ext or path)})")
    return ext


def _record(path, line, values, has_split):
    """One record's {text, label[, site, split]} as strings, checked."""
    out = {}
    for field in (TEXT, LABEL) + ((SITE,) if SITE in values else ()) + \
            ((SPLIT_COLUMN,) if has_split else ()):
        value = values.get(field)
        if value is None and field in (TEXT, LABEL):
            raise FILES.error(path, line, f"field {field}", "missing")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise FILES.error(path, line, f"field {field}",
                              f"expected text, got {type(value).__name__} {show(value)}")
        value = str(value)
        if not value.strip():
            raise FILES.error(path, line, f"field {field}", "empty")
        out[field] = value.strip() if field != TEXT else value
    if has_split and out[SPLIT_COLUMN] not in SPLITS:
        raise FILES.error(path, line, f"field {SPLIT_COLUMN}",
                          f"unknown split {show(out[SPLIT_COLUMN])}; valid: {', '.join(SPLITS)}")
    return out


def _csv_rows(path, text):
    """(line, {column: value}) of a CSV file's records (``line``: where the record starts)."""
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise FILES.error(path, None, None, "empty file") from None
    header = [h.strip() for h in header]
    for column in (TEXT, LABEL):
        if column not in header:
            raise FILES.error(path, 1, "header", f"no {column!r} column (columns: "
                              f"{', '.join(map(show, header))})")
    start = reader.line_num + 1
    try:
        for row in reader:
            if any(cell.strip() for cell in row):
                if len(row) != len(header):
                    yield start, ValueError(f"{len(row)} fields, the header has {len(header)}")
                else:
                    yield start, dict(zip(header, row))
            start = reader.line_num + 1
    except csv.Error as err:
        raise FILES.error(path, reader.line_num, None, f"not valid CSV ({err})") from None


def _jsonl_rows(path, text):
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.strip():
            yield lineno, line


def load_file(path, problems=None):
    """The records of one CSV or JSON-lines file: a list of dicts {text, label[, site,
    split]}; :class:`TextFormatError` (one line) for a bad record, or in lenient mode (a
    ``problems`` list) the record left out and its message there. A file's columns decide
    for all its records: a CSV has a site column or not; a JSON-lines file with a ``site``
    (``split``) key in one record needs it in all."""
    path = str(path)
    kind = _kind(path)
    text = FILES.read_text(path)
    records = []
    if kind == ".csv":
        rows = list(_csv_rows(path, text))
        has_site = any(isinstance(v, dict) and SITE in v for _, v in rows)
        has_split = any(isinstance(v, dict) and SPLIT_COLUMN in v for _, v in rows)
        for line, values in rows:
            with collect(problems, TextFormatError):
                if isinstance(values, Exception):
                    raise FILES.error(path, line, None, str(values))
                records.append(_record(path, line, values, has_split))
    else:
        parsed = []
        for line, raw in _jsonl_rows(path, text):
            with collect(problems, TextFormatError):
                parsed.append((line, FILES.json_object(path, line, raw)))
        has_site = any(SITE in v for _, v in parsed)
        has_split = any(SPLIT_COLUMN in v for _, v in parsed)
        for line, values in parsed:
            with collect(problems, TextFormatError):
                if has_site and SITE not in values:
                    raise FILES.error(path, line, f"field {SITE}", "missing (other records "
                                      "name their site)")
                records.append(_record(path, line, values, has_split))
    if not records and problems is None:
        raise FILES.error(path, None, None, "no records")
    for record in records:
        if has_site:
            record.setdefault(SITE, "")
    return records


def _split_file(folder, split):
    """The one file of ``split`` in ``folder`` (``train.csv`` or ``train.jsonl``), or None."""
    present = [n for n in (split + e for e in EXTENSIONS)
               if os.path.isfile(os.path.join(folder, n))]
    if len(present) > 1:
        raise FILES.error(folder, None, None, f"two {split} files, {' and '.join(present)}; "
                          "keep one")
    return os.path.join(folder, present[0]) if present else None


def load_texts(path, *, notes=None, problems=None):
    """{split: [record]} as the file or folder ``path`` gives them (see the module
    docstring), before any split is held out; the records of a folder's files are marked
    with their split."""
    path = str(path)
    if os.path.isdir(path):
        splits = {}
        for split in SPLITS:
            file = _split_file(path, split)
            if file is None:
                continue
            if is_blank(file):
                if notes is not None:
                    notes.append(f"{os.path.basename(file)}: empty file, read as no {split} "
                                 f"split")
                continue
            records = []
            with collect(problems, TextFormatError):
                records = load_file(file, problems)
            splits[split] = [{k: v for k, v in r.items() if k != SPLIT_COLUMN}
                             for r in records]
        if not splits and problems is None:
            raise TextFileNotFoundError(f"{path}: no train.csv or train.jsonl (nor dev, test)")
        return splits
    if not os.path.exists(path):
        raise TextFileNotFoundError(f"{path}: no such file or folder")
    note_single_file(path, notes)
    records = load_file(path, problems)
    if records and SPLIT_COLUMN in records[0]:
        splits = {}
        for r in records:
            splits.setdefault(r[SPLIT_COLUMN], []).append(
                {k: v for k, v in r.items() if k != SPLIT_COLUMN})
        return {s: splits[s] for s in SPLITS if s in splits}
    return {"train": records} if records else {}


def load_text_splits(path, *, seed, dev_fraction=0.2, notes=None, problems=None):
    """(``{"train", "dev"?, "test": [record]}``, labels): :func:`load_texts` with the missing
    test (20%) and dev (``dev_fraction``; None or 0: none) held out of train, seeded; the
    labels are every split's, sorted (a label's index in the model). A site column present
    in one split and not another is refused in one line."""
    splits = load_texts(path, notes=notes, problems=problems)
    if problems is not None and not any(splits.values()):
        return {}, []
    sited = {s for s, records in splits.items() if records and SITE in records[0]}
    if sited and sited != {s for s, r in splits.items() if r}:
        raise FILES.error(path, None, f"field {SITE}", f"only the {', '.join(sorted(sited))} "
                          f"split(s) name a site: every split needs the column, or none")
    splits = complete_splits(splits, seed=seed, dev_fraction=dev_fraction or None,
                             test_fraction=TEST_FRACTION, notes=notes, what="texts",
                             source=path)
    labels = sorted({r[LABEL] for records in splits.values() for r in records})
    return splits, labels


def sites_of(splits):
    """The site values of ``splits`` (sorted), or () when the records name none."""
    return tuple(sorted({r[SITE] for records in splits.values() for r in records
                         if r.get(SITE)}))


def check_texts(dataset, path, *, seed=0, dev_fraction=0.2, segmenter=None, max_len=None,
                site_value=None, tokenizer=None):
    """``python -m tffre data check``'s :class:`tffre.data.check_report.CheckReport` of the
    texts a run would read from ``path``: every bad record counted (lenient), the splits'
    label counts, the sites, and the lengths: with a Hugging Face ``tokenizer`` in its word
    pieces ([CLS] and [SEP] included, as the encoder reads them), else with a ``segmenter``
    in jieba tokens. ``site_value``: only that site's records (a deployed site's share of a
    shared file)."""
    from tffre.data.check import piece_counts
    from tffre.data.check_report import CheckReport, SplitSummary
    notes, problems = [], []
    try:
        splits, labels = load_text_splits(path, seed=seed, dev_fraction=dev_fraction,
                                          notes=notes, problems=problems)
    except (TextFormatError, ValueError) as err:   # a whole file or folder: the only problem
        return CheckReport("texts", dataset, str(path), [], [], notes, [str(err)])
    if site_value not in (None, ""):
        splits = {n: [r for r in records if r.get(SITE) == str(site_value)]
                  for n, records in splits.items()}
        if not any(splits.values()):
            problems.append(f"{os.path.basename(str(path))}: field {SITE}: no record has "
                            f"{show(str(site_value))}")
    summaries = []
    for name, records in splits.items():
        counts = {label: 0 for label in labels}
        for r in records:
            counts[r[LABEL]] += 1
        if tokenizer is not None:
            lengths = piece_counts(tokenizer, [r[TEXT] for r in records])
        else:
            lengths = None if segmenter is None else \
                [len(t) for t in segmenter.cut_all(r[TEXT] for r in records)]
        sites = {}
        for r in records:
            if r.get(SITE):
                sites[f"site {r[SITE]}"] = sites.get(f"site {r[SITE]}", 0) + 1
        summaries.append(SplitSummary(name, len(records), counts, {},
                                      details=dict(sorted(sites.items())), lengths=lengths,
                                      labelled=len(records)))
    sites = sites_of(splits)
    about = (f"{len(sites)} sites (--partition site: one client each): {', '.join(sites)}"
             if sites else "no site column (the clients are split by --partition)")
    if tokenizer is not None:
        unit, rule = "word pieces", "text + [CLS] and [SEP], the encoder's tokenizer"
    else:
        unit, rule = "jieba tokens", "the shipped dictionary and --user-dict"
    measured = tokenizer is not None or segmenter is not None
    return CheckReport("texts", dataset, str(path), summaries, list(labels), notes, problems,
                       max_len=max_len if measured else None, length_rule=rule,
                       length_unit=unit, about=about)
