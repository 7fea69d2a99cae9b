"""The BLUE/BioBERT TSV loader (tffre.data.formats.blue): GAD, EU-ADR and ChemProt layouts.

Fixtures under fixtures/re/ are hand-written in the published layouts; bad inputs are written
into tmp_path by each test. Offsets in the expected rows are hand-computed. ChemProt's rows
are checked in test_chemprot.py.
"""

import os

import pytest
from sentence_rows import GAD, GAD_ROWS, GAD_TEST_ROWS, assert_rows, one_line, write

from tffre.data.formats.blue import load_blue_folder, load_blue_tsv
from tffre.data.sentence_schema import REFileNotFoundError, REFormatError


def test_gad_train_without_header_and_test_with_header():
    examples, labels = load_blue_tsv(os.path.join(GAD, "train.tsv"), "gad")
    assert_rows(examples, GAD_ROWS, [("@GENE$", "@DISEASE$"), ("@DISEASE$", "@GENE$")])
    assert labels == ["0", "1"]
    examples, labels = load_blue_tsv(os.path.join(GAD, "test.tsv"), "euadr")
    assert_rows(examples, GAD_TEST_ROWS, [("@GENE$", "@DISEASE$")] * 2)
    assert labels == ["0", "1"]


def test_blue_header_is_detected_by_content_not_name(tmp_path):
    path = write(tmp_path / "train.tsv", ["index\tsentence\tlabel", "7\t@GENE$ x @DISEASE$\t1"])
    assert list(load_blue_tsv(path, "gad")[0].example_id) == ["train:7"]
    path = write(tmp_path / "test.tsv", ["@GENE$ x @DISEASE$\t1", "", "@DISEASE$ y @GENE$\t0"])
    assert list(load_blue_tsv(path, "gad")[0].example_id) == ["test:1", "test:3"]


CP_HEADER = "index\tsentence\tlabel"


@pytest.mark.parametrize("task, lines, where, match", [
    ("chemprot", [CP_HEADER, "a\t@CHEMICAL$ x @GENE$\tfalse", "b\t@CHEMICAL$ y @GENE$\tCPR:7"],
     "train.tsv line 3", "field label: unknown label 'CPR:7'; valid: false, CPR:3, CPR:4, CPR:5, "
     "CPR:6, CPR:9$"),
    ("gad", ["@GENE$ x @DISEASE$\t2"], "train.tsv line 1", "unknown label '2'; valid: 0, 1"),
    ("gad", ["@GENE$ x @DISEASE$\t1", "@GENE$ x @DISEASE$\t0\textra"], "train.tsv line 2",
     "columns: expected 2 tab-separated columns .*got 3"),
    ("chemprot", [CP_HEADER, "@CHEMICAL$ x @GENE$\tfalse"], "train.tsv line 2",
     r"expected 3 tab-separated columns \(index, sentence, label\), got 2"),
    ("gad", ["only @GENE$ here\t1"], "train.tsv line 1",
     "field sentence: expected two entity placeholders or one @CHEM-GENE\\$, found 1: @GENE\\$"),
    ("gad", ["no entities\t1"], "train.tsv line 1", "found 0: none"),
    ("gad", ["@GENE$ @GENE$ @DISEASE$\t1"], "train.tsv line 1", "found 3"),
    ("chemprot", [CP_HEADER, "a\t@CHEM-GENE$ and @GENE$\tfalse"], "train.tsv line 2", "found 2"),
    ("gad", ["@CHEMICAL$ x @DISEASE$\t1"], "train.tsv line 1",
     "placeholder '@CHEMICAL\\$' is not used by gad"),
    ("chemprot", [CP_HEADER, "a\t@CHEMICAL$ x @GENE$\tfalse", "a\t@GENE$ y @CHEMICAL$\tfalse"],
     "train.tsv line 3", "field index: duplicate index 'a' \\(also line 2\\)"),
    ("chemprot", [], "train.tsv", "empty file"),
    ("chemprot", [CP_HEADER], "train.tsv", "no examples"),
])
def test_blue_errors(tmp_path, task, lines, where, match):
    path = write(tmp_path / "train.tsv", lines)
    with pytest.raises(REFormatError, match=match) as e:
        load_blue_tsv(path, task)
    assert one_line(e).startswith(where + ":")


def test_blue_folder():
    frames, labels = load_blue_folder(GAD, "gad")
    assert sorted(frames) == ["test", "train"] and labels == ["0", "1"]
    assert_rows(frames["test"], GAD_TEST_ROWS, [("@GENE$", "@DISEASE$")] * 2)
    with pytest.raises(REFileNotFoundError, match="none of train.tsv, dev.tsv, test.tsv"):
        load_blue_folder(os.path.dirname(GAD), "gad")
    with pytest.raises(ValueError, match="unknown BLUE task 'ddi'"):
        load_blue_folder(GAD, "ddi")
