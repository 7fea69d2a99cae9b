"""The DocRED loader (tffre.data.formats.docred): offsets from tokens, Ign F1's facts, errors.

The fixtures fixtures/docre/docred_{train,test}.json are hand-written, invented documents in
DocRED's format; bad inputs are written into tmp_path by each test.
"""

import json

import pytest
from document_checks import (DOCRED_TEST, DOCRED_TRAIN, check_mentions, message,
                             sentence_texts, write)

from tffre.data.document_schema import DocREFormatError, Mention, Relation
from tffre.data.formats.docred import fact_keys, load_docred


def test_docred_offsets_equal_the_tokens():
    docs = load_docred(DOCRED_TRAIN)
    assert [d.pmid for d in docs] == ["Skai TV", "Lark Force"]
    doc = docs[0]
    assert doc.text == "Skai TV is a Greek television channel . Smith 's company owns Skai TV ."
    assert doc.sentences == [(0, 39), (40, 71)]
    assert sentence_texts(doc) == ["Skai TV is a Greek television channel .",
                                   "Smith 's company owns Skai TV ."]
    # Entity by entity, in vertexSet order; ids are the vertexSet indices.
    assert doc.mentions == [Mention(0, 7, "Skai TV", "ORG", ("0",), 0),
                            Mention(62, 69, "Skai TV", "ORG", ("0",), 1),
                            Mention(13, 18, "Greek", "LOC", ("1",), 0),
                            Mention(40, 48, "Smith 's", "PER", ("2",), 1)]
    assert doc.relations == [Relation("P17", "0", "1"), Relation("P127", "2", "0")]
    assert list(doc.entities()) == ["0", "1", "2"]
    check_mentions(doc)
    assert docs[1].mentions == [Mention(0, 10, "Lark Force", "ORG", ("0",), 0),
                                Mention(18, 33, "Australian Army", "ORG", ("1",), 0)]


def test_docred_without_labels_has_no_relations():
    (doc,) = load_docred(DOCRED_TEST)
    assert doc.pmid == "Skai Radio" and doc.relations == []
    assert [m.text for m in doc.mentions] == ["Skai Radio", "Athens"]


def test_fact_keys_for_ign_f1():
    # From Documents, a name is the mention text (the tokens joined by spaces) ...
    assert fact_keys(load_docred(DOCRED_TRAIN)) == {
        ("Skai TV", "Greek", "P17"), ("Smith 's", "Skai TV", "P127"),
        ("Lark Force", "Australian Army", "P361")}
    # ... from the JSON file, DocRED's own "name" field, as its evaluation uses.
    assert fact_keys(DOCRED_TRAIN) == {
        ("Skai TV", "Greek", "P17"), ("Smith's", "Skai TV", "P127"),
        ("Lark Force", "Australian Army", "P361")}
    assert fact_keys(load_docred(DOCRED_TEST)) == set()


def _docred(tmp_path, change):
    with open(DOCRED_TRAIN, encoding="utf-8") as f:
        data = json.load(f)
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("change, expected", [
    (lambda d: d[0]["vertexSet"][0][1].update(pos=[4, 9]),
     "bad.json record 1: field vertexSet[0][1].pos: [4, 9] is not a token span [start, end) of "
     "sentence 1 (7 tokens)"),
    (lambda d: d[1]["labels"][0].update(t=5),
     "bad.json record 2: field labels[0].t: 5 is not a vertexSet index (0..1)"),
    (lambda d: d[1]["vertexSet"][1][0].update(sent_id=1),
     "bad.json record 2: field vertexSet[1][0].sent_id: 1 is not a sentence index (0..0)"),
    (lambda d: d[0].pop("sents"), "bad.json record 1: field sents: missing field"),
    (lambda d: d[0]["sents"].append([]),
     "bad.json record 1: field sents[2]: must be a non-empty list of token strings, got []"),
])
def test_docred_errors_name_record_and_field(tmp_path, change, expected):
    with pytest.raises(DocREFormatError) as excinfo:
        load_docred(_docred(tmp_path, change))
    assert message(excinfo) == expected


def test_docred_invalid_json_names_the_line(tmp_path):
    path = write(tmp_path / "bad.json", ["[", '  {"title": "x",', "  oops", "]"])
    with pytest.raises(DocREFormatError) as excinfo:
        load_docred(path)
    assert message(excinfo).startswith("bad.json line 3: not valid JSON")


def test_lenient_docred(tmp_path):
    problems = []
    docs = load_docred(_docred(tmp_path, lambda d: d[1]["labels"][0].update(t=5)), problems)
    assert [d.pmid for d in docs] == ["Skai TV"]
    assert problems == ["bad.json record 2: field labels[0].t: 5 is not a vertexSet index (0..1)"]
