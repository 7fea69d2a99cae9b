"""The JSON-lines loader (tffre.data.formats.jsonl): rows, labels given or inferred, errors.

The fixture fixtures/re/generic.jsonl is hand-written; bad inputs are written into tmp_path
by each test. Offsets in the expected rows are hand-computed.
"""

import json

import pytest
from sentence_rows import JSONL, RECORD, assert_rows, one_line, write

from tffre.data.formats.jsonl import infer_labels, load_jsonl
from tffre.data.sentence_schema import REFormatError


JSONL_ROWS = [
    ("a1", "Aspirin relieves headache .", 0, 7, 17, 25, "drug", "problem", "treats"),
    ("generic:3", "Headache after aspirin .", 15, 22, 0, 8, "drug", "problem", "false"),
    ("generic:4", "Ibuprofen causes ulcers .", 0, 9, 17, 23, "drug", "problem", "causes"),
]


JSONL_ENTITIES = [("Aspirin", "headache"), ("aspirin", "Headache"), ("Ibuprofen", "ulcers")]


def test_jsonl_rows_and_inferred_labels():
    examples, labels = load_jsonl(JSONL)
    assert_rows(examples, JSONL_ROWS, JSONL_ENTITIES)
    assert labels == ["false", "causes", "treats"]  # sorted, the negative moved first


def test_jsonl_given_labels():
    given = ["false", "treats", "causes", "prevents"]
    assert load_jsonl(JSONL, labels=given)[1] == given
    with pytest.raises(REFormatError,
                       match="generic.jsonl line 4: field label: unknown label 'causes'; "
                             "valid: false, treats$"):
        load_jsonl(JSONL, labels=["false", "treats"])


def test_infer_labels():
    assert infer_labels(["b", "None", "a", "b"]) == ["None", "a", "b"]
    assert infer_labels(["1", "0"]) == ["0", "1"]
    assert infer_labels(["x", "false", "0"]) == ["false", "0", "x"]
    assert infer_labels(["y", "x"]) == ["x", "y"]


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
    with pytest.raises(REFormatError, match=match) as e:
        load_jsonl(path)
    assert one_line(e).startswith("data.jsonl line 3:")


def test_jsonl_integer_label_and_empty_file(tmp_path):
    path = write(tmp_path / "d.jsonl", [json.dumps({**RECORD, "label": 0, "example_id": 5})])
    examples, labels = load_jsonl(path)
    assert labels == ["0"] and examples.label[0] == "0" and examples.example_id[0] == "5"
    with pytest.raises(REFormatError, match=r"^d.jsonl: empty file$"):
        load_jsonl(write(tmp_path / "d.jsonl", "\n"))


def test_lenient_jsonl(tmp_path):
    path = write(tmp_path / "d.jsonl", [json.dumps(RECORD), "{oops",
                                        json.dumps({**RECORD, "e1_end": 99})])
    problems = []
    examples, _ = load_jsonl(path, problems=problems)
    assert len(examples) == 1 and [p[:20] for p in problems] == ["d.jsonl line 2: not ",
                                                                 "d.jsonl line 3: fiel"]
