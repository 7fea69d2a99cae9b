"""The report of ``python -m tffre data check``: :class:`CheckReport` and its text.

Built by :func:`tffre.data.check.check_dataset` for every kind of dataset (and by
:mod:`tffre.data.check_dialogues` and :mod:`tffre.data.check_images`, which this module
keeps apart from the dispatch in :mod:`tffre.data.check`). Nothing here imports more than
the standard library.
"""

import dataclasses
import unicodedata
from typing import Dict, List, Optional, Tuple

# Per kind: what a split counts, the label table's title and the type-pair table's (None:
# the kind has no entity types).
LAYOUT = {"relations": ("examples", "label", "e1 type -> e2 type"),
          "documents": ("documents", "relation type", "entity types"),
          "dialogues": ("dialogues", "label", None),
          "images": ("images", "class", None),
          "texts": ("texts", "label", None)}
PROBLEMS_SHOWN = 20
PERCENTILES = (0, 50, 95, 100)


@dataclasses.dataclass
class SplitSummary:
    """One split of a checked dataset.

    ``count`` is its examples (documents); ``labels`` maps each label (relation type) to its
    count, in the dataset's label order; ``type_pairs`` maps (e1 type, e2 type) -- for
    documents, the types of each relation's two entities -- to a count; ``details`` holds
    document counts (mentions, entities, relations, excluded pairs), a dialogue set's
    sentences; ``lengths`` the word pieces (jieba tokens) per example when a tokenizer was
    given (for dialogues); ``labelled`` the examples that carry one label each, of which
    the label table gives each label's share (None: no shares, a document holds many).
    """

    name: str
    count: int
    labels: Dict[str, int]
    type_pairs: Dict[Tuple[str, str], int]
    details: Dict[str, int] = dataclasses.field(default_factory=dict)
    lengths: Optional[List[int]] = None
    labelled: Optional[int] = None


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
    length_unit: str = "word pieces"
    about: str = ""
    label_title: str = ""
    warnings: List[str] = dataclasses.field(default_factory=list)
    # Tables a kind adds after the lengths, each (title, head, rows): IMCS's sentences that
    # dev and test share with train.
    tables: List[Tuple[str, List[str], List[list]]] = dataclasses.field(default_factory=list)

    @property
    def exit_code(self):
        """0 when no problem was found, 1 otherwise (warnings do not count)."""
        return 1 if self.problems else 0

    def format(self):
        """The report as text: splits, labels, type pairs, lengths, the kind's own tables,
        notes, warnings, problems."""
        unit, label_title, pair_title = LAYOUT[self.kind]
        out = [f"{self.dataset} ({self.kind}) from {self.path}"]
        if self.about:
            out.append(self.about)
        if self.splits:
            names = [s.name for s in self.splits]
            rows = [[unit] + [s.count for s in self.splits]]
            for key in self.splits[0].details:
                rows.append([key] + [s.details.get(key, 0) for s in self.splits])
            out += ["", *_table(["split"] + names, rows)]
            out += ["", *_table([self.label_title or label_title] + names,
                                [[label] + [_share(s.labels.get(label, 0), s.labelled)
                                            for s in self.splits] for label in self.labels])]
            if pair_title:
                pairs = sorted({p for s in self.splits for p in s.type_pairs})
                out += ["", *_table([pair_title] + names,
                                    [[f"{a} -> {b}"] + [s.type_pairs.get((a, b), 0)
                                                        for s in self.splits]
                                     for a, b in pairs])]
            if any(s.lengths is not None for s in self.splits):
                out += ["", f"{self.length_unit} ({self.length_rule})"]
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
        for title, head, rows in self.tables:
            out += ["", title, *_table(head, rows)]
        if self.notes:
            out += ["", "notes:"] + [f"  {note}" for note in self.notes]
        if self.warnings:
            out += ["", *_listing(self.warnings, "warning(s) (a run reads these)")]
        if self.problems:
            out += ["", *_listing(self.problems, "problem(s)")]
        else:
            out += ["", "no problems"]
        return "\n".join(out)


def repeats(splits, key):
    """``(split, item, first split, first item)`` for each item of ``splits`` ({split: items})
    whose ``key(item)`` an earlier item had, in reading order: the records a check reports
    as read twice (a document's pmid, a dialogue's example_id)."""
    where = {}
    for name, items in splits.items():
        for item in items:
            k = key(item)
            if k in where:
                yield (name, item) + where[k]
            else:
                where[k] = (name, item)


def _listing(items, what):
    """A count of ``items``, then the first :data:`PROBLEMS_SHOWN` of them."""
    shown = items[:PROBLEMS_SHOWN]
    more = len(items) - len(shown)
    out = [f"{len(items)} {what}" + (f", the first {len(shown)}:" if more else ":")]
    out += [f"  {item}" for item in shown]
    if more:
        out.append(f"  ... and {more} more")
    return out


def _share(count, total):
    return f"{count} ({count / total:.1%})" if total else str(count)


def _percentiles(values):
    ordered = sorted(values)
    # Nearest rank: the smallest value with at least q% of the values at or below it.
    return [ordered[max(0, -(-q * len(ordered) // 100) - 1)] for q in PERCENTILES]


def _width(text):
    """Columns ``text`` takes in a terminal: a wide (CJK) character takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _table(head, rows):
    """Lines of a left-aligned first column and right-aligned others."""
    cells = [[str(c) for c in head]] + [[str(c) for c in row] for row in rows]
    widths = [max(_width(row[i]) for row in cells) for i in range(len(head))]
    return ["  ".join([row[0] + " " * (widths[0] - _width(row[0]))]
                      + [" " * (w - _width(c)) + c for c, w in zip(row[1:], widths[1:])])
            .rstrip() for row in cells]
