"""The data check (tffre.data.check): per-split counts, lengths, notes and every problem.

Expected counts are read off the fixtures by hand; word-piece lengths are those of a BERT
tokenizer whose vocabulary holds only its special tokens, so that every basic token (a word
or a punctuation mark) is one [UNK] piece, counted by hand.
"""

import os
import shutil
import subprocess
import sys

import pytest

from tffre.data import check

HERE = os.path.dirname(__file__)
CDR = os.path.join(HERE, "fixtures", "docre", "cdr")
PUBLISHED = os.path.join(HERE, os.pardir, os.pardir, "fixtures")
GAD_FOLD = os.path.join(PUBLISHED, "gad_fold")
SCIBERT = os.path.join(PUBLISHED, "scibert_chemprot")
EOG = os.path.join(PUBLISHED, "eog_cdr")
CDR_FILES = {"train": "CDR_TrainingSet.PubTator.txt", "dev": "CDR_DevelopmentSet.PubTator.txt",
             "test": "CDR_TestSet.PubTator.txt"}


def words(text):
    """The report's lines, each split on whitespace (column widths are not checked)."""
    return [line.split() for line in text.splitlines()]


def read(name):
    with open(os.path.join(CDR, name), encoding="utf-8") as f:
        return f.read()


def cdr_folder(tmp_path, **texts):
    """A CDR-named folder with the fixture's files, some replaced by ``texts``."""
    for split, name in CDR_FILES.items():
        (tmp_path / name).write_text(texts.get(split, read(name)), encoding="utf-8")
    return str(tmp_path)


def test_cdr_report():
    report = check.check_dataset("documents", "cdr", CDR)
    assert [(s.name, s.count, s.details) for s in report.splits] == [
        ("train", 2, {"mentions": 17, "entities": 11, "relations": 4, "excluded pairs": 0}),
        ("dev", 1, {"mentions": 4, "entities": 2, "relations": 1, "excluded pairs": 0}),
        ("test", 1, {"mentions": 3, "entities": 2, "relations": 1, "excluded pairs": 0})]
    assert report.labels == ["CID"]
    assert [s.labels for s in report.splits] == [{"CID": 4}, {"CID": 1}, {"CID": 1}]
    assert [s.type_pairs for s in report.splits] == [{("Chemical", "Disease"): n}
                                                     for n in (4, 1, 1)]
    assert report.notes == [] and report.problems == [] and report.exit_code == 0
    lines = words(report.format())
    for expected in (["split", "train", "dev", "test"], ["documents", "2", "1", "1"],
                     ["mentions", "17", "4", "3"], ["relations", "4", "1", "1"],
                     ["CID", "4", "1", "1"], ["Chemical", "->", "Disease", "4", "1", "1"],
                     ["no", "problems"]):
        assert expected in lines


def test_every_problem_is_reported_with_file_and_line(tmp_path):
    with open(os.path.join(CDR, os.pardir, "problems.pubtator"), encoding="utf-8") as f:
        bad_train = f.read()  # four problems (test_documents.py), in the train file here
    bad_test = read(CDR_FILES["test"]).rstrip("\n") + "\n90000004\tCID\tC9000006\n"
    report = check.check_dataset("documents", "cdr", cdr_folder(tmp_path, train=bad_train,
                                                                test=bad_test))
    train, test = CDR_FILES["train"], CDR_FILES["test"]
    assert report.problems == [
        f"{train} line 3: pmid 1: mention offsets [12, 16) cover 'rash' but the mention text "
        "is 'rasx'",
        f"{train} line 4: field id: empty entity id in 'D1|'",
        f"{train} line 7: document without a 'PMID|t|title' line",
        f"{train} line 10: field end: offset 'x' is not an integer",
        f"{test} line 7: cannot read '90000004\\tCID\\tC9000006': expected 'PMID|t|title', "
        "'PMID|a|abstract', a mention (PMID, start, end, text, type, id [, texts]) or a "
        "relation (PMID, type, id1, id2), tab-separated",
        # The mentions of D1 were bad: its relation is left without one.
        "train pmid 1: relation CID C1 D1: entity D1 has no mention"]
    assert report.exit_code == 1
    # What could be read is counted: document 2 is dropped, the test document kept.
    assert [(s.count, s.details["mentions"]) for s in report.splits] == [(2, 2), (1, 4),
                                                                          (1, 3)]
    text = report.format()
    assert "6 problem(s):" in text and f"  {train} line 10: field end" in text


def test_the_first_20_problems_are_shown(tmp_path):
    lines = ["1|t|A drug."] + [f"1\t{k}\t{k + 1}\tzz\tChemical\tC{k}" for k in range(25)]
    report = check.check_dataset("documents", "cdr",
                                 cdr_folder(tmp_path, train="\n".join(lines) + "\n"))
    assert len(report.problems) == 25
    text = report.format().splitlines()
    start = text.index("25 problem(s), the first 20:")
    shown = text[start + 1:start + 21]
    assert shown[0].startswith(f"  {CDR_FILES['train']} line 2: pmid 1: mention offsets [0, 1)")
    assert shown[-1].startswith(f"  {CDR_FILES['train']} line 21: ")
    assert text[start + 21] == "  ... and 5 more"


def test_a_document_in_two_splits_is_a_problem(tmp_path):
    train = read(CDR_FILES["train"]).rstrip("\n") + "\n\n" + read(CDR_FILES["dev"])
    report = check.check_dataset("documents", "cdr", cdr_folder(tmp_path, train=train))
    # The loader's line (the one a run refuses with), both files named.
    assert report.problems == ["dev pmid 90000003: also in the train split: a document in two "
                               "splits (CDR_DevelopmentSet.PubTator.txt and "
                               "CDR_TrainingSet.PubTator.txt)"]


def test_a_document_twice_in_one_split_is_a_problem(tmp_path):
    train = read(CDR_FILES["train"]).rstrip("\n") + "\n\n" + read(CDR_FILES["train"])
    report = check.check_dataset("documents", "cdr", cdr_folder(tmp_path, train=train))
    pmids = [block.split("|", 1)[0] for block in read(CDR_FILES["train"]).split("\n\n")
             if block.strip()]
    assert report.problems == [f"train pmid {p}: appears twice in this split" for p in pmids]


def test_missing_data_is_one_problem(tmp_path):
    missing = str(tmp_path / "nope")
    report = check.check_dataset("documents", "cdr", missing)
    assert report.problems == [f"{missing}: no such file or folder"] and report.splits == []
    assert report.exit_code == 1 and "1 problem(s):" in report.format()
    report = check.check_dataset("relations", "gad", missing)
    assert report.problems == [f"{missing}: no such file or folder"]
    with pytest.raises(ValueError, match="unknown kind 'tables'; valid: relations, documents, "
                       "dialogues, images"):
        check.check_dataset("tables", "oct", missing)


def test_eog_variant_and_excluded_pairs():
    report = check.check_dataset("documents", "cdr", EOG, eog_variant="plain")
    assert [s.details["excluded pairs"] for s in report.splits] == [0, 0, 0]
    report = check.check_dataset("documents", "cdr", EOG)
    assert [s.details["excluded pairs"] for s in report.splits] == [1, 1, 1]
    assert report.notes[0].startswith("EoG files: the 'filter' variant")
    assert ["excluded", "pairs", "1", "1", "1"] in words(report.format())


@pytest.fixture(scope="module")
def unk_tokenizer(tmp_path_factory):
    from transformers import BertTokenizerFast
    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
    return BertTokenizerFast(vocab_file=str(vocab))


def test_gad_fold_report_with_word_pieces(unk_tokenizer):
    report = check.check_dataset("relations", "gad", GAD_FOLD, tokenizer=unk_tokenizer,
                                 max_len=16, dev_fraction=None)
    assert report.notes == ["dev.tsv: empty file, read as no dev split"]
    assert report.labels == ["0", "1"] and report.problems == []
    assert [(s.name, s.count, s.labels) for s in report.splits] == [
        ("train", 5, {"0": 2, "1": 3}), ("test", 2, {"0": 1, "1": 1})]
    assert [s.type_pairs for s in report.splits] == [
        {("GENE", "DISEASE"): 3, ("DISEASE", "GENE"): 2},
        {("GENE", "DISEASE"): 1, ("DISEASE", "GENE"): 1}]
    # Basic tokens (@, GENE, $, words, .) + [CLS] [SEP] + 4 markers: 10, 11, 11, 11, 10 and
    # 9, 10 tokens.
    assert [s.lengths for s in report.splits] == [[16, 17, 17, 17, 16], [15, 16]]
    lines = words(report.format())
    assert ["split", "min", "p50", "p95", "max", ">", "16"] in lines
    assert ["train", "16", "17", "17", "17", "3"] in lines
    assert ["test", "15", "15", "16", "16", "0"] in lines
    assert ["0", "2", "(40.0%)", "1", "(50.0%)"] in lines
    assert ["GENE", "->", "DISEASE", "3", "1"] in lines


def test_a_run_s_dev_slice_is_checked_too():
    report = check.check_dataset("relations", "gad", GAD_FOLD, seed=3)
    assert [(s.name, s.count) for s in report.splits] == [("train", 4), ("dev", 1),
                                                          ("test", 2)]
    assert report.notes[1] == ("no dev split: held out 1 of 5 training examples (20%, seeded) "
                               "as dev")


def test_scibert_chemprot_report_shows_no_negatives():
    report = check.check_dataset("relations", "chemprot", SCIBERT)
    assert [s.labels for s in report.splits] == [
        {"false": 0, "CPR:3": 0, "CPR:4": 1, "CPR:5": 0, "CPR:6": 1, "CPR:9": 1},
        {"false": 0, "CPR:3": 1, "CPR:4": 0, "CPR:5": 0, "CPR:6": 0, "CPR:9": 0},
        {"false": 0, "CPR:3": 0, "CPR:4": 1, "CPR:5": 1, "CPR:6": 0, "CPR:9": 1}]
    report = check.check_dataset("relations", "chemprot", SCIBERT, raw_labels=True)
    assert report.splits[0].labels["SUBSTRATE_PRODUCT-OF"] == 1


def test_shared_examples_are_noted(tmp_path):
    shutil.copytree(GAD_FOLD, tmp_path / "fold")
    with open(tmp_path / "fold" / "test.tsv", "a", encoding="utf-8") as f:
        f.write("2\t@GENE$ variants raise @DISEASE$ risk .\t1\n")  # train.tsv's line 1
    report = check.check_dataset("relations", "gad", str(tmp_path / "fold"), dev_fraction=None)
    assert report.notes[-1] == ("1 example(s) of test also in train (same text and entity "
                                "offsets), as published")
    assert report.exit_code == 0


def test_a_folder_with_only_a_training_file_reads_as_in_every_task(tmp_path):
    # Issue 30: a CDR folder with only its training file was "no test split"; now, as a
    # sentence-level folder with only train.tsv, a seeded 20% is held out as test, with the
    # same note, in python -m tffre data check as in a run (both load_document_splits).
    from tffre.data.document_sets import sample_path
    cdr = tmp_path / "cdr"
    cdr.mkdir()
    shutil.copy(os.path.join(sample_path(), "train.pubtator"), cdr / CDR_FILES["train"])
    gad = tmp_path / "gad"
    gad.mkdir()
    shutil.copy(os.path.join(GAD_FOLD, "train.tsv"), gad / "train.tsv")
    documents = check.check_dataset("documents", "cdr", str(cdr), seed=0)
    examples = check.check_dataset("relations", "gad", str(gad), seed=0)
    # By hand: 300 documents, round(300 * 0.2) = 60 to test, round(240 * 0.2) = 48 to dev;
    # GAD's 5 examples, round(5 * 0.2) = 1 to test, round(4 * 0.2) = 1 to dev.
    assert [(s.name, s.count) for s in documents.splits] == [("train", 192), ("dev", 48),
                                                             ("test", 60)]
    assert [(s.name, s.count) for s in examples.splits] == [("train", 3), ("dev", 1),
                                                            ("test", 1)]
    assert documents.notes == [
        "no test split: held out 60 of 300 training documents (20%, seeded) as test",
        "no dev split: held out 48 of 240 training documents (20%, seeded) as dev"]
    assert examples.notes == [
        "no test split: held out 1 of 5 training examples (20%, seeded) as test",
        "no dev split: held out 1 of 4 training examples (20%, seeded) as dev"]
    assert documents.problems == [] and documents.exit_code == 0
    # The command prints the same notes and exits 0.
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, "-m", "tffre", "data", "check", "--dataset", "cdr",
                          "--data", str(cdr)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert ["documents", "192", "48", "60"] in words(out.stdout)
    for note in documents.notes:
        assert f"  {note}" in out.stdout.splitlines()
    # A folder with only a test file is a problem that names it.
    os.remove(cdr / CDR_FILES["train"])
    shutil.copy(os.path.join(CDR, CDR_FILES["test"]), cdr / CDR_FILES["test"])
    out = subprocess.run([sys.executable, "-m", "tffre", "data", "check", "--dataset", "cdr",
                          "--data", str(cdr)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 1
    assert (f"  {cdr}: no training documents (a non-empty file whose name holds 'train', such "
            f"as train.pubtator or CDR_TrainingSet.PubTator.txt); found {CDR_FILES['test']} "
            "(the test split)") in out.stdout.splitlines()


def test_the_check_imports_no_tensorflow():
    code = ("import sys; from tffre import resources; from tffre.data.check import check_dataset;"
            f" r = check_dataset('documents', 'cdr', {CDR!r}); r.format();"
            f" q = check_dataset('relations', 'gad', {GAD_FOLD!r}); q.format();"
            " from tffre.tasks import imcs;"
            " d = imcs.TASK.check_data('imcs', imcs.Options.resolve({'data': 'sample'}));"
            " d.format();"
            " i = check_dataset('images', 'oct-c8', resources.path('image_sample'),"
            " split_folders=True); i.format();"
            " print(r.exit_code, q.exit_code, d.exit_code, i.exit_code,"
            " 'tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == ["0", "0", "0", "0", "False"]


def test_wide_characters_take_two_columns():
    from tffre.data.check_report import _table
    lines = _table(["label", "n"], [["小儿发热", 3], ["cold", 12]])
    # The first column is 8 wide (4 wide characters), the second 2, two spaces between.
    assert lines == ["label" + " " * 3 + "  " + " n", "小儿发热" + "  " + " 3",
                     "cold" + " " * 4 + "  " + "12"]
