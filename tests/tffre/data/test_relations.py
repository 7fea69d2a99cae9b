"""The sentence-level RE loaders (i2b2 2010, BLUE/BioBERT TSV, PGR, JSON lines) and their errors.

Fixtures under fixtures/re/ are hand-written in the published formats; bad inputs are
written into tmp_path by each test. Offsets in the expected rows are hand-computed.
"""

import html
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tffre.data import relations as rel

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "re")
I2B2 = os.path.join(FIXTURES, "i2b2")
GAD = os.path.join(FIXTURES, "gad")
CHEMPROT = os.path.join(FIXTURES, "chemprot", "train.tsv")
PGR = os.path.join(FIXTURES, "pgr")
JSONL = os.path.join(FIXTURES, "generic.jsonl")
PGR_HEADER = "\t".join(rel.PGR_HEADER)


def frame(rows, split=None):
    """The expected DataFrame: rows are (example_id, text, s1, e1, s2, e2, t1, t2, label)."""
    df = pd.DataFrame(rows, columns=list(rel.COLUMNS))
    for c in rel.OFFSET_COLUMNS:
        df[c] = df[c].astype(np.int64)
    if split is not None:
        df["split"] = split
    return df


def assert_rows(actual, expected_rows, entities, split=None):
    """Exact rows, and the entity strings the offsets cut out of the text."""
    pd.testing.assert_frame_equal(actual, frame(expected_rows, split))
    got = [(t[s1:e1], t[s2:e2]) for t, s1, e1, s2, e2 in
           zip(actual.text, actual.e1_start, actual.e1_end, actual.e2_start, actual.e2_end)]
    assert got == entities


def write(path, text):
    """Writes ``text`` (a str, or lines joined with newlines) and returns the path as str."""
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    if not isinstance(text, str):
        text = "".join(line + "\n" for line in text)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return str(path)


def one_line(excinfo):
    message = str(excinfo.value)
    assert "\n" not in message
    return message


# --------------------------------------------------------------------------- schema

def test_columns():
    assert rel.COLUMNS == ("example_id", "text", "e1_start", "e1_end", "e2_start", "e2_end",
                           "e1_type", "e2_type", "label")


def test_missing_file_error_is_both_format_and_file_not_found():
    with pytest.raises(rel.REFileNotFoundError, match="nowhere.tsv: no such file") as e:
        rel.load_blue_tsv("nowhere.tsv", "gad")
    assert isinstance(e.value, rel.REFormatError) and isinstance(e.value, FileNotFoundError)
    assert one_line(e) == "nowhere.tsv: no such file"


# --------------------------------------------------------------------------- i2b2

I2B2_ROWS = [
    ("record-1:1:0", "He was given aspirin for chest pain .", 13, 20, 25, 35,
     "treatment", "problem", "TrAP"),
    ("record-1:2:0", "A chest X-ray showed pneumonia and effusion .", 0, 13, 21, 30,
     "test", "problem", "TeRP"),
    ("record-1:2:1", "A chest X-ray showed pneumonia and effusion .", 0, 13, 35, 43,
     "test", "problem", "None"),
    ("record-1:2:2", "A chest X-ray showed pneumonia and effusion .", 21, 30, 35, 43,
     "problem", "problem", "None"),
    # .rel names diabetes first: the problem-problem pair takes the .rel order.
    ("record-1:4:0", "Neuropathy secondary to diabetes , treated with insulin .", 24, 32, 0, 10,
     "problem", "problem", "PIP"),
    ("record-1:4:1", "Neuropathy secondary to diabetes , treated with insulin .", 48, 55, 0, 10,
     "treatment", "problem", "None"),
    ("record-1:4:2", "Neuropathy secondary to diabetes , treated with insulin .", 48, 55, 24, 32,
     "treatment", "problem", "TrAP"),
    # record-2 has no .rel file; its test-treatment pair is not a candidate.
    ("record-2:1:0", "CT scan of the head was ordered for headache after morphine .", 0, 19, 36, 44,
     "test", "problem", "None"),
    ("record-2:1:1", "CT scan of the head was ordered for headache after morphine .", 51, 59,
     36, 44, "treatment", "problem", "None"),
    ("record-3:1:0", "Anemia from blood loss .", 0, 6, 12, 22, "problem", "problem", "PIP"),
]
I2B2_ENTITIES = [("aspirin", "chest pain"), ("A chest X-ray", "pneumonia"),
                 ("A chest X-ray", "effusion"), ("pneumonia", "effusion"),
                 ("diabetes", "Neuropathy"), ("insulin", "Neuropathy"), ("insulin", "diabetes"),
                 ("CT scan of the head", "headache"), ("morphine", "headache"),
                 ("Anemia", "blood loss")]


def test_i2b2_rows_and_labels():
    examples, labels = rel.load_i2b2(I2B2)
    assert_rows(examples, I2B2_ROWS, I2B2_ENTITIES)
    assert labels == ["None", "TrIP", "TrWP", "TrCP", "TrAP", "TrNAP", "TeRP", "TeCP", "PIP"]


def i2b2_doc(tmp_path, txt, con, rels=None, stem="doc", name="i2b2"):
    """Writes a one-document i2b2 folder; returns (folder, con path, rel path)."""
    folder = tmp_path / name
    write(folder / "txt" / f"{stem}.txt", txt)
    con_path = write(folder / "concept" / f"{stem}.con", con) if con is not None else None
    rel_path = write(folder / "rel" / f"{stem}.rel", rels) if rels is not None else None
    return str(folder), con_path, rel_path


TXT = ["He was given aspirin for chest pain .", "CT showed a mass ."]
CON = ['c="aspirin" 1:3 1:3||t="treatment"', 'c="chest pain" 1:5 1:6||t="problem"',
       'c="ct" 2:0 2:0||t="test"', 'c="a mass" 2:2 2:3||t="problem"']


def test_i2b2_concepts_on_a_concepts_folder_and_rel_reversed_treatment(tmp_path):
    # The test reference standard names the folder concepts/; a .rel may list the problem first.
    folder, con_path, _ = i2b2_doc(tmp_path, TXT, CON,
                                   ['c="chest pain" 1:5 1:6||r="TrAP"||c="aspirin" 1:3 1:3'])
    os.rename(os.path.dirname(con_path), os.path.join(folder, "concepts"))
    examples, _ = rel.load_i2b2(folder)
    assert list(examples.example_id) == ["doc:1:0", "doc:2:0"]
    assert list(examples.label) == ["TrAP", "None"]
    assert list(examples.e1_type) == ["treatment", "test"]


@pytest.mark.parametrize("con, rels, where, match", [
    # Concept text differs from its tokens: both strings are shown.
    (CON[:1] + ['c="chest pains" 1:5 1:6||t="problem"'], None, "doc.con line 2",
     r"field c: concept text 'chest pains' does not match tokens 1:5 1:6 of doc.txt, "
     r"which read 'chest pain'"),
    (CON + ["c=aspirin 1:3 1:3 treatment"], None, "doc.con line 5", "field c: malformed concept"),
    (CON + ['c="aspirin" 1:3 1:x||t="treatment"'], None, "doc.con line 5", "malformed concept"),
    (['c="aspirin" 1:3 1:3||t="drug"'], None, "doc.con line 1",
     "field t: unknown concept type 'drug'; valid: problem, test, treatment"),
    (['c="aspirin for chest" 1:3 2:0||t="problem"'], None, "doc.con line 1",
     "spans lines 1 and 2"),
    (['c="pain" 3:0 3:0||t="problem"'], None, "doc.con line 1", "line 3 is outside doc.txt"),
    (['c="pain" 1:6 1:9||t="problem"'], None, "doc.con line 1", "tokens 6..9 are outside line 1"),
    (CON, ['c="aspirin" 1:3 1:3||r="TrXX"||c="chest pain" 1:5 1:6'], "doc.rel line 1",
     "field r: unknown label 'TrXX'; valid: None, TrIP, TrWP"),
    (CON, ['c="aspirin" 1:3 1:3||r="TrAP"'], "doc.rel line 1", "malformed relation line"),
    # The relation's concept is not in the .con file.
    (CON, ['c="aspirin" 1:3 1:3||r="TrAP"||c="pain" 1:6 1:6'], "doc.rel line 1",
     r"entity e2: concept 'pain' 1:6 1:6 is not in doc.con"),
    (CON, ['c="aspirin" 1:3 1:3||r="TrAP"||c="chest" 1:5 1:5'], "doc.rel line 1",
     "entity e2: concept 'chest' 1:5 1:5 is not in doc.con"),
    (CON, ['c="aspirin" 1:3 1:3||r="TrAP"||c="chest pan" 1:5 1:6'], "doc.rel line 1",
     "entity e2: concept text 'chest pan' does not match"),
    # Not candidate pairs: across lines, and test-treatment.
    (CON, ['c="aspirin" 1:3 1:3||r="TrAP"||c="a mass" 2:2 2:3'], "doc.rel line 1",
     "field r: TrAP joins a treatment on line 1 and a problem on line 2, which is not a candidate"),
    (CON + ['c="he" 1:0 1:0||t="test"'],
     ['c="he" 1:0 1:0||r="TeRP"||c="aspirin" 1:3 1:3'], "doc.rel line 1",
     "TeRP joins a test on line 1 and a treatment on line 1, which is not a candidate"),
    (CON, ['c="ct" 2:0 2:0||r="TrAP"||c="a mass" 2:2 2:3'], "doc.rel line 1",
     "field r: TrAP must join a treatment and a problem, not a test and a problem"),
    (CON, ['c="aspirin" 1:3 1:3||r="TrAP"||c="chest pain" 1:5 1:6',
           'c="aspirin" 1:3 1:3||r="TrIP"||c="chest pain" 1:5 1:6'], "doc.rel line 2",
     "TrIP contradicts the relation on line 1"),
    ([], None, "doc.con", "empty file"),
])
def test_i2b2_errors(tmp_path, con, rels, where, match):
    folder, _, _ = i2b2_doc(tmp_path, TXT, con, rels)
    with pytest.raises(rel.REFormatError, match=match) as e:
        rel.load_i2b2(folder)
    assert one_line(e).startswith(where)


def test_i2b2_empty_txt_missing_con_and_missing_folders(tmp_path):
    folder, _, _ = i2b2_doc(tmp_path, "", CON)
    with pytest.raises(rel.REFormatError, match=r"^doc.txt: empty file$"):
        rel.load_i2b2(folder)
    folder, _, _ = i2b2_doc(tmp_path, TXT, None, stem="other", name="other")
    with pytest.raises(rel.REFileNotFoundError, match=r"other.con: no such concept file"):
        rel.load_i2b2(folder)
    with pytest.raises(rel.REFileNotFoundError, match="nothing: no such folder"):
        rel.load_i2b2(str(tmp_path / "nothing"))
    with pytest.raises(rel.REFileNotFoundError, match=r"txt: no such folder"):
        rel.load_i2b2(str(tmp_path))


def test_i2b2_nested_concepts_are_not_paired(tmp_path):
    folder, _, _ = i2b2_doc(tmp_path, TXT, CON[:2] + ['c="pain" 1:6 1:6||t="problem"'])
    examples, _ = rel.load_i2b2(folder)
    assert [(t[a:b], t[c:d]) for t, a, b, c, d in examples[list(rel.COLUMNS[1:6])].values] == [
        ("aspirin", "chest pain"), ("aspirin", "pain")]


# --------------------------------------------------------------------------- BLUE / BioBERT

GAD_ROWS = [
    ("train:1", "@GENE$ polymorphism is associated with @DISEASE$ risk .", 0, 6, 39, 48,
     "GENE", "DISEASE", "1"),
    ("train:2", "No association between @DISEASE$ and @GENE$ was found .", 23, 32, 37, 43,
     "DISEASE", "GENE", "0"),
]
GAD_TEST_ROWS = [
    ("test:0", "The @GENE$ variant and @DISEASE$ .", 4, 10, 23, 32, "GENE", "DISEASE", "1"),
    ("test:1", "Expression of @GENE$ in @DISEASE$ tissue .", 14, 20, 24, 33,
     "GENE", "DISEASE", "0"),
]


def test_gad_train_without_header_and_test_with_header():
    examples, labels = rel.load_blue_tsv(os.path.join(GAD, "train.tsv"), "gad")
    assert_rows(examples, GAD_ROWS, [("@GENE$", "@DISEASE$"), ("@DISEASE$", "@GENE$")])
    assert labels == ["0", "1"]
    examples, labels = rel.load_blue_tsv(os.path.join(GAD, "test.tsv"), "euadr")
    assert_rows(examples, GAD_TEST_ROWS, [("@GENE$", "@DISEASE$")] * 2)
    assert labels == ["0", "1"]


def test_blue_header_is_detected_by_content_not_name(tmp_path):
    path = write(tmp_path / "train.tsv", ["index\tsentence\tlabel", "7\t@GENE$ x @DISEASE$\t1"])
    assert list(rel.load_blue_tsv(path, "gad")[0].example_id) == ["train:7"]
    path = write(tmp_path / "test.tsv", ["@GENE$ x @DISEASE$\t1", "", "@DISEASE$ y @GENE$\t0"])
    assert list(rel.load_blue_tsv(path, "gad")[0].example_id) == ["test:1", "test:3"]


def test_chemprot_rows_and_chem_gene():
    examples, labels = rel.load_blue_tsv(CHEMPROT, "chemprot")
    assert_rows(examples, [
        ("train:10047461.T1.T2", "@CHEMICAL$ inhibits @GENE$ activity .", 0, 10, 20, 26,
         "CHEMICAL", "GENE", "CPR:4"),
        # A lone @CHEM-GENE$ is both entities: identical spans.
        ("train:10047461.T3.T4", "The @CHEM-GENE$ level was unchanged .", 4, 15, 4, 15,
         "CHEM-GENE", "CHEM-GENE", "false"),
        ("train:10064839.T5.T1", "Treatment with @CHEMICAL$ and anti-@GENE$ therapies .", 15, 25,
         35, 41, "CHEMICAL", "GENE", "CPR:9"),
    ], [("@CHEMICAL$", "@GENE$"), ("@CHEM-GENE$", "@CHEM-GENE$"), ("@CHEMICAL$", "@GENE$")])
    assert labels == ["false", "CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9"]


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
    with pytest.raises(rel.REFormatError, match=match) as e:
        rel.load_blue_tsv(path, task)
    assert one_line(e).startswith(where + ":")


def test_blue_folder():
    frames, labels = rel.load_blue_folder(GAD, "gad")
    assert sorted(frames) == ["test", "train"] and labels == ["0", "1"]
    assert_rows(frames["test"], GAD_TEST_ROWS, [("@GENE$", "@DISEASE$")] * 2)
    with pytest.raises(rel.REFileNotFoundError, match="none of train.tsv, dev.tsv, test.tsv"):
        rel.load_blue_folder(os.path.dirname(GAD), "gad")
    with pytest.raises(ValueError, match="unknown BLUE task 'ddi'"):
        rel.load_blue_folder(GAD, "ddi")


# --------------------------------------------------------------------------- PGR

def test_pgr_rows_unescape_and_labels():
    examples, labels = rel.load_pgr(os.path.join(PGR, "train.tsv"))
    # Stored offsets (25, 29) and (47, 53) count "&amp;" and "&gt;" as written.
    assert_rows(examples, [
        ("train:2", "The R&D study linked MLH3 C>T to rectal cancer .", 21, 25, 40, 46,
         "GENE", "PHENOTYPE", "1"),
        ("train:3", "Ataxia in patients with EBF3 variants .", 24, 28, 0, 6,
         "GENE", "PHENOTYPE", "0"),
    ], [("MLH3", "cancer"), ("EBF3", "Ataxia")])
    assert labels == ["0", "1"]
    # test.tsv has the 12th CONFIRMATION column; True/FALSE are normalised.
    examples, _ = rel.load_pgr(os.path.join(PGR, "test.tsv"))
    assert list(examples.label) == ["1", "0"]
    assert examples.text[1] == "SOX3 is high in osteosarcoma <tissue> ."


def pgr_line(sentence, gene, phen, gs, ge, ps, pe, label="True", extra=()):
    return "\t".join(["1", sentence, gene, phen, "1", "HP_1", str(gs), str(ge), str(ps), str(pe),
                      label, *extra])


@pytest.mark.parametrize("line, match", [
    (pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia", 0, 4, 12, 18, label="maybe"),
     "field RELATION: unknown label 'maybe'; valid: True, False"),
    (pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia", 0, "four", 12, 18),
     "field GENE_END_POSITION: offset 'four' is not an integer"),
    (pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia", 0, 4, 12, 18)[:-5],
     "columns: expected 11 tab-separated columns"),
    (pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia", 1, 5, 12, 18),
     r"entity e1 \(gene\): sentence\[1:5\] is 'BC1 ' but GENE is 'ABC1'"),
    (pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia", 0, 4, 12, 17),
     r"entity e2 \(phenotype\): sentence\[12:17\] is 'ataxi' but PHENOTYPE is 'ataxia'"),
    (pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia", 0, 4, 12, 40),
     r"entity e2 \(phenotype\): offsets \[12, 40\) are outside the sentence"),
    # Offsets must count "&amp;" as five characters: these count it as one.
    (pgr_line("X &amp; Y study shows ABC1 causes ataxia .", "ABC1", "ataxia", 18, 22, 34, 40),
     r"entity e1 \(gene\): sentence\[18:22\] is 'ows ' but GENE is 'ABC1'"),
    (pgr_line("a &amp; b", "amp", "b", 3, 6, 8, 9),
     r"offsets \[3, 6\) cut through a character reference"),
    (pgr_line("ABC1 causes ataxia .", "ABC1", "ABC1 causes", 0, 4, 0, 11),
     "entity e2: entity spans overlap"),
])
def test_pgr_errors(tmp_path, line, match):
    path = write(tmp_path / "train.tsv", [PGR_HEADER, line])
    with pytest.raises(rel.REFormatError, match=match) as e:
        rel.load_pgr(path)
    assert one_line(e).startswith("train.tsv line 2:")


def test_pgr_skip_invalid_drops_bad_rows_with_a_warning(tmp_path):
    good = pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia", 0, 4, 12, 18)
    bad = pgr_line("Testicular germ cell cancer .", "AA", "cancer", 21, 23, 21, 27, "False")
    path = write(tmp_path / "train.tsv", [PGR_HEADER, bad, good])
    with pytest.warns(UserWarning, match=r"skipped 1 invalid row.*train.tsv line 2: entity e1"):
        examples, _ = rel.load_pgr(path, skip_invalid=True)
    assert list(examples.example_id) == ["train:3"]
    # Malformed lines are never skipped.
    path = write(tmp_path / "bad.tsv", [good, good.replace("True", "Yes")])
    with pytest.raises(rel.REFormatError, match="bad.tsv line 2: field RELATION"):
        rel.load_pgr(path, skip_invalid=True)


def test_pgr_header_is_optional_and_empty_files_are_refused(tmp_path):
    path = write(tmp_path / "x.tsv", [pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia",
                                               0, 4, 12, 18, "TRUE", ["C"])])
    assert list(rel.load_pgr(path)[0].example_id) == ["x:1"]
    with pytest.raises(rel.REFormatError, match=r"^x.tsv: no examples"):
        rel.load_pgr(write(tmp_path / "x.tsv", [PGR_HEADER]))
    with pytest.raises(rel.REFormatError, match=r"^x.tsv: empty file$"):
        rel.load_pgr(write(tmp_path / "x.tsv", "\n \n"))


@pytest.mark.parametrize("raw", ["plain", "a &amp; b &lt;c&gt;", "&#65;&#x42;&zz; & R&D",
                                 "&amp x &notin; &notit;", "&"])
def test_unescape_with_offsets(raw):
    text, pos = rel.unescape_with_offsets(raw)
    assert text == html.unescape(raw) and len(pos) == len(raw) + 1 and pos[-1] == len(text)
    for i, ch in enumerate(raw):
        if ch != "&" and pos[i] >= 0:
            assert text[pos[i]] == ch  # characters outside references keep their identity


# --------------------------------------------------------------------------- JSON lines

JSONL_ROWS = [
    ("a1", "Aspirin relieves headache .", 0, 7, 17, 25, "drug", "problem", "treats"),
    ("generic:3", "Headache after aspirin .", 15, 22, 0, 8, "drug", "problem", "false"),
    ("generic:4", "Ibuprofen causes ulcers .", 0, 9, 17, 23, "drug", "problem", "causes"),
]
JSONL_ENTITIES = [("Aspirin", "headache"), ("aspirin", "Headache"), ("Ibuprofen", "ulcers")]


def test_jsonl_rows_and_inferred_labels():
    examples, labels = rel.load_jsonl(JSONL)
    assert_rows(examples, JSONL_ROWS, JSONL_ENTITIES)
    assert labels == ["false", "causes", "treats"]  # sorted, the negative moved first


def test_jsonl_given_labels():
    given = ["false", "treats", "causes", "prevents"]
    assert rel.load_jsonl(JSONL, labels=given)[1] == given
    with pytest.raises(rel.REFormatError,
                       match="generic.jsonl line 4: field label: unknown label 'causes'; "
                             "valid: false, treats$"):
        rel.load_jsonl(JSONL, labels=["false", "treats"])


def test_infer_labels():
    assert rel.infer_labels(["b", "None", "a", "b"]) == ["None", "a", "b"]
    assert rel.infer_labels(["1", "0"]) == ["0", "1"]
    assert rel.infer_labels(["x", "false", "0"]) == ["false", "0", "x"]
    assert rel.infer_labels(["y", "x"]) == ["x", "y"]


RECORD = {"text": "Aspirin relieves headache .", "e1_start": 0, "e1_end": 7, "e2_start": 17,
          "e2_end": 25, "e1_type": "drug", "e2_type": "problem", "label": "treats"}
RECORD_ROW = ("a", *RECORD.values())


@pytest.mark.parametrize("bad, match", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object, got list"),
    (json.dumps({k: v for k, v in RECORD.items() if k != "e2_end"}), "field e2_end: missing field"),
    (json.dumps({**RECORD, "e1_end": 7.0}), "field e1_end: must be an integer, got 7.0"),
    (json.dumps({**RECORD, "text": None}), "field text: must be a string"),
    (json.dumps({**RECORD, "label": None}), "field label: must be a string"),
    (json.dumps({**RECORD, "e2_end": 99}), "field e2_end: e2 end 99 must be > start 17"),
    (json.dumps({**RECORD, "e2_start": 5, "e2_end": 9}), "field e2_start: entity spans overlap"),
    (json.dumps({**RECORD, "example_id": "a"}), "field example_id: duplicate example_id 'a'"),
])
def test_jsonl_errors(tmp_path, bad, match):
    path = write(tmp_path / "data.jsonl", [json.dumps({**RECORD, "example_id": "a"}), "", bad])
    with pytest.raises(rel.REFormatError, match=match) as e:
        rel.load_jsonl(path)
    assert one_line(e).startswith("data.jsonl line 3:")


def test_jsonl_integer_label_and_empty_file(tmp_path):
    path = write(tmp_path / "d.jsonl", [json.dumps({**RECORD, "label": 0, "example_id": 5})])
    examples, labels = rel.load_jsonl(path)
    assert labels == ["0"] and examples.label[0] == "0" and examples.example_id[0] == "5"
    with pytest.raises(rel.REFormatError, match=r"^d.jsonl: empty file$"):
        rel.load_jsonl(write(tmp_path / "d.jsonl", "\n"))


# --------------------------------------------------------------------------- check_examples

def test_check_examples_accepts_loader_output_and_a_split_column():
    examples, labels = rel.load_jsonl(JSONL)
    rel.check_examples(examples, labels, "x")
    rel.check_examples(examples.assign(split="dev"), labels, "x")


@pytest.mark.parametrize("change, match", [
    (lambda df: df.assign(e1_end=30), "row 0 .*field e1_end: e1 end 30 must be > start 0"),
    (lambda df: df.assign(e1_start=-1), "field e1_start: e1 start -1 is outside the text"),
    (lambda df: df.assign(e2_start=5, e2_end=9), "field e2_start: entity spans overlap"),
    # Identical spans are the CHEM-GENE case only.
    (lambda df: df.assign(e2_start=0, e2_end=7), "entity spans overlap"),
    (lambda df: df.assign(e2_start=0, e2_end=7, e1_type="CHEM-GENE"), "entity spans overlap"),
    (lambda df: df.assign(label="causes"), "field label: unknown label 'causes'; valid: false, "
                                           "treats"),
    (lambda df: df.assign(split="val"), "field split: unknown split 'val'"),
    (lambda df: df.assign(example_id="same"), "row 1 .*duplicate example_id \\(also row 0\\)"),
    (lambda df: df.assign(e1_start=0.0), "field e1_start: must be an integer"),
    (lambda df: df.assign(text=1), "field text: must be a string"),
    (lambda df: df.drop(columns="label"), "columns are"),
    (lambda df: df.assign(extra=1), "columns are"),
])
def test_check_examples_errors(change, match):
    df = frame([RECORD_ROW, ("b", *RECORD_ROW[1:])])
    with pytest.raises(rel.REFormatError, match="^src: |^src row") as e:
        rel.check_examples(change(df), ["false", "treats"], "src")
    assert e.match(match)
    one_line(e)



def test_check_examples_chem_gene_identical_spans_and_labels():
    df = frame([("a", "The @CHEM-GENE$ x", 4, 15, 4, 15, "CHEM-GENE", "CHEM-GENE", "false")])
    rel.check_examples(df, ["false"], "src")
    with pytest.raises(rel.REFormatError, match="labels must be a non-empty list"):
        rel.check_examples(df, ["false", "false"], "src")
    with pytest.raises(rel.REFormatError, match="labels must be a non-empty list"):
        rel.check_examples(df, [], "src")


# --------------------------------------------------------------------------- load_re

def test_load_re_files_have_no_split_column():
    examples, labels = rel.load_re("chemprot", CHEMPROT)
    assert list(examples.columns) == list(rel.COLUMNS) and labels[0] == "false"
    assert rel.load_re("jsonl", JSONL)[1] == ["false", "causes", "treats"]
    assert len(rel.load_re("pgr", os.path.join(PGR, "test.tsv"))[0]) == 2


def test_load_re_folders_concatenate_splits():
    examples, labels = rel.load_re("gad", GAD)
    assert_rows(examples, GAD_ROWS + GAD_TEST_ROWS,
                [("@GENE$", "@DISEASE$"), ("@DISEASE$", "@GENE$")] + [("@GENE$", "@DISEASE$")] * 2,
                split=["train", "train", "test", "test"])
    assert labels == ["0", "1"]
    examples, labels = rel.load_re("pgr", PGR)
    assert list(examples.split) == ["train", "train", "test", "test"] and labels == ["0", "1"]
    assert list(examples.example_id) == ["train:2", "train:3", "test:2", "test:3"]


def test_load_re_i2b2_single_and_split_folders(tmp_path):
    examples, labels = rel.load_re("i2b2", I2B2)
    assert_rows(examples, I2B2_ROWS, I2B2_ENTITIES, split="train")
    assert labels[0] == "None"
    for split, stems in (("train", ["record-1", "record-2"]), ("test", ["record-3"])):
        for sub, ext in (("txt", ".txt"), ("concept", ".con"), ("rel", ".rel")):
            os.makedirs(tmp_path / split / sub)
            for stem in stems:
                if os.path.exists(os.path.join(I2B2, sub, stem + ext)):
                    shutil.copy(os.path.join(I2B2, sub, stem + ext), tmp_path / split / sub)
    examples, _ = rel.load_re("i2b2", str(tmp_path))
    assert list(examples.split) == ["train"] * 9 + ["test"]
    pd.testing.assert_frame_equal(examples.drop(columns="split"), frame(I2B2_ROWS))


def test_load_re_jsonl_folder_infers_labels_over_splits(tmp_path):
    write(tmp_path / "train.jsonl", [json.dumps(RECORD)])
    write(tmp_path / "test.jsonl", [json.dumps({**RECORD, "label": "None"})])
    examples, labels = rel.load_re("jsonl", str(tmp_path))
    assert labels == ["None", "treats"]
    assert list(examples.example_id) == ["train:1", "test:1"]
    assert list(examples.split) == ["train", "test"]
    with pytest.raises(rel.REFormatError, match="test.jsonl line 1: field label"):
        rel.load_re("jsonl", str(tmp_path), labels=["treats"])


def test_load_re_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown dataset 'ddi'"):
        rel.load_re("ddi", GAD)
    with pytest.raises(rel.REFileNotFoundError, match="missing: no such file or folder"):
        rel.load_re("gad", str(tmp_path / "missing"))
    with pytest.raises(rel.REFileNotFoundError, match="neither txt/ nor train/"):
        rel.load_re("i2b2", str(tmp_path))
    with pytest.raises(rel.REFileNotFoundError, match="none of train.jsonl"):
        rel.load_re("jsonl", str(tmp_path))


def test_module_does_not_import_tensorflow():
    # Load the file on its own: importing it via the tffre.data package would pull in TF.
    code = ("import importlib.util, sys;"
            " s = importlib.util.spec_from_file_location('m', sys.argv[1]);"
            " s.loader.exec_module(importlib.util.module_from_spec(s));"
            " print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, rel.__file__], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- published variants
# Invented files in the layouts of the public copies (tests/fixtures/README.md).

PUBLISHED = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "fixtures")
GAD_FOLD = os.path.join(PUBLISHED, "gad_fold")
CHEMPROT_IDS = os.path.join(PUBLISHED, "chemprot_ids")
SCIBERT = os.path.join(PUBLISHED, "scibert_chemprot")

GAD_FOLD_TRAIN = [
    ("train:1", "@GENE$ variants raise @DISEASE$ risk .", 0, 6, 22, 31, "GENE", "DISEASE", "1"),
    ("train:2", "No link between @DISEASE$ and @GENE$ .", 16, 25, 30, 36, "DISEASE", "GENE", "0"),
    ("train:3", "@GENE$ was not associated with @DISEASE$ .", 0, 6, 31, 40, "GENE", "DISEASE",
     "0"),
    ("train:4", "The @GENE$ allele predisposes to @DISEASE$ .", 4, 10, 33, 42, "GENE", "DISEASE",
     "1"),
    ("train:5", "@DISEASE$ patients carry @GENE$ mutations .", 0, 9, 25, 31, "DISEASE", "GENE",
     "1"),
]
GAD_FOLD_TEST = [
    ("test:0", "@GENE$ expression in @DISEASE$ .", 0, 6, 21, 30, "GENE", "DISEASE", "1"),
    ("test:1", "@DISEASE$ and @GENE$ were unrelated .", 0, 9, 14, 20, "DISEASE", "GENE", "0"),
]


def placeholders(rows):
    return [(t[s1:e1], t[s2:e2]) for _, t, s1, e1, s2, e2, *_ in rows]


def test_biobert_fold_with_an_empty_dev_file():
    notes = []
    examples, labels = rel.load_re("gad", GAD_FOLD, notes=notes)
    rows = GAD_FOLD_TRAIN + GAD_FOLD_TEST
    assert_rows(examples, rows, placeholders(rows), split=["train"] * 5 + ["test"] * 2)
    assert labels == ["0", "1"]
    assert notes == ["dev.tsv: empty file, read as no dev split"]
    # The empty file itself, named directly, is still refused.
    with pytest.raises(rel.REFormatError, match=r"^dev.tsv: empty file$"):
        rel.load_blue_tsv(os.path.join(GAD_FOLD, "dev.tsv"), "gad")


def test_relation_splits_hold_out_a_seeded_dev_slice():
    notes = []
    splits, labels = rel.load_relation_splits("gad", GAD_FOLD, seed=3, notes=notes)
    dev = np.sort(np.random.RandomState([3, 13]).permutation(5)[:1]).tolist()  # 20% of 5
    assert list(splits) == ["train", "dev", "test"]
    assert list(splits["dev"].example_id) == [GAD_FOLD_TRAIN[i][0] for i in dev]
    assert list(splits["train"].example_id) == [r[0] for i, r in enumerate(GAD_FOLD_TRAIN)
                                                if i not in dev]
    pd.testing.assert_frame_equal(splits["test"], frame(GAD_FOLD_TEST))
    assert notes == ["dev.tsv: empty file, read as no dev split",
                     "no dev split: held out 1 of 5 training examples (20%, seeded) as dev"]
    # A single file: test, then dev, come out of it.
    splits, _ = rel.load_relation_splits("gad", os.path.join(GAD_FOLD, "train.tsv"), seed=0)
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [3, 1, 1]


CHEMPROT_ID_ROWS = [
    ("train:10064839.T49.T56", "Binding of @CHEMICAL$ to @GENE$ sites .", 11, 21, 25, 31,
     "CHEMICAL", "GENE", "false"),
    ("train:10064839.T7.T56", "@CHEMICAL$ is an agonist of @GENE$ .", 0, 10, 28, 34,
     "CHEMICAL", "GENE", "CPR:5"),
    ("train:23017395.T1.T2", "The @CHEM-GENE$ level fell .", 4, 15, 4, 15, "CHEM-GENE",
     "CHEM-GENE", "false"),
]


def test_chemprot_with_an_id_column_and_no_header():
    examples, labels = rel.load_blue_tsv(os.path.join(CHEMPROT_IDS, "train.tsv"), "chemprot")
    assert_rows(examples, CHEMPROT_ID_ROWS, placeholders(CHEMPROT_ID_ROWS))
    assert labels == list(rel.CHEMPROT_LABELS)
    examples, _ = rel.load_re("chemprot", CHEMPROT_IDS)
    assert list(examples.example_id) == [r[0] for r in CHEMPROT_ID_ROWS] + [
        "test:10082498.T3.T9"]
    assert (examples.e2_start[3], examples.e2_end[3]) == (23, 33)  # "@GENE$ is inhibited by "


@pytest.mark.parametrize("lines, match", [
    (["a\t@CHEMICAL$ x @GENE$\tfalse", "a\t@CHEMICAL$ y @GENE$\tfalse"],
     "train.tsv line 2: field id: duplicate id 'a' \\(also line 1\\)"),
    (["a\t@CHEMICAL$ x @GENE$\tfalse", "@CHEMICAL$ y @GENE$\tfalse"],
     r"train.tsv line 2: columns: expected 3 tab-separated columns \(id, sentence, label\)"),
    (["\t@CHEMICAL$ x @GENE$\tfalse"], "train.tsv line 1: field id: empty id"),
])
def test_id_column_errors(tmp_path, lines, match):
    with pytest.raises(rel.REFormatError, match=match):
        rel.load_blue_tsv(write(tmp_path / "train.tsv", lines), "chemprot")


SCIBERT_ROWS = [
    ("train:1", "Aspirin inhibits COX-1 activity .", 0, 7, 17, 22, "INHIBITOR"),
    # [[ ]] first in the text: e1 is still the << >> entity.
    ("train:2", "The beta(1)-adrenoceptor antagonist CGP-20712A was used .", 36, 46, 4, 24,
     "ANTAGONIST"),
    ("train:3", "L-DOPA is both substrate and product of DDC .", 0, 6, 40, 43,
     "SUBSTRATE_PRODUCT-OF"),
    # "[[(" and "]]-" without the marker's space are text.
    ("dev:1", "IB-MECA ( 1-[[(3-iodo)methyl]]-x ) activates A3 receptor .", 0, 7, 45, 56,
     "UPREGULATOR"),
    # A " >> " after the closing marker is text.
    ("test:1", "Panx1 currents : carbenoxolone > probenecid >> flufenamic acid .", 0, 5, 33, 43,
     "INHIBITOR"),
    ("test:2", "Ro 31-8220 , an PKC agonist-inhibitor .", 0, 10, 16, 19, "AGONIST-INHIBITOR"),
    ("test:3", "CYP3A4 metabolises midazolam .", 19, 28, 0, 6, "SUBSTRATE"),
]
SCIBERT_ENTITIES = [("Aspirin", "COX-1"), ("CGP-20712A", "beta(1)-adrenoceptor"),
                    ("L-DOPA", "DDC"), ("IB-MECA", "A3 receptor"), ("Panx1", "probenecid"),
                    ("Ro 31-8220", "PKC"), ("midazolam", "CYP3A4")]
# ChemProt's guidelines: the group of each relation type.
SCIBERT_GROUPS = ["CPR:4", "CPR:6", "CPR:9", "CPR:3", "CPR:4", "CPR:5", "CPR:9"]


def scibert_rows(labels):
    return [(*row[:6], "ENTITY", "ENTITY", label) for row, label in zip(SCIBERT_ROWS, labels)]


def test_scibert_chemprot_markers_become_offsets_and_labels_their_group():
    examples, labels = rel.load_re("chemprot", SCIBERT)
    assert_rows(examples, scibert_rows(SCIBERT_GROUPS), SCIBERT_ENTITIES,
                split=["train"] * 3 + ["dev"] + ["test"] * 3)
    assert labels == ["false", "CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9"]
    examples, labels = rel.load_re("chemprot", SCIBERT, raw_labels=True)
    assert list(examples.label) == [row[-1] for row in SCIBERT_ROWS]
    assert labels[0] == "false" and len(labels) == 14
    assert set(labels[1:]) == {"UPREGULATOR", "ACTIVATOR", "INDIRECT-UPREGULATOR",
                               "DOWNREGULATOR", "INHIBITOR", "INDIRECT-DOWNREGULATOR",
                               "AGONIST", "AGONIST-ACTIVATOR", "AGONIST-INHIBITOR",
                               "ANTAGONIST", "SUBSTRATE", "PRODUCT-OF", "SUBSTRATE_PRODUCT-OF"}
    # One file, by its content.
    examples, _ = rel.load_re("chemprot", os.path.join(SCIBERT, "dev.txt"))
    assert list(examples.label) == ["CPR:3"]
    with pytest.raises(rel.REFormatError, match="raw_labels: BLUE's ChemProt TSV holds only"):
        rel.load_re("chemprot", CHEMPROT_IDS, raw_labels=True)


@pytest.mark.parametrize("record, match", [
    ({"text": "no markers here", "label": "INHIBITOR"},
     "field text: expected one '<<' marker \\(e1\\), found 0"),
    ({"text": "<< A >> << B >> [[ C ]]", "label": "INHIBITOR"},
     "field text: expected one '<<' marker \\(e1\\), found 2"),
    ({"text": "<< A >> and [[ B", "label": "INHIBITOR"},
     "field text: no ']]' after the '\\[\\[' marker \\(e2\\)"),
    ({"text": "<< A [[ B >> C ]]", "label": "INHIBITOR"},
     "field text: the << >> and \\[\\[ \\]\\] markers overlap"),
    ({"text": "<<  >> [[ B ]]", "label": "INHIBITOR"}, "field text: empty entity e1"),
    ({"text": "<< A >> [[ B ]]", "label": "NOT"},
     "field label: unknown label 'NOT'; valid: false, UPREGULATOR, ACTIVATOR"),
    ({"text": 5, "label": "INHIBITOR"}, "field text: must be a string, got 5"),
    ({"label": "INHIBITOR"}, "field text: missing field"),
    ("not json", "not valid JSON"),
])
def test_scibert_errors(tmp_path, record, match):
    line = record if isinstance(record, str) else json.dumps(record)
    good = json.dumps({"text": "<< A >> [[ B ]]", "label": "INHIBITOR"})
    with pytest.raises(rel.REFormatError, match="^train.txt line 2: " + match):
        rel.load_scibert_chemprot(write(tmp_path / "train.txt", [good, line]))


# --------------------------------------------------------------------------- lenient loading

BAD_GAD = ["@GENE$ x @DISEASE$\t1", "@GENE$ y\t1", "@GENE$ z @DISEASE$\t7",
           "@DISEASE$ w @GENE$\t0\textra", "@GENE$ v @DISEASE$\t0"]
BAD_GAD_PROBLEMS = [
    "train.tsv line 2: field sentence: expected two entity placeholders or one @CHEM-GENE$, "
    "found 1: @GENE$",
    "train.tsv line 3: field label: unknown label '7'; valid: 0, 1",
    "train.tsv line 4: columns: expected 2 tab-separated columns (sentence, label) (no "
    "'index\\tsentence\\tlabel' header), got 3",
]


def test_lenient_loading_collects_every_bad_line(tmp_path):
    path = write(tmp_path / "train.tsv", BAD_GAD)
    with pytest.raises(rel.REFormatError) as e:  # strict, the default: the first problem
        rel.load_blue_tsv(path, "gad")
    assert one_line(e) == BAD_GAD_PROBLEMS[0]
    problems = []
    examples, _ = rel.load_blue_tsv(path, "gad", problems=problems)
    assert problems == BAD_GAD_PROBLEMS
    assert list(examples.example_id) == ["train:1", "train:5"]
    # Through load_re and a folder: the same problems, the good rows kept.
    write(tmp_path / "fold" / "train.tsv", BAD_GAD)
    write(tmp_path / "fold" / "test.tsv", GAD_FOLD_TEST_LINES)
    problems = []
    examples, _ = rel.load_re("gad", str(tmp_path / "fold"), problems=problems)
    assert problems == BAD_GAD_PROBLEMS
    assert list(examples.split) == ["train", "train", "test"]


GAD_FOLD_TEST_LINES = ["index\tsentence\tlabel", "0\t@GENE$ expression in @DISEASE$ .\t1"]


def test_lenient_jsonl_pgr_and_check_examples(tmp_path):
    path = write(tmp_path / "d.jsonl", [json.dumps(RECORD), "{oops",
                                        json.dumps({**RECORD, "e1_end": 99})])
    problems = []
    examples, _ = rel.load_jsonl(path, problems=problems)
    assert len(examples) == 1 and [p[:20] for p in problems] == ["d.jsonl line 2: not ",
                                                                 "d.jsonl line 3: fiel"]
    good = pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia", 0, 4, 12, 18)
    path = write(tmp_path / "p.tsv", [PGR_HEADER, good, good.replace("True", "Maybe"),
                                      pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia", 1, 5,
                                               12, 18)])
    problems = []
    examples, _ = rel.load_pgr(path, problems=problems)
    assert list(examples.example_id) == ["p:2"]
    assert [p.split(":")[0] for p in problems] == ["p.tsv line 3", "p.tsv line 4"]
    df = frame([RECORD_ROW, ("b", *RECORD_ROW[1:]), ("c", *RECORD_ROW[1:])])
    df.loc[1, "label"] = "causes"
    problems = []
    kept = rel.check_examples(df, ["false", "treats"], "src", problems)
    assert list(kept.example_id) == ["a", "c"] and list(kept.index) == [0, 1]
    assert problems == ["src row 1 (example_id 'b'): field label: unknown label 'causes'; "
                        "valid: false, treats"]


def test_lenient_i2b2(tmp_path):
    folder, _, _ = i2b2_doc(tmp_path, TXT, CON + ['c="aspirin" 1:3 1:3||t="drug"',
                                                  'c="pain" 3:0 3:0||t="problem"'],
                            ['c="aspirin" 1:3 1:3||r="TrXX"||c="chest pain" 1:5 1:6'])
    problems = []
    examples, _ = rel.load_i2b2(folder, problems)
    assert [p.split(":")[0] for p in problems] == ["doc.con line 5", "doc.con line 6",
                                                   "doc.rel line 1"]
    assert list(examples.label) == ["None", "None"]  # the candidate pairs, without the relation
