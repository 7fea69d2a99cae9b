"""The sentence-level schema (tffre.data.sentence_schema): its columns, checks and errors."""

import pytest
from sentence_rows import JSONL, RECORD_ROW, frame, one_line

from tffre.data.formats.blue import load_blue_tsv
from tffre.data.formats.jsonl import load_jsonl
from tffre.data.sentence_schema import COLUMNS, REFileNotFoundError, REFormatError, check_examples


def test_columns():
    assert COLUMNS == ("example_id", "text", "e1_start", "e1_end", "e2_start", "e2_end",
                       "e1_type", "e2_type", "label")


def test_missing_file_error_is_both_format_and_file_not_found():
    with pytest.raises(REFileNotFoundError, match="nowhere.tsv: no such file") as e:
        load_blue_tsv("nowhere.tsv", "gad")
    assert isinstance(e.value, REFormatError) and isinstance(e.value, FileNotFoundError)
    assert one_line(e) == "nowhere.tsv: no such file"


def test_check_examples_accepts_loader_output_and_a_split_column():
    examples, labels = load_jsonl(JSONL)
    check_examples(examples, labels, "x")
    check_examples(examples.assign(split="dev"), labels, "x")


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
    with pytest.raises(REFormatError, match="^src: |^src row") as e:
        check_examples(change(df), ["false", "treats"], "src")
    assert e.match(match)
    one_line(e)


def test_check_examples_chem_gene_identical_spans_and_labels():
    df = frame([("a", "The @CHEM-GENE$ x", 4, 15, 4, 15, "CHEM-GENE", "CHEM-GENE", "false")])
    check_examples(df, ["false"], "src")
    with pytest.raises(REFormatError, match="labels must be a non-empty list"):
        check_examples(df, ["false", "false"], "src")
    with pytest.raises(REFormatError, match="labels must be a non-empty list"):
        check_examples(df, [], "src")


def test_lenient_check_examples():
    df = frame([RECORD_ROW, ("b", *RECORD_ROW[1:]), ("c", *RECORD_ROW[1:])])
    df.loc[1, "label"] = "causes"
    problems = []
    kept = check_examples(df, ["false", "treats"], "src", problems)
    assert list(kept.example_id) == ["a", "c"] and list(kept.index) == [0, 1]
    assert problems == ["src row 1 (example_id 'b'): field label: unknown label 'causes'; "
                        "valid: false, treats"]
