"""The check behind ``python -m tffre data check``: what a run would read, and every problem.

:func:`check_dataset` loads a relation set or a document set with the very functions a run
loads it with (:func:`tffre.data.relations.load_relation_splits`,
:func:`tffre.data.documents.load_document_splits`: the same files, options and split
completion), but leniently: a bad line is recorded and skipped instead of stopping the
load, so one pass finds every problem. The :class:`CheckReport` it returns holds, per
split, the examples (documents), the label distribution (relation types), the entity-type
pairs and, given a tokenizer, the text lengths in word pieces and how many exceed
``max_len``; then the loaders' notes and the problems. ``CheckReport.format()`` is the
printed text; ``CheckReport.exit_code`` is 0 without problems, 1 with.

Besides the loaders' problems (each naming file, line and field), the check reports
documents that appear in two splits (same pmid) or twice in one, and relations naming an
entity without a mention. Examples shared by two splits of a sentence-level set (same text
and entity offsets) are noted, not counted as problems: published GAD and ChemProt hold a
few.

Nothing here imports TensorFlow; a tokenizer, if given, is an already-loaded Hugging Face
tokenizer.
"""

import collections
import dataclasses
from typing import Dict, List, Optional, Tuple

KINDS = ("relations", "documents")
PROBLEMS_SHOWN = 20
PERCENTILES = (0, 50, 95, 100)
# Word pieces a marked input adds to its text: RETokenizer's <e1> </e1> <e2> </e2>.
RELATION_MARKERS = 4


@dataclasses.dataclass
class SplitSummary:
    """One split of a checked dataset.

    ``count`` is its examples (documents); ``labels`` maps each label (relation type) to its
    count, in the dataset's label order; ``type_pairs`` maps (e1 type, e2 type) -- for
    documents, the types of each relation's two entities -- to a count; ``details`` holds
    document counts (mentions, entities, relations, excluded pairs); ``lengths`` the word
    pieces per example when a tokenizer was given.
    """

    name: str
    count: int
    labels: Dict[str, int]
    type_pairs: Dict[Tuple[str, str], int]
    details: Dict[str, int] = dataclasses.field(default_factory=dict)
    lengths: Optional[List[int]] = None


@dataclasses.dataclass
class CheckReport:
    """What :func:`check_dataset` found; :meth:`format` prints it."""

    kind: str
    dataset: str
    path: str
    splits: List[SplitSummary]
    labels: List[str]
    notes: List[str]
    problems: List[str]
    max_len: Optional[int] = None
    length_rule: str = ""

    @property
    def exit_code(self):
        """0 when no problem was found, 1 otherwise."""
        return 1 if self.problems else 0

    def format(self):
        """The report as text: splits, labels, type pairs, lengths, notes, problems."""
        unit = "examples" if self.kind == "relations" else "documents"
        out = [f"{self.dataset} ({self.kind}) from {self.path}"]
        if self.splits:
            names = [s.name for s in self.splits]
            rows = [[unit] + [s.count for s in self.splits]]
            for key in self.splits[0].details:
                rows.append([key] + [s.details.get(key, 0) for s in self.splits])
            out += ["", *_table(["split"] + names, rows)]
            title = "label" if self.kind == "relations" else "relation type"
            out += ["", *_table([title] + names, [[label] + [_share(s.labels.get(label, 0),
                                                                    s.count if self.kind ==
                                                                    "relations" else None)
                                                             for s in self.splits]
                                                  for label in self.labels])]
            pairs = sorted({p for s in self.splits for p in s.type_pairs})
            title = "e1 type -> e2 type" if self.kind == "relations" else "entity types"
            out += ["", *_table([title] + names, [[f"{a} -> {b}"] + [s.type_pairs.get((a, b), 0)
                                                                    for s in self.splits]
                                                  for a, b in pairs])]
            if any(s.lengths is not None for s in self.splits):
                out += ["", f"word pieces ({self.length_rule})"]
                head = ["split"] + [f"p{q}" if q not in (0, 100) else ("min", "max")[q == 100]
                                    for q in PERCENTILES]
                if self.max_len:
                    head.append(f"> {self.max_len}")
                rows = []
                for s in self.splits:
                    row = [s.name] + _percentiles(s.lengths or [0])
                    if self.max_len:
                        row.append(sum(n > self.max_len for n in s.lengths or ()))
                    rows.append(row)
                out += _table(head, rows)
        if self.notes:
            out += ["", "notes:"] + [f"  {note}" for note in self.notes]
        if self.problems:
            shown = self.problems[:PROBLEMS_SHOWN]
            more = len(self.problems) - len(shown)
            out += ["", f"{len(self.problems)} problem(s)"
                    + (f", the first {len(shown)}:" if more else ":")]
            out += [f"  {problem}" for problem in shown]
            if more:
                out.append(f"  ... and {more} more")
        else:
            out += ["", "no problems"]
        return "\n".join(out)


def _share(count, total):
    return f"{count} ({count / total:.1%})" if total else str(count)


def _percentiles(values):
    ordered = sorted(values)
    # Nearest rank: the smallest value with at least q% of the values at or below it.
    return [ordered[max(0, -(-q * len(ordered) // 100) - 1)] for q in PERCENTILES]


def _table(head, rows):
    """Lines of a left-aligned first column and right-aligned others."""
    cells = [[str(c) for c in head]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    return ["  ".join([row[0].ljust(widths[0])] + [c.rjust(w) for c, w in
                                                   zip(row[1:], widths[1:])]).rstrip()
            for row in cells]


def _piece_counts(tokenizer, texts):
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
        lengths = [n + RELATION_MARKERS for n in _piece_counts(tokenizer, list(df["text"]))]
    return SplitSummary(name, len(df), {label: counts.get(label, 0) for label in labels},
                        dict(collections.Counter(zip(df["e1_type"], df["e2_type"]))),
                        lengths=lengths)


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
        lengths = [n + k for n, k in zip(_piece_counts(tokenizer, [d.text for d in docs]),
                                         markers)]
    return SplitSummary(name, len(docs), dict(labels), dict(pairs), details, lengths)


def _shared_documents(splits, problems):
    """Problems for documents (pmids) that appear twice in a split or in two splits."""
    where = {}
    for name, docs in splits.items():
        for doc in docs:
            if doc.pmid in where:
                other = where[doc.pmid]
                problems.append(f"{name} pmid {doc.pmid}: " + (
                    "appears twice in this split" if other == name
                    else f"also in the {other} split: a document in two splits"))
            else:
                where[doc.pmid] = name


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
        :data:`tffre.data.relations.DATASETS`) or "documents" (``dataset`` names the set
        in the report).
      path: the file or folder a run's ``--data`` names.
      tokenizer: a loaded Hugging Face tokenizer, or None: no lengths (and no import
        beyond the loaders'). Lengths count the text's word pieces, the special tokens
        and the entity markers (4 for an example; for a document one before and one after
        each mention of an entity, shared by mentions starting or ending together).
      max_len: with a tokenizer, count the examples longer than this.
      seed: the run's seed (which examples a missing dev or test split takes).
      loader_options: passed on to ``load_relation_splits`` or ``load_document_splits``
        as a run passes them (``raw_labels=True``, ``eog_variant="plain"``,
        ``dev_as_test=True`` for DocRED, ``dev_fraction``...).

    A problem that stops a whole load (a missing folder, an empty file) is reported as the
    only problem; otherwise every bad line is. The report's ``exit_code`` is 1 if any.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; valid: {', '.join(KINDS)}")
    notes, problems, labels, splits = [], [], [], {}
    # Each kind imports only its loaders: a document check needs no pandas (CDR in ~1 s).
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
