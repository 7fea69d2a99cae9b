"""The check behind ``python -m tffre data check``: what a run would read, and every problem.

:func:`check_dataset` loads a dataset of any task that reads files -- a relation set, a
document set, IMCS's dialogues, an image set (``kind``, which the task's ``check_data``
names) -- with the very functions a run loads it with
(:func:`tffre.data.sentence_sets.load_relation_splits`,
:func:`tffre.data.document_sets.load_document_splits`,
:func:`tffre.data.imcs_dialogues.load_imcs_splits`, :func:`tffre.data.image_sets.list_image_splits`: the
same files, options and split completion), but leniently: a bad line (record, image) is
recorded and skipped instead of stopping the load, so one pass finds every problem. A single
file, or a folder without a test file, is read as a run reads it (a seeded test split held
out of its training data, with a note).
The :class:`CheckReport` it returns holds, per split, the examples (documents, dialogues
and sentences, images), the label distribution (relation types, ``--task``'s labels,
classes), the entity-type pairs and the text lengths (in word pieces given a tokenizer, in
jieba tokens for IMCS) and how many exceed ``max_len``; then the loaders' notes, the
warnings (images of an odd size) and the problems. ``CheckReport.format()`` is the printed
text; ``CheckReport.exit_code`` is 0 without problems, 1 with. The dialogue and image checks
are in :mod:`tffre.data.check_dialogues` and :mod:`tffre.data.check_images`.

Besides the loaders' problems (each naming file, line and field; a document in two splits,
same pmid, among them, with both files named, as a run refuses it), the check reports
documents that appear twice in one split, and relations naming an entity without a
mention. Examples shared by two splits of a sentence-level set (same text and entity
offsets) are noted, not counted as problems: published GAD and ChemProt hold a few.

Nothing here imports TensorFlow (images are read with Pillow); a tokenizer, if given, is an
already-loaded Hugging Face tokenizer.
"""

import collections

# The report (also check.CheckReport, as before); the dialogue and image checks build it too.
from tffre.data.check_report import PERCENTILES, PROBLEMS_SHOWN  # noqa: F401  (re-exported)
from tffre.data.check_report import CheckReport, SplitSummary, repeats

KINDS = ("relations", "documents", "dialogues", "images")
# Word pieces a marked input adds to its text: RETokenizer's <e1> </e1> <e2> </e2>.
RELATION_MARKERS = 4


def piece_counts(tokenizer, texts):
    """Word pieces of each text, the tokenizer's special tokens included."""
    counts = []
    for start in range(0, len(texts), 1000):  # batches bound the tokenizer's memory
        # verbose=False: no warning for texts longer than the encoder's own maximum.
        ids = tokenizer(list(texts[start:start + 1000]), add_special_tokens=True,
                        verbose=False)["input_ids"]
        counts += [len(piece_ids) for piece_ids in ids]
    return counts


def _relation_summary(name, df, labels, tokenizer):
    counts = collections.Counter(df["label"])
    lengths = None
    if tokenizer is not None:
        lengths = [n + RELATION_MARKERS for n in piece_counts(tokenizer, list(df["text"]))]
    return SplitSummary(name, len(df), {label: counts.get(label, 0) for label in labels},
                        dict(collections.Counter(zip(df["e1_type"], df["e2_type"]))),
                        lengths=lengths, labelled=len(df))


def _document_summary(name, docs, tokenizer, problems):
    labels, pairs = collections.Counter(), collections.Counter()
    details = dict.fromkeys(("mentions", "entities", "relations", "excluded pairs"), 0)
    for doc in docs:
        types = doc.entity_types()
        details["mentions"] += len(doc.mentions)
        details["entities"] += len(types)
        details["relations"] += len(doc.relations)
        details["excluded pairs"] += len(doc.excluded_pairs)
        for rel in doc.relations:
            labels[rel.type] += 1
            pairs[types.get(rel.id1, "?"), types.get(rel.id2, "?")] += 1
            for eid in (rel.id1, rel.id2):
                if eid not in types:
                    problems.append(f"{name} pmid {doc.pmid}: relation {rel.type} {rel.id1} "
                                    f"{rel.id2}: entity {eid} has no mention")
    lengths = None
    if tokenizer is not None:
        # One marker before and one after each mention of an entity; mentions that start
        # (end) together share one (tffre.text.document_features).
        markers = [len({m.start for m in d.mentions if any(i != "-1" for i in m.ids)})
                   + len({m.end for m in d.mentions if any(i != "-1" for i in m.ids)})
                   for d in docs]
        lengths = [n + k for n, k in zip(piece_counts(tokenizer, [d.text for d in docs]),
                                         markers)]
    return SplitSummary(name, len(docs), dict(labels), dict(pairs), details, lengths)


def _shared_documents(splits, problems):
    """Problems for documents (pmids) that appear twice in a split. Those in two splits the
    loader reports, as a run refuses them
    (:func:`tffre.data.document_sets.documents_in_two_splits`)."""
    for name, doc, other, _ in repeats(splits, lambda d: d.pmid):
        if other == name:
            problems.append(f"{name} pmid {doc.pmid}: appears twice in this split")


def _shared_examples(splits, notes):
    """A note for examples (text and entity offsets) found in two splits."""
    keys = {name: set(zip(df["text"], df["e1_start"], df["e1_end"], df["e2_start"],
                          df["e2_end"])) for name, df in splits.items()}
    names = list(keys)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = len(keys[a] & keys[b])
            if shared:
                notes.append(f"{shared} example(s) of {b} also in {a} (same text and entity "
                             "offsets), as published")


def check_dataset(kind, dataset, path, *, tokenizer=None, max_len=None, seed=0,
                  **loader_options):
    """Loads what a run would load and returns a :class:`CheckReport` of it.

    Args:
      kind: "relations" (sentence-level examples, ``dataset`` one of
        :data:`tffre.data.sentence_sets.DATASETS`), "documents", "dialogues" (IMCS,
        :func:`tffre.data.check_dialogues.check_dialogues`) or "images"
        (:func:`tffre.data.check_images.check_images`); ``dataset`` names the set in the
        report.
      path: the file or folder a run's ``--data`` names.
      tokenizer: a loaded Hugging Face tokenizer, or None: no lengths (and no import
        beyond the loaders'). Lengths count the text's word pieces, the special tokens
        and the entity markers (4 for an example; for a document one before and one after
        each mention of an entity, shared by mentions starting or ending together).
        Dialogues are measured in jieba tokens instead.
      max_len: with lengths, count the examples longer than this.
      seed: the run's seed (which examples a missing dev or test split takes).
      loader_options: passed on to ``load_relation_splits`` or ``load_document_splits``
        as a run passes them (``raw_labels=True``, ``eog_variant="plain"``,
        ``dev_as_test=True`` for DocRED, ``dev_fraction``...), or to the dialogue and
        image checks (``task``, ``segmenter_for``; ``split_folders``).

    A problem that stops a whole load (a missing folder, an empty file) is reported as the
    only problem; otherwise every bad line is. The report's ``exit_code`` is 1 if any.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; valid: {', '.join(KINDS)}")
    # Each kind imports only its loaders: a document check needs no pandas (CDR in ~1 s).
    if kind == "dialogues":
        from tffre.data.check_dialogues import check_dialogues
        return check_dialogues(dataset, path, max_len=max_len, seed=seed, **loader_options)
    if kind == "images":
        from tffre.data.check_images import check_images
        return check_images(dataset, path, seed=seed, **loader_options)
    notes, problems, labels, splits = [], [], [], {}
    if kind == "relations":
        from tffre.data.sentence_sets import REFormatError, load_relation_splits
        try:
            splits, labels = load_relation_splits(dataset, path, seed=seed, notes=notes,
                                                  problems=problems, **loader_options)
        except (REFormatError, ValueError) as e:
            problems.append(str(e))
        summaries = [_relation_summary(name, df, labels, tokenizer)
                     for name, df in splits.items()]
        _shared_examples(splits, notes)
        rule = f"text + special tokens + {RELATION_MARKERS} entity markers"
    else:
        from tffre.data.document_sets import DocREFormatError, load_document_splits
        try:
            splits = load_document_splits(path, seed=seed, notes=notes, problems=problems,
                                          **loader_options)
        except (DocREFormatError, ValueError) as e:
            problems.append(str(e))
        summaries = [_document_summary(name, docs, tokenizer, problems)
                     for name, docs in splits.items()]
        labels = sorted({label for s in summaries for label in s.labels})
        _shared_documents(splits, problems)
        rule = "text + special tokens + a marker at each mention boundary"
    return CheckReport(kind, dataset, str(path), summaries, list(labels), notes, problems,
                       max_len if tokenizer is not None else None,
                       rule if tokenizer is not None else "")
