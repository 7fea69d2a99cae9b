"""The document-level RE loaders (PubTator, DocRED JSON, EoG .data), their errors and the sample.

Fixtures under fixtures/docre/ are hand-written, invented documents in the published formats
(``cdr/`` named as BioCreative names CDR's files, ``gda/`` as EoG's gda2pubtator writes GDA;
``problems.pubtator`` holds four problems for the lenient mode); other bad inputs are written
into tmp_path by each test. The published variants' folders are under tests/fixtures/.
Expected offsets, spans and counts are written out by hand, and the strings they cut out of
the text are checked too.
"""

import importlib.util
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tffre.data import documents as docre
from tffre.data.documents import (DocREFileNotFoundError, DocREFormatError, Document, Mention,
                                  Relation)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "docre")
CDR = os.path.join(FIXTURES, "cdr")
CDR_TRAIN = os.path.join(CDR, "CDR_TrainingSet.PubTator.txt")
GDA = os.path.join(FIXTURES, "gda")
DOCRED_TRAIN = os.path.join(FIXTURES, "docred_train.json")
DOCRED_TEST = os.path.join(FIXTURES, "docred_test.json")
EOG = os.path.join(FIXTURES, "cdr.data")

_REPO = Path(__file__).resolve().parents[3]
_GENERATOR = _REPO / "data" / "docre_sample" / "generate.py"


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


# --------------------------------------------------------------------------- PubTator


@pytest.fixture(scope="module")
def cdr_train():
    return docre.load_pubtator(CDR_TRAIN)


def test_pubtator_document_text_mentions_relations(cdr_train):
    assert [d.pmid for d in cdr_train] == ["90000001", "90000002"]
    doc = cdr_train[0]
    assert doc.text == (
        "Fictazone-induced seizures and renal and hepatic failure. A 54-year-old man received "
        "fictazone (FTZ) for depression. Two days later, he developed generalized seizures. "
        "Serum levels of FTZ and its metabolites, e.g. Norfictazone, were high. He also took "
        "St. John's wort daily. The patient later fell into a coma.")
    assert doc.mentions == [
        Mention(0, 9, "Fictazone", "Chemical", ("C9000001",), 0),
        Mention(18, 26, "seizures", "Disease", ("D9000010",), 0),
        # composite id, its individual texts in the 7th column
        Mention(31, 56, "renal and hepatic failure", "Disease", ("D9000011", "D9000012"), 0),
        Mention(85, 94, "fictazone", "Chemical", ("C9000001",), 1),
        Mention(96, 99, "FTZ", "Chemical", ("C9000001",), 1),
        Mention(105, 115, "depression", "Disease", ("D9000013",), 1),
        Mention(158, 166, "seizures", "Disease", ("D9000010",), 2),
        Mention(184, 187, "FTZ", "Chemical", ("C9000001",), 3),
        Mention(196, 207, "metabolites", "Chemical", ("-1",), 3),
        Mention(214, 226, "Norfictazone", "Chemical", ("C9000002",), 3),
        Mention(252, 267, "St. John's wort", "Chemical", ("C9000003",), 4),
        Mention(305, 309, "coma", "Disease", ("D9000014",), 5),
    ]
    assert doc.relations == [Relation("CID", "C9000001", "D9000010"),
                             Relation("CID", "C9000001", "D9000011"),
                             Relation("CID", "C9000001", "D9000012"),
                             Relation("CID", "C9000002", "D9000014")]
    check_mentions(doc)
    # The composite mention belongs to both entities; -1 is no entity.
    assert doc.entities() == {"C9000001": [0, 3, 4, 7], "D9000010": [1, 6], "D9000011": [2],
                              "D9000012": [2], "D9000013": [5], "C9000002": [9],
                              "C9000003": [10], "D9000014": [11]}


def test_pubtator_sentences(cdr_train):
    doc = cdr_train[0]
    assert doc.sentences == [(0, 57), (58, 116), (117, 167), (168, 238), (239, 274), (275, 310)]
    assert sentence_texts(doc) == [
        "Fictazone-induced seizures and renal and hepatic failure.",  # the title
        "A 54-year-old man received fictazone (FTZ) for depression.",
        "Two days later, he developed generalized seizures.",
        "Serum levels of FTZ and its metabolites, e.g. Norfictazone, were high.",  # no cut: e.g.
        "He also took St. John's wort daily.",  # no cut inside the mention "St. John's wort"
        "The patient later fell into a coma.",
    ]
    # ? and ! end sentences too; the title is its own sentence whatever it ends with.
    assert sentence_texts(cdr_train[1]) == [
        "Lack of effect of placebonol on asthma: a trial?", "Yes!",
        "Placebonol did not worsen asthma.", "No wheezing was seen."]
    assert [m.sentence for m in cdr_train[1].mentions] == [0, 0, 2, 2, 3]


def test_pubtator_cross_sentence_relation(cdr_train):
    doc = cdr_train[0]
    ents = doc.entities()

    def sentences_of(eid):
        return {doc.mentions[i].sentence for i in ents[eid]}

    # Norfictazone (sentence 3) and coma (sentence 5) never share a sentence.
    assert sentences_of("C9000002") == {3} and sentences_of("D9000014") == {5}
    # Fictazone and seizures do: the title and more.
    assert sentences_of("C9000001") == {0, 1, 3} and sentences_of("D9000010") == {0, 2}


def test_pubtator_gda_relations():
    docs = docre.load_pubtator(os.path.join(GDA, "training.txt"))
    assert len(docs) == 1
    doc = docs[0]
    assert doc.relations == [Relation("GDA", "990001", "D9000020")]
    assert [(m.text, m.type, m.ids, m.sentence) for m in doc.mentions] == [
        ("GENEX1", "Gene", ("990001",), 0), ("asthma", "Disease", ("D9000020",), 0),
        ("GENEX1", "Gene", ("990001",), 1), ("GENEX2", "Gene", ("990002",), 1),
        ("asthma", "Disease", ("D9000020",), 1), ("GENEX2", "Gene", ("990002",), 2),
        ("asthma", "Disease", ("D9000020",), 2)]
    check_mentions(doc)


def test_pubtator_offset_mismatch_names_file_pmid_offsets_and_both_strings():
    with pytest.raises(DocREFormatError) as excinfo:
        docre.load_pubtator(os.path.join(FIXTURES, "bad_offsets.pubtator"))
    assert message(excinfo) == (
        "bad_offsets.pubtator line 3: pmid 90000007: mention offsets [1, 10) cover 'ictazone ' "
        "but the mention text is 'Fictazone'")


def test_pubtator_title_only_seventh_column_and_crlf(tmp_path):
    path = tmp_path / "x.pubtator"
    path.write_bytes(b"7|t|Drug X caused rash.\r\n7\t0\t6\tDrug X\tChemical\tC1\tdrug x\r\n"
                     b"7\t14\t18\trash\tDisease\tD1\r\n7\tCID\tC1\tD1\r\n")
    (doc,) = docre.load_pubtator(str(path))
    assert doc == Document("7", "Drug X caused rash.",
                           [Mention(0, 6, "Drug X", "Chemical", ("C1",), 0),
                            Mention(14, 18, "rash", "Disease", ("D1",), 0)],
                           [Relation("CID", "C1", "D1")], [(0, 19)])


@pytest.mark.parametrize("lines, expected", [
    (["1|t|A b.", "1|a|C d.", "1\t0\tA"],
     "x.pubtator line 3: cannot read '1\\t0\\tA': expected"),
    (["1|t|A b.", "1\tx\t1\tA\tChemical\tC1"],
     "x.pubtator line 2: field start: offset 'x' is not an integer"),
    (["1|t|A b.", "1\t0\t1\tA\tChemical\t"],
     "x.pubtator line 2: field id: empty entity id; use -1 for a mention without one"),
    (["1|t|A b.", "1\t0\t1\tA\tChemical\tC1|"],
     "x.pubtator line 2: field id: empty entity id in 'C1|'"),
    # bioc's own error (two ids, three texts), with our file and line
    (["1|t|A b.", "1|a|C d.", "1\t0\t1\tA\tChemical\tC1|C2\ta|b|c"],
     "x.pubtator line 3: cannot parse '1\\t0\\t1\\tA\\tChemical\\tC1|C2\\ta|b|c': Cannot parse "
     "entity. 2 concept but 3 text."),
    (["1|t|A b.", "1|a|C d.", "2|t|E f."],
     "x.pubtator line 3: a second title line (first on line 1); separate documents with a "
     "blank line"),
    (["1|t|A b.", "", "1\t0\t1\tA\tChemical\tC1"],
     "x.pubtator line 3: document without a 'PMID|t|title' line"),
    (["1|t|A b.", "2|a|C d."],
     "x.pubtator line 2: abstract pmid '2' differs from title pmid '1' on line 1"),
    (["1|t|A b.", "2\t0\t1\tA\tChemical\tC1"],
     "x.pubtator line 2: pmid 1: mention pmid '2' differs from the document's"),
    (["1|t|A b.", "1\t4\t9\tA\tChemical\tC1"],
     "x.pubtator line 2: pmid 1: mention 'A' offsets [4, 9) are outside the text (length 4) "
     "or empty"),
    (["1|t|A b.", "2\tCID\tC1\tD1"],
     "x.pubtator line 2: pmid 1: relation pmid '2' differs from the document's"),
    (["", "  "], "x.pubtator: empty file"),
])
def test_pubtator_errors_name_file_and_line(tmp_path, lines, expected):
    path = write(tmp_path / "x.pubtator", lines)
    with pytest.raises(DocREFormatError) as excinfo:
        docre.load_pubtator(path)
    assert message(excinfo).startswith(expected)


def test_missing_paths_raise_a_file_not_found_error(tmp_path):
    missing = str(tmp_path / "nope.pubtator")
    for load in (docre.load_pubtator, docre.load_docred, docre.load_eog, docre.load_documents):
        with pytest.raises(DocREFileNotFoundError) as excinfo:
            load(missing)
        assert isinstance(excinfo.value, FileNotFoundError)
        assert isinstance(excinfo.value, DocREFormatError)
        assert missing in message(excinfo)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        docre.split_files(missing)


# --------------------------------------------------------------------------- sentence splitter


def test_split_sentences_rule():
    text = "Dose was 2.5 mg. Then 3 (12%) had rash! Why? (See Smith et al. Fig. 2.) 10 died.  "
    assert [text[s:e] for s, e in docre.split_sentences(text)] == [
        "Dose was 2.5 mg.", "Then 3 (12%) had rash!", "Why?", "(See Smith et al. Fig. 2.)",
        "10 died."]
    # Lower case after the period, and no space after it, end nothing.
    assert docre.split_sentences("It fell. then rose.No change.") == [(0, 29)]
    # A cut inside a protected span is dropped; breaks force cuts.
    assert docre.split_sentences("Dr. Who arrived. Fine.") == [(0, 16), (17, 22)]
    assert docre.split_sentences("Mr. Who arrived.") == [(0, 3), (4, 16)]
    assert docre.split_sentences("Mr. Who arrived.", protected=[(0, 7)]) == [(0, 16)]
    assert docre.split_sentences("Title no stop abstract", breaks=[14]) == [(0, 13), (14, 22)]
    assert docre.split_sentences("  ") == []


# --------------------------------------------------------------------------- DocRED


def test_docred_offsets_equal_the_tokens():
    docs = docre.load_docred(DOCRED_TRAIN)
    assert [d.pmid for d in docs] == ["Skai TV", "Lark Force"]
    doc = docs[0]
    assert doc.text == "Skai TV is a Greek television channel . Smith 's company owns Skai TV ."
    assert doc.sentences == [(0, 39), (40, 71)]
    assert sentence_texts(doc) == ["Skai TV is a Greek television channel .",
                                   "Smith 's company owns Skai TV ."]
    # Entity by entity, in vertexSet order; ids are the vertexSet indices.
    assert doc.mentions == [Mention(0, 7, "Skai TV", "ORG", ("0",), 0),
                            Mention(62, 69, "Skai TV", "ORG", ("0",), 1),
                            Mention(13, 18, "Greek", "LOC", ("1",), 0),
                            Mention(40, 48, "Smith 's", "PER", ("2",), 1)]
    assert doc.relations == [Relation("P17", "0", "1"), Relation("P127", "2", "0")]
    assert list(doc.entities()) == ["0", "1", "2"]
    check_mentions(doc)
    assert docs[1].mentions == [Mention(0, 10, "Lark Force", "ORG", ("0",), 0),
                                Mention(18, 33, "Australian Army", "ORG", ("1",), 0)]


def test_docred_without_labels_has_no_relations():
    (doc,) = docre.load_docred(DOCRED_TEST)
    assert doc.pmid == "Skai Radio" and doc.relations == []
    assert [m.text for m in doc.mentions] == ["Skai Radio", "Athens"]


def test_fact_keys_for_ign_f1():
    # From Documents, a name is the mention text (the tokens joined by spaces) ...
    assert docre.fact_keys(docre.load_docred(DOCRED_TRAIN)) == {
        ("Skai TV", "Greek", "P17"), ("Smith 's", "Skai TV", "P127"),
        ("Lark Force", "Australian Army", "P361")}
    # ... from the JSON file, DocRED's own "name" field, as its evaluation uses.
    assert docre.fact_keys(DOCRED_TRAIN) == {
        ("Skai TV", "Greek", "P17"), ("Smith's", "Skai TV", "P127"),
        ("Lark Force", "Australian Army", "P361")}
    assert docre.fact_keys(docre.load_docred(DOCRED_TEST)) == set()


def _docred(tmp_path, change):
    with open(DOCRED_TRAIN, encoding="utf-8") as f:
        data = json.load(f)
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("change, expected", [
    (lambda d: d[0]["vertexSet"][0][1].update(pos=[4, 9]),
     "bad.json record 1: field vertexSet[0][1].pos: [4, 9] is not a token span [start, end) of "
     "sentence 1 (7 tokens)"),
    (lambda d: d[1]["labels"][0].update(t=5),
     "bad.json record 2: field labels[0].t: 5 is not a vertexSet index (0..1)"),
    (lambda d: d[1]["vertexSet"][1][0].update(sent_id=1),
     "bad.json record 2: field vertexSet[1][0].sent_id: 1 is not a sentence index (0..0)"),
    (lambda d: d[0].pop("sents"), "bad.json record 1: field sents: missing field"),
    (lambda d: d[0]["sents"].append([]),
     "bad.json record 1: field sents[2]: must be a non-empty list of token strings, got []"),
])
def test_docred_errors_name_record_and_field(tmp_path, change, expected):
    with pytest.raises(DocREFormatError) as excinfo:
        docre.load_docred(_docred(tmp_path, change))
    assert message(excinfo) == expected


def test_docred_invalid_json_names_the_line(tmp_path):
    path = write(tmp_path / "bad.json", ["[", '  {"title": "x",', "  oops", "]"])
    with pytest.raises(DocREFormatError) as excinfo:
        docre.load_docred(path)
    assert message(excinfo).startswith("bad.json line 3: not valid JSON")


# --------------------------------------------------------------------------- EoG


def test_eog_document():
    docs = docre.load_eog(EOG)
    assert [d.pmid for d in docs] == ["90000001", "90000009"]
    doc = docs[0]
    assert doc.text == ("Fictazone - induced seizures . He received fictazone and later had "
                        "seizures and renal and hepatic failure . Aspirin was given for pain .")
    assert doc.sentences == [(0, 30), (31, 107), (108, 136)]
    # Deduplicated (entities recur in every pair) and sorted; the composite mention, written
    # once per id by EoG, is one mention with both ids again.
    assert doc.mentions == [
        Mention(0, 9, "Fictazone", "Chemical", ("C9000001",), 0),
        Mention(20, 28, "seizures", "Disease", ("D9000010",), 0),
        Mention(43, 52, "fictazone", "Chemical", ("C9000001",), 1),
        Mention(67, 75, "seizures", "Disease", ("D9000010",), 1),
        Mention(80, 105, "renal and hepatic failure", "Disease", ("D9000011", "D9000012"), 1),
        Mention(108, 115, "Aspirin", "Chemical", ("C9000002",), 2),
        Mention(130, 134, "pain", "Disease", ("D9000013",), 2),
    ]
    # 1:CID:2 pairs only; the two 1:NR:2 pairs are no relations.
    assert doc.relations == [Relation("CID", "C9000001", "D9000010"),
                             Relation("CID", "C9000001", "D9000011"),
                             Relation("CID", "C9000001", "D9000012")]
    check_mentions(doc)
    assert docs[1] == Document("90000009", "No entities here . Nor here .", [], [],
                               [(0, 18), (19, 29)])


def _eog_line(**changes):
    with open(EOG, encoding="utf-8") as f:
        fields = f.readline().rstrip("\n").split("\t")
    for index, value in changes.items():
        fields[int(index[1:])] = value
    return "\t".join(fields)


@pytest.mark.parametrize("line, expected", [
    (_eog_line() + "\textra",
     "x.data line 1: pmid 90000001: 86 fields after the text, not a multiple of 17"),
    (_eog_line(f3="sideways"),  # the first pair's direction
     "x.data line 1: pmid 90000001 pair 1: direction 'sideways' and cross 'NON-CROSS' must be"),
    (_eog_line(f11="1:19"),  # arg1's second mention ends past its sentence (tokens 5-18)
     "x.data line 1: pmid 90000001 pair 1 arg1: tokens 7-19 are not inside sentence 1 "
     "(tokens 5-18)"),
    (_eog_line(f10="0:x"),
     "x.data line 1: pmid 90000001 pair 1 arg1 starts: '0:x' is not a ':'-separated list of "
     "integers"),
    (_eog_line(f12="0"),
     "x.data line 1: pmid 90000001 pair 1 arg1: 2 starts, 2 ends and 1 sentence ids"),
    ("90000001", "x.data line 1: expected 'PMID<TAB>sentences' and 17 fields per pair"),
])
def test_eog_errors_name_line_and_pair(tmp_path, line, expected):
    path = write(tmp_path / "x.data", [line])
    with pytest.raises(DocREFormatError) as excinfo:
        docre.load_eog(path)
    assert message(excinfo).startswith(expected)


# --------------------------------------------------------------------------- dispatcher


def test_guess_format_by_extension_then_content(tmp_path):
    assert docre.guess_format(CDR_TRAIN) == "pubtator"
    assert docre.guess_format(DOCRED_TRAIN) == "docred"
    assert docre.guess_format(EOG) == "eog"
    for source, fmt in ((CDR_TRAIN, "pubtator"), (DOCRED_TRAIN, "docred"), (EOG, "eog")):
        copy = tmp_path / f"{fmt}.unknown"
        shutil.copy(source, copy)
        assert docre.guess_format(str(copy)) == fmt
        assert docre.load_documents(str(copy)) == docre.load_documents(source)
    odd = write(tmp_path / "odd.unknown", ["hello"])
    with pytest.raises(DocREFormatError, match="cannot tell the format"):
        docre.load_documents(odd)
    with pytest.raises(ValueError, match="unknown format 'bioc'"):
        docre.load_documents(CDR_TRAIN, format="bioc")
    # A given format wins over the extension.
    with pytest.raises(DocREFormatError):
        docre.load_documents(CDR_TRAIN, format="docred")


def test_load_documents_folder_of_cdr_splits():
    splits = docre.load_documents(CDR)
    # CDR_TrainingSet/DevelopmentSet/TestSet.PubTator.txt; the .xml and readme.txt are skipped.
    assert list(splits) == ["train", "dev", "test"]
    assert {s: [d.pmid for d in docs] for s, docs in splits.items()} == {
        "train": ["90000001", "90000002"], "dev": ["90000003"], "test": ["90000004"]}
    assert splits["train"] == docre.load_pubtator(CDR_TRAIN)
    assert splits["test"][0].relations == [Relation("CID", "C9000006", "D9000040")]


def test_load_documents_folder_of_gda_and_docred_splits():
    gda = docre.load_documents(GDA)  # training.txt / testing.txt
    assert {s: [d.pmid for d in docs] for s, docs in gda.items()} == {
        "train": ["90000005"], "test": ["90000006"]}
    # The fixtures folder itself: docred_train.json and docred_test.json; cdr.data and
    # bad_offsets.pubtator name no split, cdr/ and gda/ are folders.
    mixed = docre.load_documents(FIXTURES)
    assert {s: [d.pmid for d in docs] for s, docs in mixed.items()} == {
        "train": ["Skai TV", "Lark Force"], "test": ["Skai Radio"]}


def test_split_file_names(tmp_path):
    for name in ("train.data", "dev.data", "test.data", "train+dev.data", "latest.txt"):
        shutil.copy(EOG, tmp_path / name)
    # train+dev.data (EoG's GDA) names two splits and "latest" no split: both skipped.
    assert docre.split_files(str(tmp_path)) == {
        split: str(tmp_path / f"{split}.data") for split in ("train", "dev", "test")}
    # Two train files that are not EoG's two variants of one split.
    shutil.copy(EOG, tmp_path / "training.data")
    with pytest.raises(DocREFormatError, match="two train files, train.data and "
                                               "training.data"):
        docre.load_documents(str(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DocREFileNotFoundError, match="no train, dev or test file"):
        docre.load_documents(str(empty))


# --------------------------------------------------------------------------- embedded sample


@pytest.fixture(scope="module")
def sample():
    return docre.load_sample()


def test_regenerating_the_sample_gives_byte_identical_files(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("docre_sample_generate", _GENERATOR)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    generator.main(["--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert ("train: 300 documents, 2103 sentences (titles included), 3647 mentions, 1851 "
            "entities, 2848 chemical-disease pairs, 914 CID (32%), 287 cross-sentence CID, 117 "
            "composite and 29 -1 mentions") in out
    shipped = Path(docre.sample_path())
    names = ["dev.pubtator", "test.pubtator", "train.pubtator"]
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    for name in names:
        assert (shipped / name).read_bytes() == (tmp_path / name).read_bytes(), name
    assert sum((shipped / name).stat().st_size for name in names) < 1_500_000
    assert "SYNTHETIC" in (_GENERATOR.parent / "README.md").read_text(encoding="utf-8")


def test_sample_loads_with_cross_sentence_composite_and_unnormalised(sample):
    assert {s: len(docs) for s, docs in sample.items()} == {"train": 300, "dev": 60, "test": 100}
    counts = {}
    for split, docs in sample.items():
        cross = composite = unnormalised = 0
        for doc in docs:
            check_mentions(doc)
            assert 4 <= len(doc.sentences) <= 9  # the title and 3-8 sentences
            ents = doc.entities()
            where = {e: {doc.mentions[i].sentence for i in idx} for e, idx in ents.items()}
            cross += sum(not where[r.id1] & where[r.id2] for r in doc.relations)
            composite += sum(len(m.ids) == 2 for m in doc.mentions)
            unnormalised += sum(m.ids == ("-1",) for m in doc.mentions)
            assert {m.type for m in doc.mentions} <= {"Chemical", "Disease"}
            assert {r.type for r in doc.relations} <= {"CID"}
        counts[split] = (cross, composite, unnormalised)
    # As the generator printed them (its own sentence indices): the splitter agrees.
    assert counts == {"train": (287, 117, 29), "dev": (50, 18, 10), "test": (97, 27, 10)}
    first = sample["train"][0]
    assert first.pmid == "91000001"
    assert sentence_texts(first)[:3] == [
        "Pentrabucil in the treatment of nephrotoxicity.",
        "Glicapraxin reduced the incidence of hyperkalemia and nephrotoxicity (P < 0.03).",
        "11 patients received pentrabucil for 5 weeks."]


def test_sample_relation_is_not_co_occurrence(sample):
    # Predicting CID for every chemical-disease pair that shares a sentence: measured F1 0.56
    # on the test split. Many CIDs are cross-sentence; many co-mentioned pairs are negative.
    tp = fp = fn = 0
    for doc in sample["test"]:
        ents, types = doc.entities(), doc.entity_types()
        gold = {(r.id1, r.id2) for r in doc.relations}
        where = {e: {doc.mentions[i].sentence for i in idx} for e, idx in ents.items()}
        for c in (e for e in ents if types[e] == "Chemical"):
            for d in (e for e in ents if types[e] == "Disease"):
                predicted, actual = bool(where[c] & where[d]), (c, d) in gold
                tp += predicted and actual
                fp += predicted and not actual
                fn += actual and not predicted
    f1 = 2 * tp / (2 * tp + fp + fn)
    assert 0.45 < f1 < 0.7


# --------------------------------------------------------------------------- published variants

EOG_FOLDER = str(_REPO / "tests" / "fixtures" / "eog_cdr")
EOG_TEXT = "Drug A caused hepatitis and liver disease ."
EOG_MENTIONS = [Mention(0, 6, "Drug A", "Chemical", ("C1",), 0),
                Mention(14, 23, "hepatitis", "Disease", ("D1",), 0),
                Mention(28, 41, "liver disease", "Disease", ("D2",), 0)]


def test_eog_folder_reads_the_filter_variant_by_default():
    assert docre.EOG_VARIANT == "filter"
    notes = []
    splits = docre.load_documents(EOG_FOLDER, notes=notes)
    assert {s: [d.pmid for d in docs] for s, docs in splits.items()} == {
        "train": ["1001"], "dev": ["1002"], "test": ["1003"]}
    # The hypernym negative (liver disease, a hypernym of hepatitis) is excluded, not negative.
    assert splits["train"][0] == Document("1001", EOG_TEXT, EOG_MENTIONS,
                                          [Relation("CID", "C1", "D1")], [(0, 43)],
                                          [("C1", "D2")])
    check_mentions(splits["train"][0])
    assert len(notes) == 1 and notes[0].startswith(
        "EoG files: the 'filter' variant, train_filter.data, dev_filter.data, "
        "test_filter.data (variant 'plain' reads the others;")
    notes = []
    plain = docre.load_documents(EOG_FOLDER, eog_variant="plain", notes=notes)
    assert plain["test"][0] == Document("1003", EOG_TEXT, EOG_MENTIONS,
                                        [Relation("CID", "C1", "D1")], [(0, 43)], [])
    assert notes[0].startswith("EoG files: the 'plain' variant, train.data, dev.data, test.data")
    with pytest.raises(ValueError, match="unknown EoG variant 'filtered'"):
        docre.load_documents(EOG_FOLDER, eog_variant="filtered")


def test_eog_folder_with_one_variant_notes_it(tmp_path):
    for name in ("train.data", "test_filter.data"):
        shutil.copy(os.path.join(EOG_FOLDER, name), tmp_path / name)
    notes = []
    splits = docre.load_documents(str(tmp_path), notes=notes)
    assert [d.excluded_pairs for d in splits["train"] + splits["test"]] == [[], [("C1", "D2")]]
    assert notes == ["train.data: the only train file, read although the EoG variant asked "
                     "for is 'filter'"]


def test_empty_split_file_counts_as_absent(tmp_path):
    shutil.copy(CDR_TRAIN, tmp_path / "CDR_TrainingSet.PubTator.txt")
    (tmp_path / "CDR_DevelopmentSet.PubTator.txt").write_text("\n \n", encoding="utf-8")
    shutil.copy(os.path.join(CDR, "CDR_TestSet.PubTator.txt"), tmp_path / "test.pubtator")
    notes = []
    assert list(docre.load_documents(str(tmp_path), notes=notes)) == ["train", "test"]
    assert notes == ["CDR_DevelopmentSet.PubTator.txt: empty file, read as no dev split"]


def test_document_splits_hold_out_a_seeded_dev_slice(tmp_path, sample):
    shutil.copy(os.path.join(docre.sample_path(), "train.pubtator"), tmp_path / "train.pubtator")
    shutil.copy(os.path.join(docre.sample_path(), "test.pubtator"), tmp_path / "test.pubtator")
    notes = []
    splits = docre.load_document_splits(str(tmp_path), seed=2, notes=notes)
    dev = set(np.random.RandomState([2, 13]).permutation(300)[:60].tolist())
    assert [d.pmid for d in splits["dev"]] == [d.pmid for i, d in enumerate(sample["train"])
                                               if i in dev]
    assert [d.pmid for d in splits["train"]] == [d.pmid for i, d in enumerate(sample["train"])
                                                 if i not in dev]
    assert splits["test"] == sample["test"]
    assert notes == ["no dev split: held out 60 of 300 training documents (20%, seeded) as dev"]
    # The sample's own dev split is used as it is.
    assert docre.load_document_splits(docre.sample_path(), seed=2) == sample


def test_document_splits_dev_as_test_and_a_missing_test(tmp_path):
    shutil.copy(DOCRED_TRAIN, tmp_path / "train.json")
    shutil.copy(DOCRED_TEST, tmp_path / "dev.json")
    notes = []
    splits = docre.load_document_splits(str(tmp_path), seed=0, dev_as_test=True,
                                        dev_fraction=None, notes=notes)
    assert [d.pmid for d in splits["test"]] == ["Skai Radio"] and list(splits) == ["train",
                                                                                    "test"]
    assert notes == ["the dev split is scored as the test set (its test labels are not public; "
                     "FedLCC Table 7)"]
    with pytest.raises(ValueError, match="no dev split, which is scored as the test set"):
        docre.load_document_splits(FIXTURES, seed=0, dev_as_test=True)
    with pytest.raises(ValueError, match=r"no test split \(a file whose name holds 'test'\)"):
        docre.load_document_splits(os.path.join(GDA, "training.txt"), seed=0)


# --------------------------------------------------------------------------- lenient loading

PROBLEMS = os.path.join(FIXTURES, "problems.pubtator")
PROBLEMS_FOUND = [
    "problems.pubtator line 3: pmid 1: mention offsets [12, 16) cover 'rash' but the mention "
    "text is 'rasx'",
    "problems.pubtator line 4: field id: empty entity id in 'D1|'",
    "problems.pubtator line 7: document without a 'PMID|t|title' line",
    "problems.pubtator line 10: field end: offset 'x' is not an integer",
]


def test_lenient_pubtator_collects_every_problem(capsys):
    path = PROBLEMS
    with pytest.raises(DocREFormatError) as excinfo:
        docre.load_pubtator(path)
    assert message(excinfo) == PROBLEMS_FOUND[0]
    problems = []
    docs = docre.load_pubtator(path, problems=problems)
    assert problems == PROBLEMS_FOUND
    # What is left of documents 1 and 3; document 2 (no title) is dropped.
    assert docs == [
        Document("1", "Aspirin and rash.", [Mention(0, 7, "Aspirin", "Chemical", ("C1",), 0)],
                 [Relation("CID", "C1", "D1")], [(0, 17)]),
        Document("3", "Drug X and fever.", [Mention(11, 16, "fever", "Disease", ("D3",), 0)],
                 [], [(0, 17)])]
    assert capsys.readouterr().out == ""  # bioc's own printing is kept off stdout


def test_lenient_eog_and_docred(tmp_path):
    with open(EOG, encoding="utf-8") as f:
        good = f.readline().rstrip("\n")
    problems = []
    docs = docre.load_eog(write(tmp_path / "x.data", ["1\tA .\textra", good]), problems)
    assert [d.pmid for d in docs] == ["90000001"]
    assert problems == ["x.data line 1: pmid 1: 1 fields after the text, not a multiple of 17 "
                        "(one group per pair)"]
    problems = []
    docs = docre.load_docred(_docred(tmp_path, lambda d: d[1]["labels"][0].update(t=5)),
                             problems)
    assert [d.pmid for d in docs] == ["Skai TV"]
    assert problems == ["bad.json record 2: field labels[0].t: 5 is not a vertexSet index (0..1)"]


def test_a_git_lfs_pointer_is_named_as_such(tmp_path):
    # Public copies hold some corpus files as Git LFS pointers (e.g. a 132-byte
    # CDR_Training+TestSet.PubTator.txt): say so rather than "no title line".
    path = write(tmp_path / "CDR_TrainingSet.PubTator.txt", [
        "version https://git-lfs.github.com/spec/v1",
        "oid sha256:279b20fc787927646b93e80782d7bc835129e57354db4d80100d3f303a13cf43",
        "size 3426674"])
    with pytest.raises(DocREFormatError) as excinfo:
        docre.load_pubtator(path)
    assert message(excinfo) == ("CDR_TrainingSet.PubTator.txt line 1: a Git LFS pointer, not "
                                "the data: fetch the file itself (git lfs pull)")
