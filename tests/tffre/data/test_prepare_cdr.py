"""BioCreative V CDR's official split from a public copy (tffre.data.prepare_cdr, ``python -m
tffre data prepare cdr``).

The fixture, fixtures/docre/cdr_public/, is invented in the public copy's layout (its
readme.txt): a training file of 6 abstracts, 3 of them training ones (91000001-3), the 2 of
the development file (91000011-12) and 1 of the test file (91000022). Counted by hand: 3
dropped (2 development, 1 test), 3 written, and the development and test files' 2 each.
"""

import os
import shutil
from pathlib import Path

import pytest

from tffre.data.document_schema import DocREFormatError
from tffre.data.document_sets import load_document_splits, load_documents
from tffre.data.prepare_cdr import OUT_NAMES, PrepareError, prepare_cdr

PUBLIC = os.path.join(os.path.dirname(__file__), "fixtures", "docre", "cdr_public")
TRAIN, DEV, TEST = (OUT_NAMES[s] for s in ("train", "dev", "test"))


def blocks(name, folder=PUBLIC):
    """The abstracts of a file as its text blocks, without the blank lines between them."""
    text = Path(folder, name).read_text(encoding="utf-8")
    return [b.strip("\n") for b in text.split("\n\n") if b.strip()]


def expected_report(source, out):
    return [f"BioCreative V CDR, the official split: {source} -> {out}", "",
            "split read from read dropped written".split(),
            f"train {TRAIN} 6 3 3".split(),
            f"dev {DEV} 2 0 2".split(),
            f"test {TEST} 2 0 2".split(), "",
            "dropped from the training file: 3 abstract(s), 2 whose PMID is in the development "
            "file and 1 in the test file",
            f"wrote {TRAIN}, {DEV}, {TEST} to {out}"]


def report_lines(text):
    """The report's lines, its table rows split into words (column widths are not checked)."""
    lines = text.splitlines()
    return lines[:2] + [line.split() for line in lines[2:6]] + lines[6:]


def test_the_official_split_drops_the_development_and_test_abstracts_from_train(tmp_path):
    out = tmp_path / "cdr"
    prepared = prepare_cdr(PUBLIC, str(out))
    assert report_lines(prepared.format()) == expected_report(PUBLIC, str(out))
    assert prepared.dropped == {"dev": ["91000011", "91000012"], "test": ["91000022"]}
    assert sorted(os.listdir(out)) == sorted(OUT_NAMES.values())
    # The training file keeps its 1st, 3rd and 5th abstracts, as they were; the others are
    # byte copies.
    train = blocks(TRAIN)
    assert blocks(TRAIN, out) == [train[0], train[2], train[4]]
    for name in (DEV, TEST):
        assert (out / name).read_bytes() == Path(PUBLIC, name).read_bytes()
    # --data OUT reads the three splits, with no document in two of them.
    splits = load_document_splits(str(out), seed=0)
    assert {s: [d.pmid for d in docs] for s, docs in splits.items()} == {
        "train": ["91000001", "91000002", "91000003"], "dev": ["91000011", "91000012"],
        "test": ["91000021", "91000022"]}
    with pytest.raises(DocREFormatError, match="dev pmid 91000011: also in the train split"):
        load_document_splits(PUBLIC, seed=0)


def test_the_command_prints_the_counts_and_refuses_to_overwrite(tmp_path, cli_here):
    out = tmp_path / "cdr"
    proc = cli_here("data", "prepare", "cdr", "--from", PUBLIC, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert report_lines(proc.stdout) == expected_report(PUBLIC, str(out))
    proc = cli_here("data", "prepare", "cdr", "--from", PUBLIC, "--out", str(out))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"python -m tffre data prepare: error: {out}: not empty ({DEV}, {TEST}, {TRAIN}); "
        "pass --overwrite to replace its CDR files"]
    (out / TRAIN).write_text("stale\n", encoding="utf-8")
    proc = cli_here("data", "prepare", "cdr", "--from", PUBLIC, "--out", str(out),
                    "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert blocks(TRAIN, out) == [blocks(TRAIN)[k] for k in (0, 2, 4)]
    # Another file that --data OUT would read as a split is refused, overwrite or not.
    (out / "train.pubtator").write_text("", encoding="utf-8")
    proc = cli_here("data", "prepare", "cdr", "--from", PUBLIC, "--out", str(out),
                    "--overwrite")
    assert proc.returncode == 1 and proc.stderr.splitlines() == [
        f"python -m tffre data prepare: error: {out}: holds train.pubtator, which --data {out} "
        "would read as a train file beside the prepared one; move it away"]
    proc = cli_here("data", "prepare", "gda", "--from", PUBLIC, "--out", str(out))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "invalid choice: 'gda'" in proc.stderr


def _copy(tmp_path, **replace):
    """A copy of the fixture with some files' text replaced (None: the file removed)."""
    folder = tmp_path / "public"
    shutil.copytree(PUBLIC, folder)
    for name, text in replace.items():
        path = folder / OUT_NAMES[name]
        if text is None:
            path.unlink()
        else:
            path.write_text(text, encoding="utf-8")
    return folder


def test_bad_input_is_one_line_naming_the_file_and_nothing_is_written(tmp_path):
    dev = blocks(DEV)
    bad = dev[0].replace("91000011\t14\t18\tgout", "91000011\t14\tx\tgout")
    twice = "\n\n".join(blocks(TRAIN) + [blocks(TRAIN)[0]]) + "\n"
    cases = [
        (_copy(tmp_path / "a", dev="\n\n".join([bad, dev[1]]) + "\n"),
         f"{DEV} line 4: field end: offset 'x' is not an integer"),
        (_copy(tmp_path / "b", train=twice),
         f"{TRAIN} line 45: pmid 91000001: a second copy of the abstract on line 1; keep one"),
        (_copy(tmp_path / "c", test="\n\n".join(blocks(TEST) + [dev[1]]) + "\n"),
         f"{DEV} line 9: pmid 91000012: also in {TEST} (line 14): the official development "
         "and test sets share no abstract"),
    ]
    for folder, message in cases:
        out = folder.parent / "out"
        with pytest.raises(ValueError) as excinfo:
            prepare_cdr(str(folder), str(out))
        assert str(excinfo.value) == message
        assert not out.exists()
    folder = _copy(tmp_path / "d", test=None)
    with pytest.raises(PrepareError) as excinfo:
        prepare_cdr(str(folder), str(tmp_path / "d" / "out"))
    assert str(excinfo.value) == (f"{folder}: no test file (a non-empty file whose name holds "
                                  f"'test', such as {TEST})")
    with pytest.raises(PrepareError, match="the folder read from; give --out another folder"):
        prepare_cdr(PUBLIC, PUBLIC, overwrite=True)
    with pytest.raises(FileNotFoundError, match="nope: no such folder"):
        prepare_cdr(str(tmp_path / "nope"), str(tmp_path / "out"))


def test_data_help_lists_prepare(capsys):
    from tffre import cli
    with pytest.raises(SystemExit) as done:
        cli.main(["data", "prepare", "--help"])
    text = capsys.readouterr().out
    assert done.value.code == 0 and "--from DIR" in text and "--overwrite" in text
    assert load_documents(PUBLIC)["train"]   # the fixture reads as PubTator
