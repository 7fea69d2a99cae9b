"""The PubTator loader (tffre.data.formats.pubtator): documents, sentences, errors, leniency.

Fixtures under fixtures/docre/ are hand-written, invented documents in the published format
(``cdr/`` named as BioCreative names CDR's files, ``gda/`` as EoG's gda2pubtator writes GDA;
``problems.pubtator`` holds four problems for the lenient mode); other bad inputs are written
into tmp_path by each test. Expected offsets, spans and counts are written out by hand, and the
strings they cut out of the text are checked too.
"""

import os

import pytest
from document_checks import (CDR_TRAIN, FIXTURES, GDA, check_mentions, message, sentence_texts,
                             write)

from tffre.data.document_schema import DocREFormatError, Document, Mention, Relation
from tffre.data.formats.pubtator import load_pubtator, split_sentences


@pytest.fixture(scope="module")
def cdr_train():
    return load_pubtator(CDR_TRAIN)


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
    docs = load_pubtator(os.path.join(GDA, "training.txt"))
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
        load_pubtator(os.path.join(FIXTURES, "bad_offsets.pubtator"))
    assert message(excinfo) == (
        "bad_offsets.pubtator line 3: pmid 90000007: mention offsets [1, 10) cover 'ictazone ' "
        "but the mention text is 'Fictazone'")


def test_pubtator_title_only_seventh_column_and_crlf(tmp_path):
    path = tmp_path / "x.pubtator"
    path.write_bytes(b"7|t|Drug X caused rash.\r\n7\t0\t6\tDrug X\tChemical\tC1\tdrug x\r\n"
                     b"7\t14\t18\trash\tDisease\tD1\r\n7\tCID\tC1\tD1\r\n")
    (doc,) = load_pubtator(str(path))
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
        load_pubtator(path)
    assert message(excinfo).startswith(expected)


def test_split_sentences_rule():
    text = "Dose was 2.5 mg. Then 3 (12%) had rash! Why? (See Smith et al. Fig. 2.) 10 died.  "
    assert [text[s:e] for s, e in split_sentences(text)] == [
        "Dose was 2.5 mg.", "Then 3 (12%) had rash!", "Why?", "(See Smith et al. Fig. 2.)",
        "10 died."]
    # Lower case after the period, and no space after it, end nothing.
    assert split_sentences("It fell. then rose.No change.") == [(0, 29)]
    # A cut inside a protected span is dropped; breaks force cuts.
    assert split_sentences("Dr. Who arrived. Fine.") == [(0, 16), (17, 22)]
    assert split_sentences("Mr. Who arrived.") == [(0, 3), (4, 16)]
    assert split_sentences("Mr. Who arrived.", protected=[(0, 7)]) == [(0, 16)]
    assert split_sentences("Title no stop abstract", breaks=[14]) == [(0, 13), (14, 22)]
    assert split_sentences("  ") == []


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
        load_pubtator(path)
    assert message(excinfo) == PROBLEMS_FOUND[0]
    problems = []
    docs = load_pubtator(path, problems=problems)
    assert problems == PROBLEMS_FOUND
    # What is left of documents 1 and 3; document 2 (no title) is dropped.
    assert docs == [
        Document("1", "Aspirin and rash.", [Mention(0, 7, "Aspirin", "Chemical", ("C1",), 0)],
                 [Relation("CID", "C1", "D1")], [(0, 17)]),
        Document("3", "Drug X and fever.", [Mention(11, 16, "fever", "Disease", ("D3",), 0)],
                 [], [(0, 17)])]
    assert capsys.readouterr().out == ""  # bioc's own printing is kept off stdout


def test_a_git_lfs_pointer_is_named_as_such(tmp_path):
    # Public copies hold some corpus files as Git LFS pointers (e.g. a 132-byte
    # CDR_Training+TestSet.PubTator.txt): say so rather than "no title line".
    path = write(tmp_path / "CDR_TrainingSet.PubTator.txt", [
        "version https://git-lfs.github.com/spec/v1",
        "oid sha256:279b20fc787927646b93e80782d7bc835129e57354db4d80100d3f303a13cf43",
        "size 3426674"])
    with pytest.raises(DocREFormatError) as excinfo:
        load_pubtator(path)
    assert message(excinfo) == ("CDR_TrainingSet.PubTator.txt line 1: a Git LFS pointer, not "
                                "the data: fetch the file itself (git lfs pull)")
