"""Any sentence-level set from a file or a folder (tffre.data.sentence_sets): load_re,
load_relation_splits and the published variants' folders.

Fixtures under fixtures/re/ are hand-written in the published formats, those under
tests/fixtures/ invented files in the layouts of the public copies (tests/fixtures/README.md);
other inputs are written into tmp_path by each test. Offsets in the expected rows are
hand-computed. Each format's own rows and errors are tested in formats/.
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from sentence_rows import (CHEMPROT, GAD, GAD_FOLD, GAD_ROWS, GAD_TEST_ROWS, I2B2, I2B2_ENTITIES,
                           I2B2_ROWS, JSONL, PGR, RECORD, assert_rows, frame, one_line,
                           placeholders, write)

from tffre.data import sentence_sets
from tffre.data.formats.blue import load_blue_tsv
from tffre.data.sentence_schema import COLUMNS, REFileNotFoundError, REFormatError
from tffre.data.sentence_sets import load_re, load_relation_splits


def test_load_re_files_have_no_split_column():
    examples, labels = load_re("chemprot", CHEMPROT)
    assert list(examples.columns) == list(COLUMNS) and labels[0] == "false"
    assert load_re("jsonl", JSONL)[1] == ["false", "causes", "treats"]
    assert len(load_re("pgr", os.path.join(PGR, "test.tsv"))[0]) == 2


def test_load_re_folders_concatenate_splits():
    examples, labels = load_re("gad", GAD)
    assert_rows(examples, GAD_ROWS + GAD_TEST_ROWS,
                [("@GENE$", "@DISEASE$"), ("@DISEASE$", "@GENE$")] + [("@GENE$", "@DISEASE$")] * 2,
                split=["train", "train", "test", "test"])
    assert labels == ["0", "1"]
    examples, labels = load_re("pgr", PGR)
    assert list(examples.split) == ["train", "train", "test", "test"] and labels == ["0", "1"]
    assert list(examples.example_id) == ["train:2", "train:3", "test:2", "test:3"]


def test_load_re_i2b2_single_and_split_folders(tmp_path):
    examples, labels = load_re("i2b2", I2B2)
    assert_rows(examples, I2B2_ROWS, I2B2_ENTITIES, split="train")
    assert labels[0] == "None"
    for split, stems in (("train", ["record-1", "record-2"]), ("test", ["record-3"])):
        for sub, ext in (("txt", ".txt"), ("concept", ".con"), ("rel", ".rel")):
            os.makedirs(tmp_path / split / sub)
            for stem in stems:
                if os.path.exists(os.path.join(I2B2, sub, stem + ext)):
                    shutil.copy(os.path.join(I2B2, sub, stem + ext), tmp_path / split / sub)
    examples, _ = load_re("i2b2", str(tmp_path))
    assert list(examples.split) == ["train"] * 9 + ["test"]
    pd.testing.assert_frame_equal(examples.drop(columns="split"), frame(I2B2_ROWS))


def test_load_re_jsonl_folder_infers_labels_over_splits(tmp_path):
    write(tmp_path / "train.jsonl", [json.dumps(RECORD)])
    write(tmp_path / "test.jsonl", [json.dumps({**RECORD, "label": "None"})])
    examples, labels = load_re("jsonl", str(tmp_path))
    assert labels == ["None", "treats"]
    assert list(examples.example_id) == ["train:1", "test:1"]
    assert list(examples.split) == ["train", "test"]
    with pytest.raises(REFormatError, match="test.jsonl line 1: field label"):
        load_re("jsonl", str(tmp_path), labels=["treats"])


def test_load_re_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown dataset 'ddi'"):
        load_re("ddi", GAD)
    with pytest.raises(REFileNotFoundError, match="missing: no such file or folder"):
        load_re("gad", str(tmp_path / "missing"))
    with pytest.raises(REFileNotFoundError, match="neither txt/ nor train/"):
        load_re("i2b2", str(tmp_path))
    with pytest.raises(REFileNotFoundError, match="none of train.jsonl"):
        load_re("jsonl", str(tmp_path))


def test_module_does_not_import_tensorflow():
    # Load the file on its own: importing it via the tffre.data package would pull in TF.
    code = ("import importlib.util, sys;"
            " s = importlib.util.spec_from_file_location('m', sys.argv[1]);"
            " s.loader.exec_module(importlib.util.module_from_spec(s));"
            " print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, sentence_sets.__file__], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"


GAD_FOLD_TRAIN = [
    ("train:1", "@GENE$ variants raise @DISEASE$ risk .", 0, 6, 22, 31, "GENE", "DISEASE", "1"),
    ("train:2", "No link between @DISEASE$ and @GENE$ .", 16, 25, 30, 36, "DISEASE", "GENE", "0"),
    ("train:3", "@GENE$ was not associated with @DISEASE$ .", 0, 6, 31, 40, "GENE", "DISEASE",
     "0"),
    ("train:4", "The @GENE$ allele predisposes to @DISEASE$ .", 4, 10, 33, 42, "GENE", "DISEASE",
     "1"),
    ("train:5", "@DISEASE$ patients carry @GENE$ mutations .", 0, 9, 25, 31, "DISEASE", "GENE",
     "1"),
]


GAD_FOLD_TEST = [
    ("test:0", "@GENE$ expression in @DISEASE$ .", 0, 6, 21, 30, "GENE", "DISEASE", "1"),
    ("test:1", "@DISEASE$ and @GENE$ were unrelated .", 0, 9, 14, 20, "DISEASE", "GENE", "0"),
]


def test_biobert_fold_with_an_empty_dev_file():
    notes = []
    examples, labels = load_re("gad", GAD_FOLD, notes=notes)
    rows = GAD_FOLD_TRAIN + GAD_FOLD_TEST
    assert_rows(examples, rows, placeholders(rows), split=["train"] * 5 + ["test"] * 2)
    assert labels == ["0", "1"]
    assert notes == ["dev.tsv: empty file, read as no dev split"]
    # The empty file itself, named directly, is still refused.
    with pytest.raises(REFormatError, match=r"^dev.tsv: empty file$"):
        load_blue_tsv(os.path.join(GAD_FOLD, "dev.tsv"), "gad")


def test_relation_splits_hold_out_a_seeded_dev_slice():
    notes = []
    splits, labels = load_relation_splits("gad", GAD_FOLD, seed=3, notes=notes)
    dev = np.sort(np.random.RandomState([3, 13]).permutation(5)[:1]).tolist()  # 20% of 5
    assert list(splits) == ["train", "dev", "test"]
    assert list(splits["dev"].example_id) == [GAD_FOLD_TRAIN[i][0] for i in dev]
    assert list(splits["train"].example_id) == [r[0] for i, r in enumerate(GAD_FOLD_TRAIN)
                                                if i not in dev]
    pd.testing.assert_frame_equal(splits["test"], frame(GAD_FOLD_TEST))
    assert notes == ["dev.tsv: empty file, read as no dev split",
                     "no dev split: held out 1 of 5 training examples (20%, seeded) as dev"]
    # A single file: test, then dev, come out of it.
    splits, _ = load_relation_splits("gad", os.path.join(GAD_FOLD, "train.tsv"), seed=0)
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [3, 1, 1]
    # The fold's test file alone is also the whole set (every task reads a single file so),
    # with a note saying how a file named as the test split was read.
    notes = []
    splits, _ = load_relation_splits("gad", os.path.join(GAD_FOLD, "test.tsv"), seed=0,
                                     notes=notes)
    assert sum(len(v) for v in splits.values()) == len(GAD_FOLD_TEST)
    assert notes[0] == ("test.tsv: a single file is read as the whole set, although its name "
                        "says 'test' (to use it as the test split, give the folder that holds "
                        "it and a train file)")


BAD_GAD = ["@GENE$ x @DISEASE$\t1", "@GENE$ y\t1", "@GENE$ z @DISEASE$\t7",
           "@DISEASE$ w @GENE$\t0\textra", "@GENE$ v @DISEASE$\t0"]


BAD_GAD_PROBLEMS = [
    "train.tsv line 2: field sentence: expected two entity placeholders or one @CHEM-GENE$, "
    "found 1: @GENE$",
    "train.tsv line 3: field label: unknown label '7'; valid: 0, 1",
    "train.tsv line 4: columns: expected 2 tab-separated columns (sentence, label) (no "
    "'index\\tsentence\\tlabel' header), got 3",
]


def test_lenient_loading_collects_every_bad_line(tmp_path):
    path = write(tmp_path / "train.tsv", BAD_GAD)
    with pytest.raises(REFormatError) as e:  # strict, the default: the first problem
        load_blue_tsv(path, "gad")
    assert one_line(e) == BAD_GAD_PROBLEMS[0]
    problems = []
    examples, _ = load_blue_tsv(path, "gad", problems=problems)
    assert problems == BAD_GAD_PROBLEMS
    assert list(examples.example_id) == ["train:1", "train:5"]
    # Through load_re and a folder: the same problems, the good rows kept.
    write(tmp_path / "fold" / "train.tsv", BAD_GAD)
    write(tmp_path / "fold" / "test.tsv", GAD_FOLD_TEST_LINES)
    problems = []
    examples, _ = load_re("gad", str(tmp_path / "fold"), problems=problems)
    assert problems == BAD_GAD_PROBLEMS
    assert list(examples.split) == ["train", "train", "test"]


GAD_FOLD_TEST_LINES = ["index\tsentence\tlabel", "0\t@GENE$ expression in @DISEASE$ .\t1"]


def _i2b2_splits(root, stems):
    """An i2b2 folder of split sub-folders: ``stems`` {split: the fixture's records}."""
    for split, names in stems.items():
        for sub, ext in (("txt", ".txt"), ("concept", ".con"), ("rel", ".rel")):
            os.makedirs(root / split / sub)
            for stem in names:
                if os.path.exists(os.path.join(I2B2, sub, stem + ext)):
                    shutil.copy(os.path.join(I2B2, sub, stem + ext), root / split / sub)
    return str(root)


def test_an_i2b2_document_in_two_splits_is_refused_naming_both_files(tmp_path):
    folder = _i2b2_splits(tmp_path, {"train": ["record-1", "record-2"],
                                     "test": ["record-2", "record-3"]})
    with pytest.raises(REFormatError) as e:
        load_relation_splits("i2b2", folder, seed=0)
    assert one_line(e) == (
        f"{folder}: test document record-2: also in the train split: a document in two splits "
        "(test/txt/record-2.txt and train/txt/record-2.txt); remove it from one of the splits")
    # Leniently (the data check): one problem, and the test split keeps record-3 alone.
    problems = []
    examples, _ = load_re("i2b2", folder, problems=problems)
    assert problems == [
        "test document record-2: also in the train split: a document in two splits "
        "(test/txt/record-2.txt and train/txt/record-2.txt)"]
    rows = {split: [r for r in I2B2_ROWS if r[0].split(":")[0] in stems]
            for split, stems in (("train", ("record-1", "record-2")), ("test", ("record-3",)))}
    assert list(examples.example_id) == [r[0] for r in rows["train"] + rows["test"]]
    assert list(examples.split) == ["train"] * len(rows["train"]) + ["test"] * len(rows["test"])


def test_a_json_lines_example_id_in_two_splits_is_refused_naming_both_files(tmp_path):
    write(tmp_path / "train.jsonl", [json.dumps({"example_id": "s1", **RECORD}),
                                     json.dumps({"example_id": "s2", **RECORD})])
    write(tmp_path / "test.jsonl", [json.dumps({"example_id": "s2", **RECORD})])
    with pytest.raises(REFormatError) as e:
        load_relation_splits("jsonl", str(tmp_path), seed=0)
    assert one_line(e) == (
        f"{tmp_path}: test example_id s2: also in the train split: an example in two splits "
        "(test.jsonl and train.jsonl); remove it from one of the splits")
    problems = []
    examples, _ = load_re("jsonl", str(tmp_path), problems=problems)
    assert problems == ["test example_id s2: also in the train split: an example in two "
                        "splits (test.jsonl and train.jsonl)"]
    assert list(examples.example_id) == ["s1", "s2"] and list(examples.split) == ["train"] * 2
    # Without ids of their own, the same sentence in both files is two examples (as published
    # GAD and ChemProt hold a few: the data check notes them).
    write(tmp_path / "test.jsonl", [json.dumps(RECORD)])
    splits, _ = load_relation_splits("jsonl", str(tmp_path), seed=0)
    assert list(splits["test"].example_id) == ["test:1"]


def test_a_run_refuses_a_record_in_two_splits_before_building_a_model(tmp_path, cli_here):
    write(tmp_path / "train.jsonl", [json.dumps({"example_id": f"s{k}", **RECORD})
                                     for k in range(4)])
    write(tmp_path / "test.jsonl", [json.dumps({"example_id": "s3", **RECORD})])
    out = tmp_path / "out"
    proc = cli_here("run", "--dataset", "jsonl", "--data", str(tmp_path), "--out", str(out))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"python -m tffre run: error: {tmp_path}: test example_id s3: also in the train split: "
        "an example in two splits (test.jsonl and train.jsonl); remove it from one of the "
        "splits"]
    assert not out.exists()
