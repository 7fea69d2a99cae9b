"""What the docs tests read out of the pages' code blocks (the README's and the tutorials')."""

import os
import re
import shlex


def commands(code):
    """A bash block's commands: continuation lines joined, comments dropped, leading
    ``NAME=value`` assignments, a trailing ``&`` and redirections removed; one list of words
    each."""
    out = []
    for line in re.sub(r"\\\n\s*", " ", code).splitlines():
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"[A-Za-z_]+=\S*", words[0]):
            words.pop(0)
        if words and words[-1] == "&":
            words.pop()
        redirect = [i for i, w in enumerate(words) if re.match(r"\d*[<>]", w)]
        words = words[:redirect[0]] if redirect else words
        if words:
            out.append(words)
    return out


DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs")


def guide_block(page, marker):
    """The python code block after ``<!-- marker -->`` in the guide ``docs/<page>`` (the
    adding-a-task, adding-an-algorithm and adding-an-executor walk-throughs)."""
    text = open(os.path.join(DOCS, page), encoding="utf-8").read()
    return re.search(rf"<!-- {marker} -->\s*```python\n(.*?)```", text, re.S).group(1)
