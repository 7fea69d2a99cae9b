"""The shared file reading behind the loaders: UTF-8 with a BOM, line ends, errors naming the line."""

import pytest

from tffre.data.document_schema import DocREFormatError
from tffre.data.formats.blue import load_blue_tsv
from tffre.data.formats.pubtator import load_pubtator
from tffre.data.sentence_schema import REFormatError
from tffre.errors import read_utf8, text_lines


class LineError(ValueError):
    pass


def _raise_line(line, message):
    return LineError(f"line {line}: {message}")


def test_read_utf8_drops_the_bom(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes("\ufeffa\r\nb\n".encode("utf-8"))
    text = read_utf8(path, _raise_line)
    assert text == "a\r\nb\n"
    assert text_lines(text) == ["a", "b"]


def test_read_utf8_names_the_line_of_bad_bytes(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"ok\nfine\nbad \xff here\n")
    with pytest.raises(LineError, match=r"line 3: not UTF-8 text \(invalid start byte\)"):
        read_utf8(path, _raise_line)


def test_text_lines_keeps_inner_empty_lines():
    assert text_lines("a\n\nb") == ["a", "", "b"]
    assert text_lines("a\r\n\r\n") == ["a", ""]
    assert text_lines("") == []


def test_loaders_name_file_and_line_of_bad_bytes(tmp_path):
    tsv = tmp_path / "train.tsv"
    tsv.write_bytes(b"index\tsentence\tlabel\n0\tbad \xe9 byte\t0\n")
    with pytest.raises(REFormatError, match=r"train\.tsv line 2: not UTF-8 text"):
        load_blue_tsv(tsv, "gad")
    pubtator = tmp_path / "docs.pubtator"
    pubtator.write_bytes(b"7|t|Drug X\n7|a|caused \xe9 rash.\n")
    with pytest.raises(DocREFormatError, match=r"docs\.pubtator line 2: not UTF-8 text"):
        load_pubtator(pubtator)
