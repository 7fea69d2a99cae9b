"""GAD, EU-ADR and ChemProt as BioBERT and BLUE distribute them: TSV with blinded entities.

BioBERT (Lee et al. 2020, Bioinformatics 36(4)) ships GAD and EU-ADR as ten folds (``GAD/1``
... ``GAD/10``), each a ``train.tsv`` (``sentence<TAB>label``), a ``test.tsv`` (with an
``index<TAB>sentence<TAB>label`` header) and an empty ``dev.tsv``; BLUE (Peng et al. 2019,
GitHub ncbi-nlp/BLUE_Benchmark) ships ChemProt with that header and the CPR groups as labels.
Each sentence names its two entities by placeholders such as ``@GENE$``. :func:`load_blue_tsv`
reads one file, :func:`load_blue_folder` a folder of splits, into the sentence-level schema
(:mod:`tffre.data.sentence_schema`); :mod:`tffre.data.formats.chemprot` reads ChemProt in
either copy, BLUE's or SciBERT's.
"""

import os
import re

from tffre.data.sentence_schema import (BINARY_LABELS, CHEM_GENE, FILES, REFormatError,
                                        check_examples, frame, label_error, load_splits)
from tffre.data.splits import SPLITS
from tffre.errors import collect, show

# BLUE's ChemProt labels: no relation, then the five evaluated CPR groups.
CHEMPROT_LABELS = ("false", "CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9")
BLUE_HEADER = "index\tsentence\tlabel"
BLUE_TASKS = {
    # task: (labels, placeholder types the task's sentences may hold)
    "gad": (BINARY_LABELS, ("GENE", "DISEASE")),
    "euadr": (BINARY_LABELS, ("GENE", "DISEASE")),
    "chemprot": (CHEMPROT_LABELS, ("CHEMICAL", "GENE", CHEM_GENE)),
}
BLUE_SPLIT_FILES = {split: f"{split}.tsv" for split in SPLITS}

_PLACEHOLDER_RE = re.compile(r"@([A-Z][A-Z-]*)\$")


def _blue_task(task):
    if task not in BLUE_TASKS:
        raise ValueError(f"unknown BLUE task {task!r}; valid: {', '.join(BLUE_TASKS)}")
    return BLUE_TASKS[task]


def _blue_entities(path, lineno, sentence, task):
    """(e1 start, e1 end, e1 type, e2 start, e2 end, e2 type) from a blinded sentence."""
    _, types = _blue_task(task)
    found = list(_PLACEHOLDER_RE.finditer(sentence))
    for m in found:
        if m.group(1) not in types:
            raise FILES.error(path, lineno, "field sentence", f"placeholder {m.group()!r} is not "
                              f"used by {task}; expected {', '.join('@' + t + '$' for t in types)}")
    names = [m.group() for m in found]
    if len(found) == 1 and found[0].group(1) == CHEM_GENE:
        # One mention is both entities: e1 and e2 are the same span (see module docstring).
        m = found[0]
        return m.start(), m.end(), CHEM_GENE, m.start(), m.end(), CHEM_GENE
    if len(found) != 2 or CHEM_GENE in (m.group(1) for m in found):
        raise FILES.error(path, lineno, "field sentence", "expected two entity placeholders or one "
                          f"@{CHEM_GENE}$, found {len(found)}: {', '.join(names) or 'none'}")
    a, b = found
    return a.start(), a.end(), a.group(1), b.start(), b.end(), b.group(1)


def _blue_columns(lines):
    """(has header, column names) of a BLUE/BioBERT TSV: the header if its first line is
    :data:`BLUE_HEADER`, else two columns or, with an id first, three (by the first line)."""
    if lines[0] == BLUE_HEADER:
        return True, ("index", "sentence", "label")
    first = next(line for line in lines if line.strip())
    if len(first.split("\t")) == 3:
        return False, ("id", "sentence", "label")
    return False, ("sentence", "label")


def _blue_row(path, lineno, line, stem, task, labels, has_header, expected, ids):
    """The example row of one line of a BLUE/BioBERT TSV; ``ids`` holds the ids seen."""
    parts = line.split("\t")
    if len(parts) != len(expected):
        note = "" if has_header else f" (no {BLUE_HEADER!r} header)"
        raise FILES.error(path, lineno, "columns", f"expected {len(expected)} tab-separated "
                          f"columns ({', '.join(expected)}){note}, got {len(parts)}")
    fields = dict(zip(expected, parts))
    label = fields["label"].strip()
    if label not in labels:
        raise label_error(path, lineno, label, labels)
    if len(expected) == 3:
        column = expected[0]
        index = fields[column].strip()
        if not index:
            raise FILES.error(path, lineno, f"field {column}", f"empty {column}")
        if index in ids:
            raise FILES.error(path, lineno, f"field {column}",
                              f"duplicate {column} {show(index)} (also line {ids[index]})")
        ids[index] = lineno
        eid = f"{stem}:{index}"
    else:
        eid = f"{stem}:{lineno}"
    s1, e1, t1, s2, e2, t2 = _blue_entities(path, lineno, fields["sentence"], task)
    return eid, fields["sentence"], s1, e1, s2, e2, t1, t2, label


def load_blue_tsv(path, task, problems=None):
    """Loads one GAD, EU-ADR or ChemProt TSV file, as BioBERT/BLUE distribute them.

    ``task`` is "gad", "euadr" or "chemprot". Three layouts are read, told apart by the
    content, whatever the file's name:

    * a first line exactly ``index<TAB>sentence<TAB>label``: that header, then three
      columns (BLUE ChemProt, BioBERT ``test.tsv``);
    * no header, three columns: an id, the sentence, the label (ChemProt as some BLUE and
      BioBERT copies ship it, e.g. ``10064839.T49.T56<TAB>...<TAB>false``);
    * no header, two columns: ``sentence<TAB>label`` (BioBERT GAD and EU-ADR
      ``train.tsv``).

    Without a header the first non-blank line's column count decides. Blank lines are
    skipped.

    The entities are blinded placeholders: ``@GENE$`` and ``@DISEASE$`` (GAD, EU-ADR),
    ``@CHEMICAL$``, ``@GENE$`` and ``@CHEM-GENE$`` (ChemProt). The two placeholders are
    e1 and e2 in text order, typed by their names (GENE, DISEASE, CHEMICAL). A sentence
    with a lone ``@CHEM-GENE$`` (one mention that is both chemical and gene) gives e1 and
    e2 the same span, both typed CHEM-GENE; any other count of placeholders is an error.

    ``example_id`` is ``"{file stem}:{index or id}"`` with three columns (the indices or
    ids must be unique), ``"{file stem}:{line}"`` with two. Labels: ["0", "1"] for GAD and
    EU-ADR, :data:`CHEMPROT_LABELS` for ChemProt; anything else is refused.
    ``problems`` (a list) makes the load lenient: a bad line is skipped.
    """
    labels, _ = _blue_task(task)
    lines = FILES.read_lines(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    has_header, expected = _blue_columns(lines)
    rows, ids = [], {}
    for lineno, line in enumerate(lines, 1):
        if (has_header and lineno == 1) or not line.strip():
            continue
        with collect(problems, REFormatError):
            rows.append(_blue_row(path, lineno, line, stem, task, labels, has_header,
                                  expected, ids))
    if not rows:
        raise FILES.error(path, None, None, "no examples (empty file or header only)")
    examples = check_examples(frame(rows), list(labels), os.path.basename(path), problems)
    return examples, list(labels)


def load_blue_folder(folder, task, notes=None, problems=None):
    """Loads the splits of a BLUE/BioBERT folder as ``({split: examples}, labels)``.

    Reads whichever of ``train.tsv``, ``dev.tsv`` and ``test.tsv`` the folder holds (at
    least one), each with :func:`load_blue_tsv`. An empty file counts as absent, with a
    note in ``notes``: BioBERT's GAD and EU-ADR ship ten folds (``GAD/1`` ...
    ``GAD/10``), each with an empty ``dev.tsv``; pass one fold's folder.
    """
    labels, _ = _blue_task(task)
    frames = load_splits(folder, BLUE_SPLIT_FILES,
                         lambda p: load_blue_tsv(p, task, problems)[0], notes, problems)
    return frames, list(labels)
