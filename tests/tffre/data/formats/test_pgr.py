"""The PGR loader (tffre.data.formats.pgr): offsets into HTML-escaped sentences, and errors.

The fixture fixtures/re/pgr is hand-written in the published layout; bad inputs are written
into tmp_path by each test. Offsets in the expected rows are hand-computed.
"""

import html
import os

import pytest
from sentence_rows import PGR, assert_rows, one_line, write

from tffre.data.formats.pgr import PGR_HEADER, load_pgr, unescape_with_offsets
from tffre.data.sentence_schema import REFormatError

HEADER_LINE = "\t".join(PGR_HEADER)


def test_pgr_rows_unescape_and_labels():
    examples, labels = load_pgr(os.path.join(PGR, "train.tsv"))
    # Stored offsets (25, 29) and (47, 53) count "&amp;" and "&gt;" as written.
    assert_rows(examples, [
        ("train:2", "The R&D study linked MLH3 C>T to rectal cancer .", 21, 25, 40, 46,
         "GENE", "PHENOTYPE", "1"),
        ("train:3", "Ataxia in patients with EBF3 variants .", 24, 28, 0, 6,
         "GENE", "PHENOTYPE", "0"),
    ], [("MLH3", "cancer"), ("EBF3", "Ataxia")])
    assert labels == ["0", "1"]
    # test.tsv has the 12th CONFIRMATION column; True/FALSE are normalised.
    examples, _ = load_pgr(os.path.join(PGR, "test.tsv"))
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
    path = write(tmp_path / "train.tsv", [HEADER_LINE, line])
    with pytest.raises(REFormatError, match=match) as e:
        load_pgr(path)
    assert one_line(e).startswith("train.tsv line 2:")


def test_pgr_skip_invalid_drops_bad_rows_with_a_warning(tmp_path):
    good = pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia", 0, 4, 12, 18)
    bad = pgr_line("Testicular germ cell cancer .", "AA", "cancer", 21, 23, 21, 27, "False")
    path = write(tmp_path / "train.tsv", [HEADER_LINE, bad, good])
    with pytest.warns(UserWarning, match=r"skipped 1 invalid row.*train.tsv line 2: entity e1"):
        examples, _ = load_pgr(path, skip_invalid=True)
    assert list(examples.example_id) == ["train:3"]
    # Malformed lines are never skipped.
    path = write(tmp_path / "bad.tsv", [good, good.replace("True", "Yes")])
    with pytest.raises(REFormatError, match="bad.tsv line 2: field RELATION"):
        load_pgr(path, skip_invalid=True)


def test_pgr_header_is_optional_and_empty_files_are_refused(tmp_path):
    path = write(tmp_path / "x.tsv", [pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia",
                                               0, 4, 12, 18, "TRUE", ["C"])])
    assert list(load_pgr(path)[0].example_id) == ["x:1"]
    with pytest.raises(REFormatError, match=r"^x.tsv: no examples"):
        load_pgr(write(tmp_path / "x.tsv", [HEADER_LINE]))
    with pytest.raises(REFormatError, match=r"^x.tsv: empty file$"):
        load_pgr(write(tmp_path / "x.tsv", "\n \n"))


@pytest.mark.parametrize("raw", ["plain", "a &amp; b &lt;c&gt;", "&#65;&#x42;&zz; & R&D",
                                 "&amp x &notin; &notit;", "&"])
def test_unescape_with_offsets(raw):
    text, pos = unescape_with_offsets(raw)
    assert text == html.unescape(raw) and len(pos) == len(raw) + 1 and pos[-1] == len(text)
    for i, ch in enumerate(raw):
        if ch != "&" and pos[i] >= 0:
            assert text[pos[i]] == ch  # characters outside references keep their identity


def test_lenient_pgr(tmp_path):
    good = pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia", 0, 4, 12, 18)
    path = write(tmp_path / "p.tsv", [HEADER_LINE, good, good.replace("True", "Maybe"),
                                      pgr_line("ABC1 causes ataxia .", "ABC1", "ataxia", 1, 5,
                                               12, 18)])
    problems = []
    examples, _ = load_pgr(path, problems=problems)
    assert list(examples.example_id) == ["p:2"]
    assert [p.split(":")[0] for p in problems] == ["p.tsv line 3", "p.tsv line 4"]
