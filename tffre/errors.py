"""Error types, message helpers and input checks the loaders and encoders share."""

import numpy as np

SHOW = 60  # longest user string quoted in full in an error message


class MessageFileNotFoundError(FileNotFoundError):
    """A ``FileNotFoundError`` whose one-line message is the whole error.

    ``OSError`` would parse two arguments as (errno, strerror) and print them
    otherwise; loaders raise it (with their own ``ValueError`` subclass beside
    it) so a missing path can be caught either way.
    """

    def __init__(self, message):
        Exception.__init__(self, message)

    def __str__(self):
        return str(self.args[0])


def one_line(message):
    """``message`` with its line breaks turned into spaces: loader errors are one line."""
    # User strings are shown as reprs, which escape newlines; this guards the rest.
    return message.replace("\r", " ").replace("\n", " ")


def show(value):
    """A short, one-line repr of user data for an error message."""
    if isinstance(value, str) and len(value) > SHOW:
        value = value[:SHOW - 3] + "..."
    return repr(value)


def read_utf8(path, error):
    """The text of the UTF-8 file ``path``, its BOM dropped.

    Bytes that are not UTF-8 raise ``error(line, message)``, the loader's own
    error naming the file and the 1-based line they are on.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(data[:e.start].count(b"\n") + 1, f"not UTF-8 text ({e.reason})") from None


def text_lines(text):
    """The lines of ``text`` without their line ends (\\n or \\r\\n)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline does not start a line
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def positive_int(value, name):
    """``value`` as an int if it is a whole number >= 1 (not a bool), else ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
