"""Error types and message helpers the data loaders share."""


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
