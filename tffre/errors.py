"""Error types, message helpers and input checks the loaders, encoders and commands share."""

import argparse
import numbers

SHOW = 60  # longest user string quoted in full in an error message
GIT_LFS_POINTER = "version https://git-lfs.github.com/spec/"


class OneLineParser(argparse.ArgumentParser):
    """An argument parser that reports bad arguments in one line, without the usage block:
    every command of ``python -m tffre`` parses with it."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


class ConfigError(ValueError):
    """An invalid option value, or one the saved run refuses (``--resume``); the message
    names the option (and the config file). Here, below the CLI, so that the runner can
    raise it too."""


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
    error naming the file and the 1-based line they are on; so does a Git LFS
    pointer file (line 1), which some public copies hold in place of a corpus file.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(data[:e.start].count(b"\n") + 1, f"not UTF-8 text ({e.reason})") from None
    if text.startswith(GIT_LFS_POINTER):
        # Public copies of corpora often hold a large file as a pointer to Git LFS storage.
        raise error(1, "a Git LFS pointer, not the data: fetch the file itself (git lfs pull)")
    return text


def text_lines(text):
    """The lines of ``text`` without their line ends (\\n or \\r\\n)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline does not start a line
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def positive_int(value, name):
    """``value`` as an int if it is a whole number >= 1 (not a bool), else ValueError naming ``name``."""
    # numbers.Integral covers numpy's integers without importing numpy (the loaders don't).
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


class collect:  # noqa: N801  (a context manager used like contextlib.suppress)
    """One record's errors, strict or lenient: ``with collect(problems, MyError): ...``.

    Every loader reads each record (a line, a document, a mention) inside one of these.
    With ``problems=None``, the loaders' default (strict), an error raised in the block
    propagates as usual. With a list, the error's one-line message is appended to it and
    execution goes on after the block, so the record is skipped and the load continues:
    one pass finds every problem (the check behind ``python -m tffre data check``). Errors
    of other types always propagate.
    """

    __slots__ = ("problems", "errors")

    def __init__(self, problems, errors=ValueError):
        self.problems, self.errors = problems, errors

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if error is None or self.problems is None or not isinstance(error, self.errors):
            return False
        self.problems.append(one_line(str(error)))
        return True
