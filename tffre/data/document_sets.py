"""Document-level relation-extraction (DocRE) sets: any supported format, from a file or a folder.

Every set loads into one shape (:mod:`tffre.data.document_schema`: :class:`Document` objects
with their mentions, relations and sentences), from the formats their authors publish, one
module each under :mod:`tffre.data.formats`:

* :mod:`~tffre.data.formats.pubtator` -- CDR, GDA and CHR as distributed in PubTator format
  (BioCreative V CDR ``CDR_*Set.PubTator.txt``; GDA after EoG's ``gda2pubtator.py``), parsed
  by the ``bioc`` library's :mod:`bioc.pubtator`; sentences from its ``split_sentences``.
* :mod:`~tffre.data.formats.docred` -- DocRED-style JSON (``title``, ``sents``, ``vertexSet``,
  ``labels``); its ``fact_keys`` gives the training facts for DocRED's Ign F1.
* :mod:`~tffre.data.formats.eog` -- the ``.data`` files of the edge-oriented graph model
  (Christopoulou et al. 2019, GitHub fenchri/edge-oriented-graph), which FedLCC-style CDR/GDA
  code reads.

Here: :func:`load_documents` -- any of these from a file or a folder of train/dev/test splits
(:func:`guess_format`, :func:`split_files`); :func:`load_document_splits` -- the train/dev/test
documents a run uses, gaps filled by :func:`tffre.data.splits.complete_splits`, a document in
two splits refused (:func:`documents_in_two_splits`);
:func:`sample_path`, :func:`load_sample` -- the embedded, invented CDR-style sample
(``tffre/resources/docre_sample/``, written by ``data/docre_sample/generate.py``).

Bad input raises :class:`~tffre.data.document_schema.DocREFormatError` naming the file, the
line or record and the field; a missing path
:class:`~tffre.data.document_schema.DocREFileNotFoundError`. ``problems`` (a list) makes a load
lenient and ``notes`` (a list) receives what a user should know about what was read (see
:mod:`tffre.data.document_schema`).
"""

import dataclasses
import os
from typing import Optional

from tffre import resources
from tffre.data.check_report import repeats
from tffre.data.document_schema import FILES, DocREFileNotFoundError, DocREFormatError
from tffre.data.files import is_blank
from tffre.data.formats.docred import load_docred
from tffre.data.formats.eog import (EOG_FILTER_SUFFIX, EOG_PAIR_FIELDS, EOG_VARIANT, EOG_VARIANTS,
                                    eog_variants, load_eog)
from tffre.data.formats.pubtator import TITLE_RE, load_pubtator
from tffre.data.splits import (DEV_FRACTION, SPLITS, TEST_FRACTION, complete_splits,
                               note_single_file, split_named, splits_named)
from tffre.errors import collect

FORMATS = ("pubtator", "docred", "eog")
EXTENSIONS = {".pubtator": "pubtator", ".txt": "pubtator", ".json": "docred", ".data": "eog"}

SAMPLE_FOLDER = "docre_sample"


def guess_format(path):
    """The format of a DocRE file: "pubtator", "docred" or "eog".

    By extension (the last one): ``.pubtator`` and ``.txt`` are PubTator (CDR's
    ``*.PubTator.txt``), ``.json`` DocRED, ``.data`` EoG. Otherwise by content: a first
    non-blank line ``PMID|t|...`` is PubTator, one starting with ``[`` DocRED JSON, a
    tab-separated line with ``2 + 17k`` fields EoG.
    """
    ext = os.path.splitext(str(path))[1].lower()
    if ext in EXTENSIONS:
        return EXTENSIONS[ext]
    first = next((line for line in FILES.read_lines(path) if line.strip()), "")
    if TITLE_RE.match(first.strip()):
        return "pubtator"
    if first.lstrip().startswith("["):
        return "docred"
    fields = first.rstrip().split("\t")
    if len(fields) >= 2 and (len(fields) - 2) % EOG_PAIR_FIELDS == 0:
        return "eog"
    raise FILES.error(path, None, None, "cannot tell the format (PubTator, DocRED JSON or EoG "
                      "data) from the name or the first line; pass format=")


_LOADERS = {"pubtator": load_pubtator, "docred": load_docred, "eog": load_eog}


def split_files(folder, *, eog_variant=EOG_VARIANT, notes=None):
    """{split: path} of the split files in ``folder`` (see :func:`load_documents`).

    An empty (or blank) file counts as absent, with a note in ``notes``. Where a split has
    both EoG files, ``train.data`` and ``train_filter.data``, ``eog_variant`` picks one
    ("filter", the default, or "plain"); which one is noted.
    """
    if eog_variant not in EOG_VARIANTS:
        raise ValueError(f"unknown EoG variant {eog_variant!r}; valid: {', '.join(EOG_VARIANTS)}")
    if not os.path.isdir(folder):
        raise DocREFileNotFoundError(f"{folder}: no such folder")
    found = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.startswith(".") or not os.path.isfile(path):
            continue
        if os.path.splitext(name)[1].lower() not in EXTENSIONS:
            continue
        split = split_named(name)
        if split is None:
            continue
        if is_blank(path):
            if notes is not None:
                notes.append(f"{name}: empty file, read as no {split} split")
            continue
        found.setdefault(split, []).append(name)
    chosen, eog = {}, False
    for split, names in found.items():
        pair = eog_variants(names)
        if pair is not None:
            chosen[split], eog = pair[eog_variant], True
        elif len(names) > 1:
            raise FILES.error(folder, None, None, f"two {split} files, {names[0]} and {names[1]}; "
                              "load the one you mean with its path")
        else:
            chosen[split] = names[0]
            stem, ext = os.path.splitext(names[0].lower())
            variant = EOG_VARIANTS[0] if stem.endswith(EOG_FILTER_SUFFIX) else EOG_VARIANTS[1]
            if ext == ".data" and variant != eog_variant and notes is not None:
                notes.append(f"{names[0]}: the only {split} file, read although the EoG "
                             f"variant asked for is {eog_variant!r}")
    if not chosen:
        raise DocREFileNotFoundError(f"{folder}: no train, dev or test file (a name holding "
                                     f"train, dev or test, ending {', '.join(EXTENSIONS)}); "
                                     f"{_found(folder)}")
    if eog and notes is not None:
        other = EOG_VARIANTS[1 - EOG_VARIANTS.index(eog_variant)]
        notes.append(f"EoG files: the {eog_variant!r} variant, "
                     f"{', '.join(chosen[s] for s in SPLITS if s in chosen)} (variant {other!r} "
                     f"reads the others; 'filter' marks negatives that are MeSH hypernyms of a "
                     f"positive's entity not_include, as EoG's configs train and score)")
    return {split: os.path.join(folder, chosen[split]) for split in SPLITS if split in chosen}


def _found(folder, shown=8):
    """What ``folder`` holds as :func:`split_files` reads it, for an error: "found
    CDR_TestSet.PubTator.txt (the test split), notes.md (not ...)", or that it is empty."""
    names = [n for n in sorted(os.listdir(folder))
             if not n.startswith(".") and os.path.isfile(os.path.join(folder, n))]
    if not names:
        return "the folder holds no file"
    described = []
    for name in names[:shown]:
        named = splits_named(name)
        if os.path.splitext(name)[1].lower() not in EXTENSIONS:
            what = f"not {', '.join(EXTENSIONS)}"
        elif not named:
            what = "its name names no split"
        elif len(named) > 1:
            what = f"its name names {' and '.join(named)}"
        elif is_blank(os.path.join(folder, name)):
            what = f"empty: no {named[0]} split"
        else:
            what = f"the {named[0]} split"
        described.append(f"{name} ({what})")
    more = len(names) - shown
    return "found " + ", ".join(described) + (f" and {more} more" if more > 0 else "")


def _no_training(path, single, eog_variant):
    """The error for data without training documents, naming the files as they are."""
    if single:
        return f"{path}: no training documents could be read from the file"
    train = split_files(path, eog_variant=eog_variant).get("train")
    if train is not None:   # lenient, and the train file could not be read: its problems say why
        return f"{path}: no training documents could be read from {os.path.basename(train)}"
    return (f"{path}: no training documents (a non-empty file whose name holds 'train', such "
            f"as train.pubtator or CDR_TrainingSet.PubTator.txt); {_found(path)}")


def load_documents(path, format=None, *, eog_variant=EOG_VARIANT, notes=None,  # noqa: A002
                   problems=None):
    """Loads DocRE data from a file (a list of
    :class:`~tffre.data.document_schema.Document`) or a folder of splits.

    ``format`` is "pubtator", "docred" or "eog"; by default it is guessed per file by
    :func:`guess_format` (``.pubtator``/``.txt``/PubTator content, ``.json``, ``.data``).

    A folder gives ``{split: [Document, ...]}`` for the splits it holds, in
    train/dev/test order. A file belongs to a split when its name, case-insensitively,
    contains ``train``, ``dev`` or ``test`` not preceded by a letter -- so CDR's
    ``CDR_TrainingSet.PubTator.txt``, ``CDR_DevelopmentSet.PubTator.txt`` and
    ``CDR_TestSet.PubTator.txt``, GDA's ``training.txt``/``testing.txt`` and
    ``train.data``/``dev.data``/``test.data`` all match -- and its extension is one of
    ``.pubtator``, ``.txt``, ``.json``, ``.data``. A name matching several splits
    (``train+dev.data``) or none (``rel_info.json``) is skipped, and so is an empty file
    (noted). Two files for one split are an error, except EoG's two variants of a split
    (``train.data``, ``train_filter.data``): ``eog_variant`` picks one, "filter" (the
    default, :data:`EOG_VARIANT`) or "plain" (see :func:`split_files`).

    ``notes`` and ``problems``: lists, see the module docstring. In lenient mode a split
    whose file cannot be read at all is left out, its error in ``problems``.
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; valid: {', '.join(FORMATS)}")
    if not os.path.exists(path):
        raise DocREFileNotFoundError(f"{path}: no such file or folder")
    if not os.path.isdir(path):
        return _LOADERS[format or guess_format(path)](path, problems)
    out = {}
    for split, file in split_files(path, eog_variant=eog_variant, notes=notes).items():
        with collect(problems, DocREFormatError):
            out[split] = _LOADERS[format or guess_format(file)](file, problems)
    return out


def documents_in_two_splits(splits, sources):
    """One line for each document of ``splits`` ({split: [Document]}) whose pmid an earlier
    split holds, naming the split, the pmid, the other split and the two files (``sources``:
    {split: the file its documents were read from}): "dev pmid 90000003: also in the train
    split: a document in two splits (CDR_DevelopmentSet.PubTator.txt and
    CDR_TrainingSet.PubTator.txt)". The records ``python -m tffre data check`` reports as read
    twice (:func:`tffre.data.check_report.repeats`), less those repeated within one split."""
    out = []
    for name, doc, other, _ in repeats(splits, lambda d: d.pmid):
        if other == name:
            continue
        here, there = (os.path.basename(str(sources[s])) for s in (name, other))
        files = (f"both read from {here}, which holds it twice" if here == there
                 else f"{here} and {there}")
        out.append(f"{name} pmid {doc.pmid}: also in the {other} split: a document in two "
                   f"splits ({files})")
    return out


def _refuse_two_splits(path, splits, sources, problems):
    """Raises (``problems`` None) or records the documents in two splits
    (:func:`documents_in_two_splits`): a run must not score or select on documents it
    trained on."""
    found = documents_in_two_splits(splits, sources)
    if not found:
        return
    if problems is not None:
        problems.extend(found)
        return
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    hint = ""
    if any(os.path.basename(str(f)).lower().startswith("cdr_") for f in sources.values()):
        hint = ("; BioCreative V CDR's public copy repeats its development set in its training "
                "file: python -m tffre data prepare cdr --from DIR --out DIR writes the "
                "official split")
    raise DocREFormatError(f"{path}: {found[0]}{more}; remove it from one of the files{hint}")


@dataclasses.dataclass(frozen=True)
class Holdout:
    """The seeded shares of train held out where the data has no split of its own
    (:func:`tffre.data.splits.complete_splits`): ``test_fraction`` as the test split (None
    refuses data without one), then ``dev_fraction`` of what is left as the dev split (None
    leaves it out)."""
    dev_fraction: Optional[float] = DEV_FRACTION
    test_fraction: Optional[float] = TEST_FRACTION


def load_document_splits(path, *, seed, format=None, eog_variant=EOG_VARIANT,  # noqa: A002
                         holdout=Holdout(), dev_as_test=False, notes=None, problems=None):
    """``{"train", "dev", "test": [Document]}``: the documents a run trains, selects and scores on.

    Loads ``path`` with :func:`load_documents`. A single file is the whole set, whatever its
    name; when its name names a split (``cdr_test_head30.PubTator``) a note says how it was
    read. With ``dev_as_test`` (DocRED, whose test labels are not public: FedLCC Table 7
    scores the dev split) the dev split becomes the test split. Then the gaps are filled as a
    sentence-level set's are (:func:`tffre.data.sentence_sets.load_relation_splits`), by
    :func:`tffre.data.splits.complete_splits`, with ``holdout`` (a :class:`Holdout`): without
    a test split -- a single file, or a folder without a test file -- a seeded
    ``test_fraction`` of train is held out as the test split (``test_fraction=None`` refuses it
    instead); then a missing dev split is a seeded ``dev_fraction`` of what train is left
    (``dev_fraction=None`` leaves it out). What was
    done is appended to ``notes``. Data without training documents is refused with the files
    it holds named.

    A document (pmid) in two of the splits returned -- two files that hold it, or a file
    that holds it twice and a held-out split that took one copy -- is refused: a
    :class:`~tffre.data.document_schema.DocREFormatError` naming the path, the pmid, the
    splits and both files (:func:`documents_in_two_splits`); in lenient mode each is
    appended to ``problems`` instead, as ``python -m tffre data check`` reports them.
    """
    loaded = load_documents(path, format, eog_variant=eog_variant, notes=notes,
                            problems=problems)
    single = not isinstance(loaded, dict)
    if single:
        # One behaviour for a single file across tasks: it is all the data (a user checking a
        # head of CDR's test file wants it read, not refused); its name only earns a note.
        splits = {"train": loaded}
        sources = {"train": path}
        note_single_file(path, notes)
    else:
        splits = dict(loaded)
        files = split_files(path, eog_variant=eog_variant)
        sources = {split: files[split] for split in splits}
    if not splits.get("train"):
        raise ValueError(_no_training(path, single, eog_variant))
    if dev_as_test:
        if "dev" not in splits:
            raise ValueError(f"{path}: no dev split, which is scored as the test set here (the "
                             "test labels are not public)")
        if "test" in splits and notes is not None:
            notes.append(f"the test split ({len(splits['test'])} documents) is not used")
        splits["test"] = splits.pop("dev")
        sources["test"] = sources.pop("dev")
        if notes is not None:
            notes.append("the dev split is scored as the test set (its test labels are not "
                         "public; FedLCC Table 7)")
    # One behaviour for a single file and a folder, in every task: a missing test split is
    # a seeded share of train, with a note (a folder's test file, when it has one, is used
    # as it is).
    splits = complete_splits(splits, seed=seed, dev_fraction=holdout.dev_fraction,
                             test_fraction=holdout.test_fraction, notes=notes, what="documents",
                             source=path)
    # A held-out split was read from the training file.
    _refuse_two_splits(path, splits, {s: sources.get(s, sources["train"]) for s in splits},
                       problems)
    return splits


# --------------------------------------------------------------------------- embedded sample


def sample_path():
    """The folder of the embedded, invented CDR-style sample: ``{train,dev,test}.pubtator``.

    Written by ``data/docre_sample/generate.py`` (see ``data/docre_sample/README.md``);
    shipped as package data. SYNTHETIC: no real abstract or annotation is behind it.
    """
    return resources.path(SAMPLE_FOLDER)


def load_sample():
    """The embedded sample as ``{"train": [...], "dev": [...], "test": [...]}`` Documents."""
    return load_documents(sample_path(), format="pubtator")
