"""The EoG .data loader (tffre.data.formats.eog): documents from candidate pairs, and errors.

The fixture fixtures/docre/cdr.data is hand-written in EoG's layout; bad inputs are written into
tmp_path by each test. Expected offsets and spans are written out by hand. Which of EoG's two
files per split a folder gives is tested in test_document_sets.py.
"""

import pytest
from document_checks import EOG, check_mentions, message, write

from tffre.data.document_schema import DocREFormatError, Document, Mention, Relation
from tffre.data.formats.eog import eog_variants, load_eog


def test_eog_document():
    docs = load_eog(EOG)
    assert [d.pmid for d in docs] == ["90000001", "90000009"]
    doc = docs[0]
    assert doc.text == ("Fictazone - induced seizures . He received fictazone and later had "
                        "seizures and renal and hepatic failure . Aspirin was given for pain .")
    assert doc.sentences == [(0, 30), (31, 107), (108, 136)]
    # Deduplicated (entities recur in every pair) and sorted; the composite mention, written
    # once per id by EoG, is one mention with both ids again.
    assert doc.mentions == [
        Mention(0, 9, "Fictazone", "Chemical", ("C9000001",), 0),
        Mention(20, 28, "seizures", "Disease", ("D9000010",), 0),
        Mention(43, 52, "fictazone", "Chemical", ("C9000001",), 1),
        Mention(67, 75, "seizures", "Disease", ("D9000010",), 1),
        Mention(80, 105, "renal and hepatic failure", "Disease", ("D9000011", "D9000012"), 1),
        Mention(108, 115, "Aspirin", "Chemical", ("C9000002",), 2),
        Mention(130, 134, "pain", "Disease", ("D9000013",), 2),
    ]
    # 1:CID:2 pairs only; the two 1:NR:2 pairs are no relations.
    assert doc.relations == [Relation("CID", "C9000001", "D9000010"),
                             Relation("CID", "C9000001", "D9000011"),
                             Relation("CID", "C9000001", "D9000012")]
    check_mentions(doc)
    assert docs[1] == Document("90000009", "No entities here . Nor here .", [], [],
                               [(0, 18), (19, 29)])


def _eog_line(**changes):
    with open(EOG, encoding="utf-8") as f:
        fields = f.readline().rstrip("\n").split("\t")
    for index, value in changes.items():
        fields[int(index[1:])] = value
    return "\t".join(fields)


@pytest.mark.parametrize("line, expected", [
    (_eog_line() + "\textra",
     "x.data line 1: pmid 90000001: 86 fields after the text, not a multiple of 17"),
    (_eog_line(f3="sideways"),  # the first pair's direction
     "x.data line 1: pmid 90000001 pair 1: direction 'sideways' and cross 'NON-CROSS' must be"),
    (_eog_line(f11="1:19"),  # arg1's second mention ends past its sentence (tokens 5-18)
     "x.data line 1: pmid 90000001 pair 1 arg1: tokens 7-19 are not inside sentence 1 "
     "(tokens 5-18)"),
    (_eog_line(f10="0:x"),
     "x.data line 1: pmid 90000001 pair 1 arg1 starts: '0:x' is not a ':'-separated list of "
     "integers"),
    (_eog_line(f12="0"),
     "x.data line 1: pmid 90000001 pair 1 arg1: 2 starts, 2 ends and 1 sentence ids"),
    ("90000001", "x.data line 1: expected 'PMID<TAB>sentences' and 17 fields per pair"),
])
def test_eog_errors_name_line_and_pair(tmp_path, line, expected):
    path = write(tmp_path / "x.data", [line])
    with pytest.raises(DocREFormatError) as excinfo:
        load_eog(path)
    assert message(excinfo).startswith(expected)


def test_lenient_eog(tmp_path):
    with open(EOG, encoding="utf-8") as f:
        good = f.readline().rstrip("\n")
    problems = []
    docs = load_eog(write(tmp_path / "x.data", ["1\tA .\textra", good]), problems)
    assert [d.pmid for d in docs] == ["90000001"]
    assert problems == ["x.data line 1: pmid 1: 1 fields after the text, not a multiple of 17 "
                        "(one group per pair)"]


def test_eog_variants_pairs_a_split_with_its_filter_file():
    assert eog_variants(["train.data", "train_filter.data"]) == {
        "plain": "train.data", "filter": "train_filter.data"}
    assert eog_variants(["Train_Filter.data", "train.data"]) == {
        "plain": "train.data", "filter": "Train_Filter.data"}
    for names in (["train.data"], ["train.data", "dev_filter.data"],
                  ["train.txt", "train_filter.txt"], ["a.data", "b.data", "a_filter.data"]):
        assert eog_variants(names) is None
