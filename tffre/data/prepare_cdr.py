"""BioCreative V CDR's official 500/500/500 split from a public copy (``python -m tffre data
prepare cdr``).

Public copies of the CDR corpus in PubTator (Li et al. 2016, Database; the one the docs name:
GitHub ``cryptoradon/biomedRelExt``, ``CDR_Data/CDR.Corpus.v010516/``) ship a
``CDR_TrainingSet.PubTator.txt`` of 1,000 abstracts: the 500 training ones and the 500
development ones again. Read as they are, a run trains on the development set and then
selects its rounds (and tunes its threshold) on documents it trained on.
:func:`prepare_cdr` writes the official split: the training file without every abstract whose
PMID is in the development file (and, should a copy hold any, in the test file), the
development and test files copied unchanged, under the names ``--dataset cdr --data OUT``
reads (:data:`OUT_NAMES`).

Every input file is read in full first (:func:`tffre.data.formats.pubtator.load_pubtator`), so
bad input stops it with one line naming the file and line, before anything is written. A
PMID twice in one file, or in both the development and the test file, is refused (which copy
is the right one is not for this command to guess).
"""

import dataclasses
import os
import shutil
from typing import Dict, List

from tffre.data.document_schema import FILES, DocREFileNotFoundError
from tffre.data.document_sets import EXTENSIONS, guess_format, split_files
from tffre.data.formats.pubtator import TITLE_RE, load_pubtator
from tffre.data.splits import SPLITS, split_named
from tffre.errors import text_lines

#: The names the prepared files get: BioCreative V's own, which ``--data OUT`` reads as the
#: train, dev and test splits (:func:`tffre.data.document_sets.split_files`).
OUT_NAMES = {"train": "CDR_TrainingSet.PubTator.txt", "dev": "CDR_DevelopmentSet.PubTator.txt",
             "test": "CDR_TestSet.PubTator.txt"}
_WHAT = {"train": "training", "dev": "development", "test": "test"}


class PrepareError(ValueError):
    """Input :func:`prepare_cdr` cannot prepare from, or an output folder it will not write
    to. The message is one line naming the file or folder."""


@dataclasses.dataclass
class Prepared:
    """What :func:`prepare_cdr` read and wrote; :meth:`format` is the printed summary.

    ``files`` maps each split to the input file's name, ``read`` and ``written`` to its
    abstracts; ``dropped`` maps "dev" and "test" to the PMIDs dropped from the training file
    because that file holds them, in training-file order.
    """

    source: str
    out: str
    files: Dict[str, str]
    read: Dict[str, int]
    written: Dict[str, int]
    dropped: Dict[str, List[str]]

    def format(self):
        """The summary: per split the file read, the abstracts read, dropped and written."""
        rows = [("split", "read from", "read", "dropped", "written")]
        for split in SPLITS:
            rows.append((split, self.files[split], str(self.read[split]),
                         str(self.read[split] - self.written[split]), str(self.written[split])))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        table = ["  ".join([row[0].ljust(widths[0]), row[1].ljust(widths[1])]
                           + [cell.rjust(w) for cell, w in zip(row[2:], widths[2:])]).rstrip()
                 for row in rows]
        dev, test = len(self.dropped["dev"]), len(self.dropped["test"])
        return "\n".join([f"BioCreative V CDR, the official split: {self.source} -> {self.out}",
                          "", *table, "",
                          f"dropped from the training file: {dev + test} abstract(s), {dev} "
                          f"whose PMID is in the development file and {test} in the test file",
                          f"wrote {', '.join(OUT_NAMES[s] for s in SPLITS)} to {self.out}"])


def _inputs(source):
    """{split: path} of the source's training, development and test files (each PubTator)."""
    if not os.path.isdir(source):
        raise DocREFileNotFoundError(f"{source}: no such folder")
    files = split_files(source)
    for split in SPLITS:
        if split not in files:
            raise PrepareError(f"{source}: no {_WHAT[split]} file (a non-empty file whose name "
                               f"holds {split!r}, such as {OUT_NAMES[split]})")
        if guess_format(files[split]) != "pubtator":
            raise PrepareError(f"{files[split]}: not a PubTator file (CDR's "
                               f"{OUT_NAMES[split]} is one)")
    return files


def _blocks(path):
    """[(pmid, line number, lines)]: the abstracts of a PubTator file as runs of non-blank
    lines (the rule :func:`~tffre.data.formats.pubtator.load_pubtator` reads them by), in
    file order."""
    out, block, start = [], [], 0
    for number, line in enumerate(FILES.read_lines(path) + [""], 1):
        if line.strip():
            if not block:
                start = number
            block.append(line)
            continue
        if block:
            title = next((TITLE_RE.match(x.strip()) for x in block if TITLE_RE.match(x.strip())),
                         None)
            if title is None:   # load_pubtator has refused this already; kept as a guard
                raise FILES.error(path, start, None, "document without a 'PMID|t|title' line")
            out.append((title.group(1), start, block))
            block = []
    return out


def _read(path):
    """The abstracts of one input file (:func:`_blocks`), checked: the whole file parsed as a
    run parses it, and no PMID twice."""
    docs = load_pubtator(path)   # raises DocREFormatError naming the file and line
    blocks = _blocks(path)
    if [pmid for pmid, _, _ in blocks] != [doc.pmid for doc in docs]:   # one block a document
        raise FILES.error(path, None, None, "its abstracts could not be told apart by blank "
                          "lines")
    first = {}
    for pmid, line, _ in blocks:
        if pmid in first:
            raise FILES.error(path, line, f"pmid {pmid}", f"a second copy of the abstract on "
                              f"line {first[pmid]}; keep one")
        first[pmid] = line
    return blocks


def _check_out(source, out, overwrite):
    """Refuses an ``out`` that is the source, a file, or a non-empty folder (without
    ``overwrite``), or that holds another file ``--data OUT`` would read as a split."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise PrepareError(f"{out}: a file, not a folder")
    if os.path.isdir(out) and os.path.samefile(source, out):
        raise PrepareError(f"{out}: the folder read from; give --out another folder")
    names = sorted(os.listdir(out)) if os.path.isdir(out) else []
    if names and not overwrite:
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise PrepareError(f"{out}: not empty ({shown}); pass --overwrite to replace its CDR "
                           "files")
    ours = set(OUT_NAMES.values())
    for name in names:
        if name in ours or name.startswith("."):
            continue
        if os.path.splitext(name)[1].lower() in EXTENSIONS and split_named(name):
            raise PrepareError(f"{out}: holds {name}, which --data {out} would read as a "
                               f"{split_named(name)} file beside the prepared one; move it away")


def _write(path, blocks=None, copy_of=None):
    """Writes ``blocks`` (lists of lines) as a PubTator file, one blank line between
    abstracts as in CDR's files, or a byte copy of the file ``copy_of``: beside the target
    first, then moved over it (no half-written file under a name a run reads)."""
    partial = path + ".partial"
    if copy_of is not None:
        shutil.copyfile(copy_of, partial)
    else:
        with open(partial, "w", encoding="utf-8", newline="\n") as f:
            f.write("\n\n".join("\n".join(lines) for lines in blocks) + "\n")
    os.replace(partial, path)


def prepare_cdr(source, out, *, overwrite=False):
    """Writes BioCreative V CDR's official split of the public copy in ``source`` to ``out``.

    ``source`` is a folder holding CDR's training, development and test files in PubTator
    (found as ``--data`` finds split files: a name holding train, dev or test; e.g.
    ``CDR_TrainingSet.PubTator.txt``). ``out`` (created if missing) receives the files of
    :data:`OUT_NAMES`: the training file without every abstract whose PMID is in the
    development or the test file, and the development and test files as they are.

    A non-empty ``out`` is refused unless ``overwrite`` (which replaces the three files), and
    so is an ``out`` holding another file ``--data`` would read as a split. Bad input raises
    :class:`~tffre.data.document_schema.DocREFormatError` naming the file and line (a PMID
    twice in one file included); a PMID in both the development and the test file, a missing
    file or a refused ``out`` :class:`PrepareError` (a ``ValueError``). Nothing is written
    before every input has been read. Returns a :class:`Prepared`.
    """
    source, out = os.fspath(source), os.fspath(out)
    files = _inputs(source)
    blocks = {split: _read(files[split]) for split in SPLITS}
    dev = {pmid for pmid, _, _ in blocks["dev"]}
    test = {}
    for pmid, line, _ in blocks["test"]:
        test[pmid] = line
    for pmid, line, _ in blocks["dev"]:
        if pmid in test:
            raise PrepareError(f"{os.path.basename(files['dev'])} line {line}: pmid {pmid}: "
                               f"also in {os.path.basename(files['test'])} (line {test[pmid]}): "
                               "the official development and test sets share no abstract")
    dropped = {"dev": [], "test": []}
    kept = []
    for pmid, _, lines in blocks["train"]:
        if pmid in dev:
            dropped["dev"].append(pmid)
        elif pmid in test:
            dropped["test"].append(pmid)
        else:
            kept.append(lines)
    if not kept:
        raise PrepareError(f"{files['train']}: every abstract is in the development or test "
                           "file; no training abstract is left")
    _check_out(source, out, overwrite)
    os.makedirs(out, exist_ok=True)
    _write(os.path.join(out, OUT_NAMES["train"]), kept)
    for split in ("dev", "test"):
        _write(os.path.join(out, OUT_NAMES[split]), copy_of=files[split])
    return Prepared(source, out, {s: os.path.basename(files[s]) for s in SPLITS},
                    {s: len(blocks[s]) for s in SPLITS},
                    {"train": len(kept), "dev": len(blocks["dev"]), "test": len(blocks["test"])},
                    dropped)
