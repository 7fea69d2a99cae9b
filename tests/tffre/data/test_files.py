"""The file helpers both loader families share (tffre.data.files): one wording for every error."""

import numpy as np
import pytest

from tffre.data.document_schema import FILES as DOCUMENT_FILES
from tffre.data.document_schema import DocREFileNotFoundError, DocREFormatError
from tffre.data.files import is_blank, is_int
from tffre.data.sentence_schema import FILES as SENTENCE_FILES
from tffre.data.sentence_schema import REFileNotFoundError, REFormatError

FAMILIES = [(SENTENCE_FILES, REFormatError, REFileNotFoundError),
            (DOCUMENT_FILES, DocREFormatError, DocREFileNotFoundError)]


@pytest.mark.parametrize("files, error, missing", FAMILIES)
def test_errors_name_file_place_and_field_on_one_line(files, error, missing):
    e = files.error("/data/train.tsv", 3, "field label", "bad\nvalue")
    assert type(e) is error and str(e) == "train.tsv line 3: field label: bad value"
    assert str(files.error("x/a.json", "record 2", None, "oops")) == "a.json record 2: oops"
    assert str(files.error("x/a.json", None, None, "empty file")) == "a.json: empty file"
    assert str(files.error("x/", None, None, "two train files")) == ": two train files"


@pytest.mark.parametrize("files, error, missing", FAMILIES)
def test_missing_paths_and_empty_files(tmp_path, files, error, missing):
    with pytest.raises(missing, match="nope.txt: no such file$") as excinfo:
        files.read_text(str(tmp_path / "nope.txt"))
    assert isinstance(excinfo.value, error) and isinstance(excinfo.value, FileNotFoundError)
    with pytest.raises(missing, match=r"no such file \(it is a folder\)$"):
        files.read_lines(str(tmp_path))
    with pytest.raises(missing, match="no such concept file$"):
        files.require_file(str(tmp_path / "a.con"), "concept file")
    with pytest.raises(missing, match="nope: no such folder$"):
        files.require_folder(str(tmp_path / "nope"))
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b"\xef\xbb\xbf \n\r\n")
    with pytest.raises(error, match="^blank.txt: empty file$"):
        files.read_lines(str(blank))
    assert files.read_lines(str(blank), allow_empty=True) == [" ", ""]
    assert is_blank(blank)
    text = tmp_path / "a.txt"
    text.write_bytes(b"\xef\xbb\xbfa\r\nb\n")
    assert files.read_lines(str(text)) == ["a", "b"] and not is_blank(text)


def test_json_object_per_line():
    assert SENTENCE_FILES.json_object("d.jsonl", 1, '{"a": 1}') == {"a": 1}
    with pytest.raises(REFormatError, match=r"^d.jsonl line 2: not valid JSON \(Expecting"):
        SENTENCE_FILES.json_object("d.jsonl", 2, "{oops")
    with pytest.raises(REFormatError, match="^d.jsonl line 3: expected a JSON object, got list$"):
        SENTENCE_FILES.json_object("d.jsonl", 3, "[1]")


def test_is_int_takes_numpy_integers_but_no_bools_or_floats():
    assert all(is_int(v) for v in (0, -3, np.int64(5), np.uint8(2)))
    assert not any(is_int(v) for v in (True, np.bool_(False), 1.0, np.float32(1), "1", None))
