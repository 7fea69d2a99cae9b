"""What the document-level loader tests share: fixture paths and document checks.

Fixtures under data/fixtures/docre/ are hand-written, invented documents in the published
formats (``cdr/`` named as BioCreative names CDR's files, ``gda/`` as EoG's gda2pubtator writes
GDA; ``problems.pubtator`` holds four problems for the lenient mode); the published variants'
folders are under tests/fixtures/.
"""

import os
from pathlib import Path

FIXTURES = os.path.join(os.path.dirname(__file__), "data", "fixtures", "docre")
CDR = os.path.join(FIXTURES, "cdr")
CDR_TRAIN = os.path.join(CDR, "CDR_TrainingSet.PubTator.txt")
GDA = os.path.join(FIXTURES, "gda")
DOCRED_TRAIN = os.path.join(FIXTURES, "docred_train.json")
DOCRED_TEST = os.path.join(FIXTURES, "docred_test.json")
EOG = os.path.join(FIXTURES, "cdr.data")
REPO = Path(__file__).resolve().parents[2]


def write(path, lines):
    """Writes lines (each ended by a newline) and returns the path as str."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("".join(line + "\n" for line in lines))
    return str(path)


def message(excinfo):
    text = str(excinfo.value)
    assert "\n" not in text
    return text


def sentence_texts(doc):
    return [doc.text[s:e] for s, e in doc.sentences]


def check_mentions(doc):
    """Every mention's text is at its offsets, inside its sentence."""
    for m in doc.mentions:
        assert doc.text[m.start:m.end] == m.text
        s, e = doc.sentences[m.sentence]
        assert s <= m.start < m.end <= e
