"""What the sentence-level loader tests share: fixture paths, expected rows and row checks.

Fixtures under data/fixtures/re/ are hand-written in the published formats; the published
variants' folders are under tests/fixtures/ (tests/fixtures/README.md). Offsets in the
expected rows are hand-computed.
"""

import os

import numpy as np
import pandas as pd

from tffre.data.sentence_schema import COLUMNS, OFFSET_COLUMNS

_HERE = os.path.dirname(__file__)
FIXTURES = os.path.join(_HERE, "data", "fixtures", "re")
I2B2 = os.path.join(FIXTURES, "i2b2")
GAD = os.path.join(FIXTURES, "gad")
CHEMPROT = os.path.join(FIXTURES, "chemprot", "train.tsv")
PGR = os.path.join(FIXTURES, "pgr")
JSONL = os.path.join(FIXTURES, "generic.jsonl")
PUBLISHED = os.path.join(_HERE, os.pardir, "fixtures")
GAD_FOLD = os.path.join(PUBLISHED, "gad_fold")
CHEMPROT_IDS = os.path.join(PUBLISHED, "chemprot_ids")
SCIBERT = os.path.join(PUBLISHED, "scibert_chemprot")


def frame(rows, split=None):
    """The expected DataFrame: rows are (example_id, text, s1, e1, s2, e2, t1, t2, label)."""
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for c in OFFSET_COLUMNS:
        df[c] = df[c].astype(np.int64)
    if split is not None:
        df["split"] = split
    return df


def assert_rows(actual, expected_rows, entities, split=None):
    """Exact rows, and the entity strings the offsets cut out of the text."""
    pd.testing.assert_frame_equal(actual, frame(expected_rows, split))
    got = [(t[s1:e1], t[s2:e2]) for t, s1, e1, s2, e2 in
           zip(actual.text, actual.e1_start, actual.e1_end, actual.e2_start, actual.e2_end)]
    assert got == entities


def placeholders(rows):
    return [(t[s1:e1], t[s2:e2]) for _, t, s1, e1, s2, e2, *_ in rows]


def write(path, text):
    """Writes ``text`` (a str, or lines joined with newlines) and returns the path as str."""
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    if not isinstance(text, str):
        text = "".join(line + "\n" for line in text)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return str(path)


def one_line(excinfo):
    message = str(excinfo.value)
    assert "\n" not in message
    return message


# The rows of fixtures/re/i2b2, which load_re reads too.
I2B2_ROWS = [
    ("record-1:1:0", "He was given aspirin for chest pain .", 13, 20, 25, 35,
     "treatment", "problem", "TrAP"),
    ("record-1:2:0", "A chest X-ray showed pneumonia and effusion .", 0, 13, 21, 30,
     "test", "problem", "TeRP"),
    ("record-1:2:1", "A chest X-ray showed pneumonia and effusion .", 0, 13, 35, 43,
     "test", "problem", "None"),
    ("record-1:2:2", "A chest X-ray showed pneumonia and effusion .", 21, 30, 35, 43,
     "problem", "problem", "None"),
    # .rel names diabetes first: the problem-problem pair takes the .rel order.
    ("record-1:4:0", "Neuropathy secondary to diabetes , treated with insulin .", 24, 32, 0, 10,
     "problem", "problem", "PIP"),
    ("record-1:4:1", "Neuropathy secondary to diabetes , treated with insulin .", 48, 55, 0, 10,
     "treatment", "problem", "None"),
    ("record-1:4:2", "Neuropathy secondary to diabetes , treated with insulin .", 48, 55, 24, 32,
     "treatment", "problem", "TrAP"),
    # record-2 has no .rel file; its test-treatment pair is not a candidate.
    ("record-2:1:0", "CT scan of the head was ordered for headache after morphine .", 0, 19, 36, 44,
     "test", "problem", "None"),
    ("record-2:1:1", "CT scan of the head was ordered for headache after morphine .", 51, 59,
     36, 44, "treatment", "problem", "None"),
    ("record-3:1:0", "Anemia from blood loss .", 0, 6, 12, 22, "problem", "problem", "PIP"),
]
I2B2_ENTITIES = [("aspirin", "chest pain"), ("A chest X-ray", "pneumonia"),
                 ("A chest X-ray", "effusion"), ("pneumonia", "effusion"),
                 ("diabetes", "Neuropathy"), ("insulin", "Neuropathy"), ("insulin", "diabetes"),
                 ("CT scan of the head", "headache"), ("morphine", "headache"),
                 ("Anemia", "blood loss")]

# The rows of fixtures/re/gad.
GAD_ROWS = [
    ("train:1", "@GENE$ polymorphism is associated with @DISEASE$ risk .", 0, 6, 39, 48,
     "GENE", "DISEASE", "1"),
    ("train:2", "No association between @DISEASE$ and @GENE$ was found .", 23, 32, 37, 43,
     "DISEASE", "GENE", "0"),
]
GAD_TEST_ROWS = [
    ("test:0", "The @GENE$ variant and @DISEASE$ .", 4, 10, 23, 32, "GENE", "DISEASE", "1"),
    ("test:1", "Expression of @GENE$ in @DISEASE$ tissue .", 14, 20, 24, 33,
     "GENE", "DISEASE", "0"),
]

# One JSON-lines record and its row.
RECORD = {"text": "Aspirin relieves headache .", "e1_start": 0, "e1_end": 7, "e2_start": 17,
          "e2_end": 25, "e1_type": "drug", "e2_type": "problem", "label": "treats"}
RECORD_ROW = ("a", *RECORD.values())
