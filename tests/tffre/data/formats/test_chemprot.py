"""ChemProt in BLUE's TSV and SciBERT's JSON lines (tffre.data.formats.chemprot, .blue).

Fixtures are invented files in the layouts of the public copies (fixtures/re/chemprot;
tests/fixtures/chemprot_ids and scibert_chemprot, tests/fixtures/README.md); bad inputs are
written into tmp_path by each test. Offsets in the expected rows are hand-computed.
"""

import json
import os

import pytest
from sentence_rows import (CHEMPROT, CHEMPROT_IDS, SCIBERT, assert_rows, placeholders,
                           write)

from tffre.data.formats.blue import CHEMPROT_LABELS, load_blue_tsv
from tffre.data.formats.chemprot import load_scibert_chemprot
from tffre.data.sentence_schema import REFormatError
from tffre.data.sentence_sets import load_re


def test_chemprot_rows_and_chem_gene():
    examples, labels = load_blue_tsv(CHEMPROT, "chemprot")
    assert_rows(examples, [
        ("train:10047461.T1.T2", "@CHEMICAL$ inhibits @GENE$ activity .", 0, 10, 20, 26,
         "CHEMICAL", "GENE", "CPR:4"),
        # A lone @CHEM-GENE$ is both entities: identical spans.
        ("train:10047461.T3.T4", "The @CHEM-GENE$ level was unchanged .", 4, 15, 4, 15,
         "CHEM-GENE", "CHEM-GENE", "false"),
        ("train:10064839.T5.T1", "Treatment with @CHEMICAL$ and anti-@GENE$ therapies .", 15, 25,
         35, 41, "CHEMICAL", "GENE", "CPR:9"),
    ], [("@CHEMICAL$", "@GENE$"), ("@CHEM-GENE$", "@CHEM-GENE$"), ("@CHEMICAL$", "@GENE$")])
    assert labels == ["false", "CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9"]


CHEMPROT_ID_ROWS = [
    ("train:10064839.T49.T56", "Binding of @CHEMICAL$ to @GENE$ sites .", 11, 21, 25, 31,
     "CHEMICAL", "GENE", "false"),
    ("train:10064839.T7.T56", "@CHEMICAL$ is an agonist of @GENE$ .", 0, 10, 28, 34,
     "CHEMICAL", "GENE", "CPR:5"),
    ("train:23017395.T1.T2", "The @CHEM-GENE$ level fell .", 4, 15, 4, 15, "CHEM-GENE",
     "CHEM-GENE", "false"),
]


def test_chemprot_with_an_id_column_and_no_header():
    examples, labels = load_blue_tsv(os.path.join(CHEMPROT_IDS, "train.tsv"), "chemprot")
    assert_rows(examples, CHEMPROT_ID_ROWS, placeholders(CHEMPROT_ID_ROWS))
    assert labels == list(CHEMPROT_LABELS)
    examples, _ = load_re("chemprot", CHEMPROT_IDS)
    assert list(examples.example_id) == [r[0] for r in CHEMPROT_ID_ROWS] + [
        "test:10082498.T3.T9"]
    assert (examples.e2_start[3], examples.e2_end[3]) == (23, 33)  # "@GENE$ is inhibited by "


@pytest.mark.parametrize("lines, match", [
    (["a\t@CHEMICAL$ x @GENE$\tfalse", "a\t@CHEMICAL$ y @GENE$\tfalse"],
     "train.tsv line 2: field id: duplicate id 'a' \\(also line 1\\)"),
    (["a\t@CHEMICAL$ x @GENE$\tfalse", "@CHEMICAL$ y @GENE$\tfalse"],
     r"train.tsv line 2: columns: expected 3 tab-separated columns \(id, sentence, label\)"),
    (["\t@CHEMICAL$ x @GENE$\tfalse"], "train.tsv line 1: field id: empty id"),
])
def test_id_column_errors(tmp_path, lines, match):
    with pytest.raises(REFormatError, match=match):
        load_blue_tsv(write(tmp_path / "train.tsv", lines), "chemprot")


SCIBERT_ROWS = [
    ("train:1", "Aspirin inhibits COX-1 activity .", 0, 7, 17, 22, "INHIBITOR"),
    # [[ ]] first in the text: e1 is still the << >> entity.
    ("train:2", "The beta(1)-adrenoceptor antagonist CGP-20712A was used .", 36, 46, 4, 24,
     "ANTAGONIST"),
    ("train:3", "L-DOPA is both substrate and product of DDC .", 0, 6, 40, 43,
     "SUBSTRATE_PRODUCT-OF"),
    # "[[(" and "]]-" without the marker's space are text.
    ("dev:1", "IB-MECA ( 1-[[(3-iodo)methyl]]-x ) activates A3 receptor .", 0, 7, 45, 56,
     "UPREGULATOR"),
    # A " >> " after the closing marker is text.
    ("test:1", "Panx1 currents : carbenoxolone > probenecid >> flufenamic acid .", 0, 5, 33, 43,
     "INHIBITOR"),
    ("test:2", "Ro 31-8220 , an PKC agonist-inhibitor .", 0, 10, 16, 19, "AGONIST-INHIBITOR"),
    ("test:3", "CYP3A4 metabolises midazolam .", 19, 28, 0, 6, "SUBSTRATE"),
]


SCIBERT_ENTITIES = [("Aspirin", "COX-1"), ("CGP-20712A", "beta(1)-adrenoceptor"),
                    ("L-DOPA", "DDC"), ("IB-MECA", "A3 receptor"), ("Panx1", "probenecid"),
                    ("Ro 31-8220", "PKC"), ("midazolam", "CYP3A4")]


# ChemProt's guidelines: the group of each relation type.
SCIBERT_GROUPS = ["CPR:4", "CPR:6", "CPR:9", "CPR:3", "CPR:4", "CPR:5", "CPR:9"]


def scibert_rows(labels):
    return [(*row[:6], "ENTITY", "ENTITY", label) for row, label in zip(SCIBERT_ROWS, labels)]


def test_scibert_chemprot_markers_become_offsets_and_labels_their_group():
    examples, labels = load_re("chemprot", SCIBERT)
    assert_rows(examples, scibert_rows(SCIBERT_GROUPS), SCIBERT_ENTITIES,
                split=["train"] * 3 + ["dev"] + ["test"] * 3)
    assert labels == ["false", "CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9"]
    examples, labels = load_re("chemprot", SCIBERT, raw_labels=True)
    assert list(examples.label) == [row[-1] for row in SCIBERT_ROWS]
    assert labels[0] == "false" and len(labels) == 14
    assert set(labels[1:]) == {"UPREGULATOR", "ACTIVATOR", "INDIRECT-UPREGULATOR",
                               "DOWNREGULATOR", "INHIBITOR", "INDIRECT-DOWNREGULATOR",
                               "AGONIST", "AGONIST-ACTIVATOR", "AGONIST-INHIBITOR",
                               "ANTAGONIST", "SUBSTRATE", "PRODUCT-OF", "SUBSTRATE_PRODUCT-OF"}
    # One file, by its content.
    examples, _ = load_re("chemprot", os.path.join(SCIBERT, "dev.txt"))
    assert list(examples.label) == ["CPR:3"]
    with pytest.raises(REFormatError, match="raw_labels: BLUE's ChemProt TSV holds only"):
        load_re("chemprot", CHEMPROT_IDS, raw_labels=True)


@pytest.mark.parametrize("record, match", [
    ({"text": "no markers here", "label": "INHIBITOR"},
     "field text: expected one '<<' marker \\(e1\\), found 0"),
    ({"text": "<< A >> << B >> [[ C ]]", "label": "INHIBITOR"},
     "field text: expected one '<<' marker \\(e1\\), found 2"),
    ({"text": "<< A >> and [[ B", "label": "INHIBITOR"},
     "field text: no ']]' after the '\\[\\[' marker \\(e2\\)"),
    ({"text": "<< A [[ B >> C ]]", "label": "INHIBITOR"},
     "field text: the << >> and \\[\\[ \\]\\] markers overlap"),
    ({"text": "<<  >> [[ B ]]", "label": "INHIBITOR"}, "field text: empty entity e1"),
    ({"text": "<< A >> [[ B ]]", "label": "NOT"},
     "field label: unknown label 'NOT'; valid: false, UPREGULATOR, ACTIVATOR"),
    ({"text": 5, "label": "INHIBITOR"}, "field text: must be a string, got 5"),
    ({"label": "INHIBITOR"}, "field text: missing field"),
    ("not json", "not valid JSON"),
])
def test_scibert_errors(tmp_path, record, match):
    line = record if isinstance(record, str) else json.dumps(record)
    good = json.dumps({"text": "<< A >> [[ B ]]", "label": "INHIBITOR"})
    with pytest.raises(REFormatError, match="^train.txt line 2: " + match):
        load_scibert_chemprot(write(tmp_path / "train.txt", [good, line]))
