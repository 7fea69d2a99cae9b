"""The file handling every relation-set loader shares: reading, and naming what is wrong where.

A loader's error is one line that names the file (its base name), the place in it (a 1-based
line, or a record such as ``record 3``), then the field or entity at fault:
``"train.tsv line 3: field label: unknown label '7'; valid: 0, 1"``. Each family of loaders
binds one :class:`Files` to its own error classes (:mod:`tffre.data.sentence_schema`: the
sentence-level sets' ``REFormatError``; :mod:`tffre.data.document_schema`: the document sets'
``DocREFormatError``), so every format of a family raises the same types with the same wording.
"""

import json
import numbers
import os

from tffre.errors import one_line, read_utf8, text_lines


class Files:
    """File helpers raising ``error`` (a ``ValueError`` subclass) for bad content and
    ``missing`` (its ``FileNotFoundError`` subclass) for a path that is not there."""

    def __init__(self, error, missing):
        self.error_type, self.missing_type = error, missing

    def error(self, path, loc, where, message):
        """The error "file loc: where: message", forced onto one line.

        ``loc`` is a 1-based line number, a place such as ``"record 3"``, or None (the whole
        file); ``where`` the field or entity at fault, or None.
        """
        text = os.path.basename(str(path))
        if isinstance(loc, int):
            loc = f"line {loc}"
        if loc:
            text += f" {loc}"
        if where:
            text += f": {where}"
        return self.error_type(one_line(f"{text}: {message}"))

    def require_file(self, path, what="file"):
        if not os.path.isfile(path):
            if what == "file" and os.path.isdir(path):
                what = "file (it is a folder)"
            raise self.missing_type(f"{path}: no such {what}")

    def require_folder(self, path, what="folder"):
        if not os.path.isdir(path):
            raise self.missing_type(f"{path}: no such {what}")

    def read_text(self, path, allow_empty=False):
        """A UTF-8 file's text (BOM dropped); an empty or blank file is refused unless allowed."""
        self.require_file(path)
        text = read_utf8(path, lambda line, message: self.error(path, line, None, message))
        if not text.strip() and not allow_empty:
            raise self.error(path, None, None, "empty file")
        return text

    def read_lines(self, path, allow_empty=False):
        """The lines of a UTF-8 file (BOM and CR dropped), as :meth:`read_text` reads it."""
        return text_lines(self.read_text(path, allow_empty))

    def json_object(self, path, lineno, line):
        """The JSON object on line ``lineno`` of a JSON-lines file."""
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise self.error(path, lineno, None, f"not valid JSON ({e.msg} at column {e.colno})") \
                from None
        if not isinstance(record, dict):
            raise self.error(path, lineno, None,
                             f"expected a JSON object, got {type(record).__name__}")
        return record


def is_blank(path):
    """True if the file holds nothing but whitespace (and perhaps a UTF-8 BOM): a split file
    that is there but empty, which the folder loaders read as no split."""
    with open(path, "rb") as f:
        return not f.read().lstrip(b"\xef\xbb\xbf").strip()


def is_int(value):
    """True for an integer, Python's or numpy's, but not a bool (JSON's ``true`` is no offset).

    ``numbers.Integral`` covers numpy's integers without importing numpy, which the document
    loaders do without.
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
