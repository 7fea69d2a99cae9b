"""Any document set from a file or a folder (tffre.data.document_sets): formats guessed, split
files found, the splits a run uses, and the embedded sample.

Fixtures under fixtures/docre/ are hand-written, invented documents in the published formats
(``cdr/`` named as BioCreative names CDR's files, ``gda/`` as EoG's gda2pubtator writes GDA);
the published variants' folders are under tests/fixtures/; other inputs are written into
tmp_path by each test. Each format's own documents and errors are tested in formats/.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from document_checks import (CDR, CDR_TRAIN, DOCRED_TEST, DOCRED_TRAIN, EOG, FIXTURES, GDA, REPO,
                             check_mentions, message, sentence_texts, write)

from tffre.data.document_schema import (DocREFileNotFoundError, DocREFormatError, Document,
                                        Mention, Relation)
from tffre.data.document_sets import (Holdout, guess_format, load_document_splits,
                                      load_documents, load_sample, sample_path, split_files)
from tffre.data.formats.docred import load_docred
from tffre.data.formats.eog import EOG_VARIANT, load_eog
from tffre.data.formats.pubtator import load_pubtator
from tffre.data.splits import TEST_FRACTION, complete_splits

_GENERATOR = REPO / "data" / "docre_sample" / "generate.py"


def test_missing_paths_raise_a_file_not_found_error(tmp_path):
    missing = str(tmp_path / "nope.pubtator")
    for load in (load_pubtator, load_docred, load_eog, load_documents):
        with pytest.raises(DocREFileNotFoundError) as excinfo:
            load(missing)
        assert isinstance(excinfo.value, FileNotFoundError)
        assert isinstance(excinfo.value, DocREFormatError)
        assert missing in message(excinfo)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        split_files(missing)


def test_guess_format_by_extension_then_content(tmp_path):
    assert guess_format(CDR_TRAIN) == "pubtator"
    assert guess_format(DOCRED_TRAIN) == "docred"
    assert guess_format(EOG) == "eog"
    for source, fmt in ((CDR_TRAIN, "pubtator"), (DOCRED_TRAIN, "docred"), (EOG, "eog")):
        copy = tmp_path / f"{fmt}.unknown"
        shutil.copy(source, copy)
        assert guess_format(str(copy)) == fmt
        assert load_documents(str(copy)) == load_documents(source)
    odd = write(tmp_path / "odd.unknown", ["hello"])
    with pytest.raises(DocREFormatError, match="cannot tell the format"):
        load_documents(odd)
    with pytest.raises(ValueError, match="unknown format 'bioc'"):
        load_documents(CDR_TRAIN, format="bioc")
    # A given format wins over the extension.
    with pytest.raises(DocREFormatError):
        load_documents(CDR_TRAIN, format="docred")


def test_load_documents_folder_of_cdr_splits():
    splits = load_documents(CDR)
    # CDR_TrainingSet/DevelopmentSet/TestSet.PubTator.txt; the .xml and readme.txt are skipped.
    assert list(splits) == ["train", "dev", "test"]
    assert {s: [d.pmid for d in docs] for s, docs in splits.items()} == {
        "train": ["90000001", "90000002"], "dev": ["90000003"], "test": ["90000004"]}
    assert splits["train"] == load_pubtator(CDR_TRAIN)
    assert splits["test"][0].relations == [Relation("CID", "C9000006", "D9000040")]


def test_load_documents_folder_of_gda_and_docred_splits():
    gda = load_documents(GDA)  # training.txt / testing.txt
    assert {s: [d.pmid for d in docs] for s, docs in gda.items()} == {
        "train": ["90000005"], "test": ["90000006"]}
    # The fixtures folder itself: docred_train.json and docred_test.json; cdr.data and
    # bad_offsets.pubtator name no split, cdr/ and gda/ are folders.
    mixed = load_documents(FIXTURES)
    assert {s: [d.pmid for d in docs] for s, docs in mixed.items()} == {
        "train": ["Skai TV", "Lark Force"], "test": ["Skai Radio"]}


def test_split_file_names(tmp_path):
    for name in ("train.data", "dev.data", "test.data", "train+dev.data", "latest.txt"):
        shutil.copy(EOG, tmp_path / name)
    # train+dev.data (EoG's GDA) names two splits and "latest" no split: both skipped.
    assert split_files(str(tmp_path)) == {
        split: str(tmp_path / f"{split}.data") for split in ("train", "dev", "test")}
    # Two train files that are not EoG's two variants of one split.
    shutil.copy(EOG, tmp_path / "training.data")
    with pytest.raises(DocREFormatError, match="two train files, train.data and "
                                               "training.data"):
        load_documents(str(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DocREFileNotFoundError, match="no train, dev or test file"):
        load_documents(str(empty))


@pytest.fixture(scope="module")
def sample():
    return load_sample()


def test_regenerating_the_sample_gives_byte_identical_files(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("docre_sample_generate", _GENERATOR)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    generator.main(["--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert ("train: 300 documents, 2103 sentences (titles included), 3647 mentions, 1851 "
            "entities, 2848 chemical-disease pairs, 914 CID (32%), 287 cross-sentence CID, 117 "
            "composite and 29 -1 mentions") in out
    shipped = Path(sample_path())
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


EOG_FOLDER = str(REPO / "tests" / "fixtures" / "eog_cdr")


EOG_TEXT = "Drug A caused hepatitis and liver disease ."


EOG_MENTIONS = [Mention(0, 6, "Drug A", "Chemical", ("C1",), 0),
                Mention(14, 23, "hepatitis", "Disease", ("D1",), 0),
                Mention(28, 41, "liver disease", "Disease", ("D2",), 0)]


def test_eog_folder_reads_the_filter_variant_by_default():
    assert EOG_VARIANT == "filter"
    notes = []
    splits = load_documents(EOG_FOLDER, notes=notes)
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
    plain = load_documents(EOG_FOLDER, eog_variant="plain", notes=notes)
    assert plain["test"][0] == Document("1003", EOG_TEXT, EOG_MENTIONS,
                                        [Relation("CID", "C1", "D1")], [(0, 43)], [])
    assert notes[0].startswith("EoG files: the 'plain' variant, train.data, dev.data, test.data")
    with pytest.raises(ValueError, match="unknown EoG variant 'filtered'"):
        load_documents(EOG_FOLDER, eog_variant="filtered")


def test_eog_folder_with_one_variant_notes_it(tmp_path):
    for name in ("train.data", "test_filter.data"):
        shutil.copy(os.path.join(EOG_FOLDER, name), tmp_path / name)
    notes = []
    splits = load_documents(str(tmp_path), notes=notes)
    assert [d.excluded_pairs for d in splits["train"] + splits["test"]] == [[], [("C1", "D2")]]
    assert notes == ["train.data: the only train file, read although the EoG variant asked "
                     "for is 'filter'"]


def test_empty_split_file_counts_as_absent(tmp_path):
    shutil.copy(CDR_TRAIN, tmp_path / "CDR_TrainingSet.PubTator.txt")
    (tmp_path / "CDR_DevelopmentSet.PubTator.txt").write_text("\n \n", encoding="utf-8")
    shutil.copy(os.path.join(CDR, "CDR_TestSet.PubTator.txt"), tmp_path / "test.pubtator")
    notes = []
    assert list(load_documents(str(tmp_path), notes=notes)) == ["train", "test"]
    assert notes == ["CDR_DevelopmentSet.PubTator.txt: empty file, read as no dev split"]


def test_document_splits_hold_out_a_seeded_dev_slice(tmp_path, sample):
    shutil.copy(os.path.join(sample_path(), "train.pubtator"), tmp_path / "train.pubtator")
    shutil.copy(os.path.join(sample_path(), "test.pubtator"), tmp_path / "test.pubtator")
    notes = []
    splits = load_document_splits(str(tmp_path), seed=2, notes=notes)
    dev = set(np.random.RandomState([2, 13]).permutation(300)[:60].tolist())
    assert [d.pmid for d in splits["dev"]] == [d.pmid for i, d in enumerate(sample["train"])
                                               if i in dev]
    assert [d.pmid for d in splits["train"]] == [d.pmid for i, d in enumerate(sample["train"])
                                                 if i not in dev]
    assert splits["test"] == sample["test"]
    assert notes == ["no dev split: held out 60 of 300 training documents (20%, seeded) as dev"]
    # The sample's own dev split is used as it is.
    assert load_document_splits(sample_path(), seed=2) == sample


def test_document_splits_dev_as_test_and_a_missing_test(tmp_path):
    shutil.copy(DOCRED_TRAIN, tmp_path / "train.json")
    shutil.copy(DOCRED_TEST, tmp_path / "dev.json")
    notes = []
    splits = load_document_splits(str(tmp_path), seed=0, dev_as_test=True,
                                  holdout=Holdout(dev_fraction=None), notes=notes)
    assert [d.pmid for d in splits["test"]] == ["Skai Radio"] and list(splits) == ["train",
                                                                                    "test"]
    assert notes == ["the dev split is scored as the test set (its test labels are not public; "
                     "FedLCC Table 7)"]
    with pytest.raises(ValueError, match="no dev split, which is scored as the test set"):
        load_document_splits(FIXTURES, seed=0, dev_as_test=True)
    # A folder without a test file has one held out, as a single file has (below).


def head(path, n):
    """The first ``n`` documents of a PubTator file, as its text."""
    with open(path, encoding="utf-8") as f:
        blocks = f.read().strip("\n").split("\n\n")
    return "\n\n".join(blocks[:n]) + "\n"


def test_a_single_file_is_the_whole_set_whatever_its_name(tmp_path, sample):
    # The first 30 documents of the sample's test file, named as a head of CDR's test set: it
    # was refused with "no test split (a file whose name holds 'test')" (issue 30). Now it is
    # read as a sentence-level set's single file is, its name noted.
    path = tmp_path / "cdr_test_head30.PubTator"
    path.write_text(head(os.path.join(sample_path(), "test.pubtator"), 30), encoding="utf-8")
    assert load_documents(str(path)) == sample["test"][:30]
    shutil.copy(path, tmp_path / "cdr_head30.PubTator")
    shutil.copy(path, tmp_path / "CDR_TestSet.PubTator.txt")
    for name in ("cdr_test_head30.PubTator", "CDR_TestSet.PubTator.txt"):
        notes = []
        splits = load_document_splits(str(tmp_path / name), seed=4, notes=notes)
        assert splits == load_document_splits(str(tmp_path / "cdr_head30.PubTator"), seed=4)
        assert notes[0] == (f"{name}: a single file is read as the whole set, although its "
                            "name says 'test' (to use it as the test split, give the folder "
                            "that holds it and a train file)")
        assert notes[1].startswith("no test split: held out 6 of 30 training documents")


@pytest.mark.parametrize("name", ["cdr_head30.PubTator", "cdr_train_head30.PubTator",
                                  "CDR_TrainingSet.PubTator.txt"])
def test_a_single_file_of_training_documents_has_a_seeded_test_split_held_out(tmp_path, sample,
                                                                              name):
    # As a sentence-level set's single file (load_relation_splits): a seeded 20% becomes the
    # test split, then 20% of what is left the dev split, each with a note.
    path = tmp_path / name
    path.write_text(head(os.path.join(sample_path(), "test.pubtator"), 30), encoding="utf-8")
    docs = sample["test"][:30]
    notes = []
    splits = load_document_splits(str(path), seed=4, notes=notes)
    test = sorted(np.random.RandomState([4, 7]).permutation(30)[:6])
    rest = [d for i, d in enumerate(docs) if i not in test]
    dev = sorted(np.random.RandomState([4, 13]).permutation(24)[:5])
    assert splits == {"train": [d for i, d in enumerate(rest) if i not in dev],
                      "dev": [rest[i] for i in dev], "test": [docs[i] for i in test]}
    assert notes == ["no test split: held out 6 of 30 training documents (20%, seeded) as test",
                     "no dev split: held out 5 of 24 training documents (20%, seeded) as dev"]
    # The sentence-level sets' own mechanism, on the same seed, holds out the same documents.
    assert splits == complete_splits({"train": docs}, seed=4, test_fraction=TEST_FRACTION)
    with pytest.raises(ValueError, match="no test split$"):
        load_document_splits(str(path), seed=4, holdout=Holdout(test_fraction=None))


@pytest.mark.parametrize("name", ["train.pubtator", "CDR_TrainingSet.PubTator.txt"])
def test_a_folder_with_only_a_training_file_has_a_seeded_test_split_held_out(tmp_path, sample,
                                                                             name):
    # Issue 30: a CDR folder holding only its training file was refused ("no test split"),
    # while the file alone, an IMCS folder and a sentence-level folder with only a train file
    # each had a seeded 20% held out as test, with a note. Now the folder is read so too.
    folder = tmp_path / "cdr"
    folder.mkdir()
    shutil.copy(os.path.join(sample_path(), "train.pubtator"), folder / name)
    docs = sample["train"]
    assert len(docs) == 300
    notes = []
    splits = load_document_splits(str(folder), seed=3, notes=notes)
    # By hand: round(300 * 0.2) = 60 documents held out as test, then round(240 * 0.2) = 48
    # of the 240 left as dev; the first positions of RandomState([seed, 7]) and
    # RandomState([seed, 13]) (the test and dev salts), each part in the file's order.
    assert {k: len(v) for k, v in splits.items()} == {"train": 192, "dev": 48, "test": 60}
    test = set(np.random.RandomState([3, 7]).permutation(300)[:60].tolist())
    rest = [d for i, d in enumerate(docs) if i not in test]
    dev = set(np.random.RandomState([3, 13]).permutation(240)[:48].tolist())
    assert splits == {"train": [d for i, d in enumerate(rest) if i not in dev],
                      "dev": [d for i, d in enumerate(rest) if i in dev],
                      "test": [d for i, d in enumerate(docs) if i in test]}
    assert notes == ["no test split: held out 60 of 300 training documents (20%, seeded) as test",
                     "no dev split: held out 48 of 240 training documents (20%, seeded) as dev"]
    # The file alone gives the same splits and notes, through the mechanism every task shares.
    alone = []
    assert load_document_splits(str(folder / name), seed=3, notes=alone) == splits
    assert alone == notes
    assert splits == complete_splits({"train": docs}, seed=3, test_fraction=TEST_FRACTION)
    # Another seed holds out other documents, as many.
    other = load_document_splits(str(folder), seed=4)
    assert {k: len(v) for k, v in other.items()} == {"train": 192, "dev": 48, "test": 60}
    assert other["test"] != splits["test"]
    # test_fraction=None refuses it, as it refuses a single file.
    with pytest.raises(ValueError, match="no test split$"):
        load_document_splits(str(folder), seed=3, holdout=Holdout(test_fraction=None))


def test_a_folder_with_train_and_dev_files_has_its_test_split_held_out_of_train(tmp_path,
                                                                                sample):
    # As a sentence-level folder without test.tsv: the test split comes out of train, and the
    # folder's dev file is kept as the dev split.
    for split in ("train", "dev"):
        shutil.copy(os.path.join(sample_path(), f"{split}.pubtator"),
                    tmp_path / f"{split}.pubtator")
    notes = []
    splits = load_document_splits(str(tmp_path), seed=5, notes=notes)
    test = set(np.random.RandomState([5, 7]).permutation(300)[:60].tolist())
    assert splits == {"train": [d for i, d in enumerate(sample["train"]) if i not in test],
                      "dev": sample["dev"],
                      "test": [d for i, d in enumerate(sample["train"]) if i in test]}
    assert notes == ["no test split: held out 60 of 300 training documents (20%, seeded) as "
                     "test"]


def test_a_folder_with_a_test_file_is_read_as_before(tmp_path, sample):
    # Runs that had a test split are unchanged: the folder's own splits, no hold-out, no note.
    notes = []
    assert load_document_splits(sample_path(), seed=3, notes=notes) == sample
    assert notes == []
    for name in ("CDR_TrainingSet.PubTator.txt", "CDR_DevelopmentSet.PubTator.txt",
                 "CDR_TestSet.PubTator.txt"):
        shutil.copy(os.path.join(CDR, name), tmp_path / name)
    assert load_document_splits(str(tmp_path), seed=3) == load_documents(CDR)


def test_data_without_training_documents_is_refused_with_its_files_named(tmp_path):
    folder = tmp_path / "cdr"
    folder.mkdir()
    shutil.copy(os.path.join(CDR, "CDR_TestSet.PubTator.txt"), folder)
    want = (f"{folder}: no training documents (a non-empty file whose name holds 'train', "
            "such as train.pubtator or CDR_TrainingSet.PubTator.txt); found ")
    with pytest.raises(ValueError) as excinfo:
        load_document_splits(str(folder), seed=0)
    assert message(excinfo) == want + "CDR_TestSet.PubTator.txt (the test split)"
    # An empty train file, a file of another kind: each named as it is.
    (folder / "CDR_TrainingSet.PubTator.txt").write_text("\n", encoding="utf-8")
    (folder / "readme.md").write_text("CDR\n", encoding="utf-8")
    with pytest.raises(ValueError) as excinfo:
        load_document_splits(str(folder), seed=0)
    assert message(excinfo) == want + (
        "CDR_TestSet.PubTator.txt (the test split), CDR_TrainingSet.PubTator.txt (empty: no "
        "train split), readme.md (not .pubtator, .txt, .json, .data)")
    # No file names a split: each file says why.
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(EOG, other / "cdr.data")
    shutil.copy(EOG, other / "train+dev.data")
    with pytest.raises(DocREFileNotFoundError) as excinfo:
        load_document_splits(str(other), seed=0)
    assert message(excinfo) == (
        f"{other}: no train, dev or test file (a name holding train, dev or test, ending "
        ".pubtator, .txt, .json, .data); found cdr.data (its name names no split), "
        "train+dev.data (its name names train and dev)")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DocREFileNotFoundError) as excinfo:
        load_document_splits(str(empty), seed=0)
    assert message(excinfo).endswith("; the folder holds no file")
    # Leniently, a train file that cannot be read is named (its problems say why).
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "train.pubtator").write_text("not a document\n", encoding="utf-8")
    shutil.copy(os.path.join(CDR, "CDR_TestSet.PubTator.txt"), broken / "test.pubtator")
    problems = []
    with pytest.raises(ValueError) as excinfo:
        load_document_splits(str(broken), seed=0, problems=problems)
    assert message(excinfo) == (f"{broken}: no training documents could be read from "
                                "train.pubtator")
    assert problems and all(str(p).startswith("train.pubtator") for p in problems)


def test_document_modules_do_not_import_pandas_or_tensorflow():
    # A document check needs neither (CDR is checked in about a second).
    code = ("import sys, tffre.data.document_sets;"
            " print(sorted(m for m in ('pandas', 'numpy', 'tensorflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def _cdr_copy(folder, train_extra=""):
    """The CDR fixture's three files in ``folder``, ``train_extra`` appended to the training
    file (another file's abstracts)."""
    folder.mkdir()
    for name in ("CDR_TrainingSet.PubTator.txt", "CDR_DevelopmentSet.PubTator.txt",
                 "CDR_TestSet.PubTator.txt"):
        shutil.copy(os.path.join(CDR, name), folder / name)
    if train_extra:
        with open(folder / "CDR_TrainingSet.PubTator.txt", "a", encoding="utf-8") as f:
            f.write("\n" + train_extra)
    return folder


def test_a_document_in_two_splits_is_refused_naming_its_pmid_and_both_files(tmp_path):
    # CDR's public copy, in small: the development abstract (pmid 90000003) again at the end
    # of the training file.
    dev = Path(CDR, "CDR_DevelopmentSet.PubTator.txt").read_text(encoding="utf-8")
    folder = _cdr_copy(tmp_path / "cdr", train_extra=dev)
    with pytest.raises(DocREFormatError) as excinfo:
        load_document_splits(str(folder), seed=0)
    assert message(excinfo) == (
        f"{folder}: dev pmid 90000003: also in the train split: a document in two splits "
        "(CDR_DevelopmentSet.PubTator.txt and CDR_TrainingSet.PubTator.txt); remove it from "
        "one of the files; BioCreative V CDR's public copy repeats its development set in its "
        "training file: python -m tffre data prepare cdr --from DIR --out DIR writes the "
        "official split")
    # Leniently (the data check) it is a problem, and the splits are read as they are.
    problems = []
    splits = load_document_splits(str(folder), seed=0, problems=problems)
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [3, 1, 1]
    assert problems == ["dev pmid 90000003: also in the train split: a document in two splits "
                        "(CDR_DevelopmentSet.PubTator.txt and CDR_TrainingSet.PubTator.txt)"]
    # DocRED's dev scored as test: the test split is the dev file's, and the training file's
    # copy is in train or in the dev split held out of it, as the seed draws.
    with pytest.raises(DocREFormatError, match="test pmid 90000003: also in the (train|dev) "
                       r"split: a document in two splits \(CDR_DevelopmentSet.PubTator.txt and "
                       r"CDR_TrainingSet.PubTator.txt\)"):
        load_document_splits(str(folder), seed=0, dev_as_test=True)
    # The fixture as published: no document in two splits, nothing refused.
    assert load_document_splits(CDR, seed=0) == load_documents(CDR)


def test_a_file_holding_a_document_twice_is_refused_when_a_held_out_split_takes_a_copy(
        tmp_path):
    # Three copies of one abstract in a single file: the held-out test split (round(3 * 0.2)
    # = 1 document) takes one of them whatever the seed, train keeps the other two.
    block = Path(CDR, "CDR_TestSet.PubTator.txt").read_text(encoding="utf-8").strip()
    pmid = block.split("|", 1)[0]
    path = tmp_path / "docs.pubtator"
    path.write_text("\n\n".join([block] * 3) + "\n", encoding="utf-8")
    with pytest.raises(DocREFormatError) as excinfo:
        load_document_splits(str(path), seed=1)
    assert message(excinfo) == (
        f"{path}: test pmid {pmid}: also in the train split: a document in two splits (both "
        "read from docs.pubtator, which holds it twice); remove it from one of the files")
