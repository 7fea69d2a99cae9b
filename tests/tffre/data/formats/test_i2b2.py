"""The i2b2/n2c2 2010 loader (tffre.data.formats.i2b2): rows, candidate pairs and errors.

The fixture fixtures/re/i2b2 is hand-written in the release's layout; bad inputs are written
into tmp_path by each test. Offsets in the expected rows are hand-computed.
"""

import os

import pytest
from sentence_rows import I2B2, I2B2_ENTITIES, I2B2_ROWS, assert_rows, one_line, write

from tffre.data.formats.i2b2 import load_i2b2
from tffre.data.sentence_schema import COLUMNS, REFileNotFoundError, REFormatError


def test_i2b2_rows_and_labels():
    examples, labels = load_i2b2(I2B2)
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
    examples, _ = load_i2b2(folder)
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
    with pytest.raises(REFormatError, match=match) as e:
        load_i2b2(folder)
    assert one_line(e).startswith(where)


def test_i2b2_empty_txt_missing_con_and_missing_folders(tmp_path):
    folder, _, _ = i2b2_doc(tmp_path, "", CON)
    with pytest.raises(REFormatError, match=r"^doc.txt: empty file$"):
        load_i2b2(folder)
    folder, _, _ = i2b2_doc(tmp_path, TXT, None, stem="other", name="other")
    with pytest.raises(REFileNotFoundError, match=r"other.con: no such concept file"):
        load_i2b2(folder)
    with pytest.raises(REFileNotFoundError, match="nothing: no such folder"):
        load_i2b2(str(tmp_path / "nothing"))
    with pytest.raises(REFileNotFoundError, match=r"txt: no such folder"):
        load_i2b2(str(tmp_path))


def test_i2b2_nested_concepts_are_not_paired(tmp_path):
    folder, _, _ = i2b2_doc(tmp_path, TXT, CON[:2] + ['c="pain" 1:6 1:6||t="problem"'])
    examples, _ = load_i2b2(folder)
    assert [(t[a:b], t[c:d]) for t, a, b, c, d in examples[list(COLUMNS[1:6])].values] == [
        ("aspirin", "chest pain"), ("aspirin", "pain")]


def test_lenient_i2b2(tmp_path):
    folder, _, _ = i2b2_doc(tmp_path, TXT, CON + ['c="aspirin" 1:3 1:3||t="drug"',
                                                  'c="pain" 3:0 3:0||t="problem"'],
                            ['c="aspirin" 1:3 1:3||r="TrXX"||c="chest pain" 1:5 1:6'])
    problems = []
    examples, _ = load_i2b2(folder, problems)
    assert [p.split(":")[0] for p in problems] == ["doc.con line 5", "doc.con line 6",
                                                   "doc.rel line 1"]
    assert list(examples.label) == ["None", "None"]  # the candidate pairs, without the relation
