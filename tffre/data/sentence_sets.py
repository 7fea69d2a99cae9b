"""Sentence-level relation-extraction (RE) sets: any supported format, from a file or a folder.

Every set loads into one schema (:mod:`tffre.data.sentence_schema`: ``(examples, labels)``, a
DataFrame of candidate entity pairs in sentences and the label list, negative first), from
the formats their authors publish, one module each under :mod:`tffre.data.formats`:

* :mod:`~tffre.data.formats.i2b2` -- i2b2/n2c2 2010 relations: ``txt/``, ``concept/``, ``rel/``.
* :mod:`~tffre.data.formats.blue` -- GAD, EU-ADR (BioBERT) and ChemProt (BLUE), TSV with
  entities blinded as ``@GENE$``-style placeholders.
* :mod:`~tffre.data.formats.chemprot` -- ChemProt as BLUE or SciBERT ships it (GitHub
  allenai/scibert, ``data/text_classification/chemprot/{train,dev,test}.txt``: JSON lines with
  ``<< >>`` and ``[[ ]]`` entity markers and ChemProt's raw relation types).
* :mod:`~tffre.data.formats.pgr` -- PGR, Phenotype-Gene Relations (Sousa et al. 2019, GitHub
  lasigeBioTM/PGR ``corpora/*/{train,test}.tsv``).
* :mod:`~tffre.data.formats.jsonl` -- this project's generic format, one example per JSON line.

Here: :func:`load_re` -- any of these from a file or a folder of splits (:data:`DATASETS`);
:func:`by_split` -- its examples by split; :func:`load_relation_splits` -- the train/dev/test
examples a run uses, gaps filled by :func:`tffre.data.splits.complete_splits`.

Bad input raises :class:`~tffre.data.sentence_schema.REFormatError` naming the file, line and
field; a missing path :class:`~tffre.data.sentence_schema.REFileNotFoundError`. ``problems``
(a list) makes a load lenient and ``notes`` (a list) receives what a user should know about
what was read (see :mod:`tffre.data.sentence_schema`).
"""

import os

import pandas as pd

from tffre.data.check_report import repeats
from tffre.data.formats.blue import (BLUE_SPLIT_FILES, BLUE_TASKS, CHEMPROT_LABELS,
                                     load_blue_folder, load_blue_tsv)
from tffre.data.formats.chemprot import CHEMPROT_RAW_LABELS, CHEMPROT_SPLIT_FILES, load_chemprot
from tffre.data.formats.i2b2 import I2B2_LABELS, load_i2b2
from tffre.data.formats.jsonl import JSONL_SPLIT_FILES, infer_labels, jsonl_rows, load_jsonl
from tffre.data.formats.pgr import PGR_LABELS, load_pgr
from tffre.data.sentence_schema import (FILES, SPLIT_COLUMN, REFileNotFoundError, REFormatError,
                                        check_examples, frame, load_splits)
from tffre.data.splits import (DEV_FRACTION, SPLITS, TEST_FRACTION, complete_splits,
                               note_single_file)
from tffre.errors import collect

DATASETS = ("i2b2", "gad", "euadr", "chemprot", "pgr", "jsonl")


#: The sets whose examples carry ids that name the same record in any of their files, so that
#: a record in two splits can be told: {dataset: (what a record is, its key of an example_id,
#: its file in a split)}. JSON lines: the ``example_id`` (a file's default ids,
#: "{file stem}:{line}", never meet another file's); i2b2: the document ("{document}:{line}:{k}").
#: The other formats' ids are "{file stem}:{line or index}" (BLUE, SciBERT's ChemProt, PGR):
#: they name no record beyond their file.
RECORD_IDS = {
    "jsonl": ("example_id", lambda eid: eid, lambda split, key: JSONL_SPLIT_FILES[split]),
    "i2b2": ("document", lambda eid: eid.rsplit(":", 2)[0],
             lambda split, key: os.path.join(split, "txt", f"{key}.txt")),
}


def records_in_two_splits(dataset, frames):
    """``[(split, key, message)]``: each record of ``frames`` ({split: examples}, in
    train/dev/test order) that an earlier split holds, for the sets of :data:`RECORD_IDS`
    (none for the others), with the one line naming it, both splits and both files: "test
    document 0001: also in the train split: a document in two splits (test/txt/0001.txt and
    train/txt/0001.txt)". The records a data check reports as read twice
    (:func:`tffre.data.check_report.repeats`)."""
    if dataset not in RECORD_IDS:
        return []
    what, key_of, file_of = RECORD_IDS[dataset]
    keys = {split: list(dict.fromkeys(key_of(eid) for eid in df["example_id"]))
            for split, df in frames.items()}
    kind = "a document" if what == "document" else "an example"
    return [(name, key, f"{name} {what} {key}: also in the {other} split: {kind} in two splits "
                        f"({file_of(name, key)} and {file_of(other, key)})")
            for name, key, other, _ in repeats(keys, lambda k: k) if other != name]


def _refuse_two_splits(dataset, frames, source, problems):
    """``frames`` without a record in two splits (:func:`records_in_two_splits`): refused with
    an REFormatError, or in lenient mode each one recorded in ``problems`` and its later
    split's examples dropped (the duplicate ids :func:`check_examples` would report row by
    row)."""
    found = records_in_two_splits(dataset, frames)
    if not found:
        return frames
    if problems is None:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise REFormatError(f"{source}: {found[0][2]}{more}; remove it from one of the splits")
    problems.extend(message for _, _, message in found)
    key_of = RECORD_IDS[dataset][1]
    out = dict(frames)
    for split in out:
        drop = {key for name, key, _ in found if name == split}
        if drop:
            df = out[split]
            out[split] = df[~df["example_id"].map(key_of).isin(drop)].reset_index(drop=True)
    return out


def _concat_splits(frames, labels, source, problems=None):
    """One DataFrame of the splits in SPLITS order, with a ``split`` column; checked."""
    parts = [frames[split].assign(**{SPLIT_COLUMN: split}) for split in SPLITS if split in frames]
    if not parts:  # lenient mode, where no split could be read
        return frame([]).assign(**{SPLIT_COLUMN: pd.Series([], dtype=object)})
    return check_examples(pd.concat(parts, ignore_index=True), labels, source, problems)


def load_re(dataset, path, *, notes=None, problems=None, **options):
    """Loads any supported RE dataset from a file or folder as ``(examples, labels)``.

    ``dataset`` is one of :data:`DATASETS`; ``options`` go to the underlying loader
    (``skip_invalid`` for "pgr", ``labels`` for "jsonl", ``raw_labels`` for "chemprot":
    SciBERT's relation types instead of the CPR groups).

    * A file is loaded as one split, without a ``split`` column (not for "i2b2"). A
      "chemprot" file is BLUE's TSV or, when its first line is a JSON object, SciBERT's
      JSON lines (:func:`~tffre.data.formats.chemprot.load_scibert_chemprot`).
    * A folder of split files -- ``train``/``dev``/``test`` with ``.tsv`` ("gad",
      "euadr", "chemprot", "pgr"), ``.txt`` (SciBERT's "chemprot") or ``.jsonl``
      ("jsonl") -- gives the splits present, concatenated in that order, with an extra
      ``split`` column. An empty file counts as absent (BioBERT's ``dev.tsv``), with a
      note in ``notes``.
    * "i2b2" takes a folder: one with ``txt/`` directly is a single split, "train"; one
      with ``train/``, ``dev/`` and/or ``test/`` sub-folders (each in the txt/concept/rel
      layout) gives those splits. Both carry the ``split`` column.
    * A record in two split files -- an i2b2 document, a JSON-lines ``example_id``: the sets
      whose ids name a record beyond its file (:data:`RECORD_IDS`) -- is refused with one
      line naming it and both files (:func:`records_in_two_splits`); in lenient mode it is
      a problem, and the later split's copy is dropped.

    For "jsonl" folders without given labels, the label list is inferred over all splits.
    ``notes`` and ``problems``: lists, see the module docstring.
    """
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; valid: {', '.join(DATASETS)}")
    if not os.path.exists(path):
        raise REFileNotFoundError(f"{path}: no such file or folder")
    lenient = {"problems": problems}
    if dataset == "i2b2":
        FILES.require_folder(path)
        if os.path.isdir(os.path.join(path, "txt")):
            frames = {"train": load_i2b2(path, **options, **lenient)[0]}
        else:
            frames = {}
            for split in SPLITS:
                if os.path.isdir(os.path.join(path, split)):
                    with collect(problems, REFormatError):
                        frames[split] = load_i2b2(os.path.join(path, split), **options,
                                                  **lenient)[0]
            if not frames and not problems:
                raise REFileNotFoundError(f"{path}: neither txt/ nor train/, dev/ or test/ "
                                          "sub-folders")
            frames = _refuse_two_splits(dataset, frames, path, problems)
        return _concat_splits(frames, list(I2B2_LABELS), path, problems), list(I2B2_LABELS)
    if dataset == "chemprot":
        if os.path.isfile(path):
            return load_chemprot(path, **options, **lenient)
        frames = load_splits(path, CHEMPROT_SPLIT_FILES,
                             lambda p: load_chemprot(p, **options, **lenient)[0], notes,
                             problems)
        labels = list(CHEMPROT_RAW_LABELS if options.get("raw_labels") else CHEMPROT_LABELS)
        return _concat_splits(frames, labels, path, problems), labels
    if dataset in BLUE_TASKS:
        if os.path.isfile(path):
            return load_blue_tsv(path, dataset, **options, **lenient)
        frames, labels = load_blue_folder(path, dataset, notes, problems, **options)
        return _concat_splits(frames, labels, path, problems), labels
    if dataset == "pgr":
        if os.path.isfile(path):
            return load_pgr(path, **options, **lenient)
        # PGR's folders name their files as BLUE's: train.tsv, dev.tsv, test.tsv.
        frames = load_splits(path, BLUE_SPLIT_FILES,
                             lambda p: load_pgr(p, **options, **lenient)[0], notes, problems)
        return _concat_splits(frames, list(PGR_LABELS), path, problems), list(PGR_LABELS)
    # jsonl
    if os.path.isfile(path):
        return load_jsonl(path, **options, **lenient)
    labels = options.get("labels")
    frames = load_splits(path, JSONL_SPLIT_FILES,
                         lambda p: frame(jsonl_rows(p, None if labels is None else
                                                    list(labels), problems)),
                         notes, problems)
    frames = _refuse_two_splits(dataset, frames, path, problems)
    if labels is None:
        labels = infer_labels(label for df in frames.values() for label in df["label"])
    return _concat_splits(frames, list(labels), path, problems), list(labels)


def by_split(examples):
    """``{split: DataFrame}`` of :func:`load_re`'s examples: by their ``split`` column (which
    is dropped), in train/dev/test order; examples without one are all "train"."""
    if SPLIT_COLUMN not in examples:
        return {"train": examples.reset_index(drop=True)}
    return {split: examples[examples[SPLIT_COLUMN] == split].drop(columns=SPLIT_COLUMN)
            .reset_index(drop=True) for split in SPLITS if (examples[SPLIT_COLUMN] == split).any()}


def load_relation_splits(dataset, path, *, seed, dev_fraction=DEV_FRACTION,
                         test_fraction=TEST_FRACTION, notes=None, problems=None, **options):
    """``({"train", "dev", "test": DataFrame}, labels)``: the examples a run trains, selects
    and scores on.

    Loads ``path`` with :func:`load_re` (``options`` go there), splits it by the ``split``
    column (a file is all "train", whatever its name: see
    :func:`tffre.data.splits.note_single_file`) and fills the gaps with
    :func:`tffre.data.splits.complete_splits`: a missing test split is a seeded
    ``test_fraction`` of train, then a missing dev split a seeded ``dev_fraction`` of what is
    left (``None`` leaves either out; a missing test is then an error). What was done is
    appended to ``notes``: for a BioBERT GAD fold, that ``dev.tsv`` is empty and which share
    of ``train.tsv`` became dev.
    """
    examples, labels = load_re(dataset, path, notes=notes, problems=problems, **options)
    if os.path.isfile(path):   # the whole set, whatever its name (as in every task)
        note_single_file(path, notes)
    if problems is not None and not len(examples):
        return {}, labels  # lenient, and nothing could be read: the problems say why
    splits = complete_splits(by_split(examples), seed=seed, dev_fraction=dev_fraction,
                             test_fraction=test_fraction, notes=notes, source=path)
    return splits, labels
