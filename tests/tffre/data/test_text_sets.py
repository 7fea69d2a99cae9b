"""``--dataset text``'s loader: CSV and JSON lines, a folder of splits or a split column, the
held-out splits, the sites, and every bad record in one line naming file, line and field."""

import csv
import json
import os

import pytest

from tffre.data import text_sets
from tffre.data.text_sets import TextFileNotFoundError, TextFormatError

FIXTURES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "fixtures", "texts")


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return str(path)


def test_the_fixture_csv_by_hand():
    path = os.path.join(FIXTURES, "notes.csv")
    with open(path, encoding="utf-8") as f:   # the reference: the csv module's own reading
        rows = list(csv.DictReader(f))
    records = text_sets.load_file(path)
    assert [(r["text"], r["label"], r["site"]) for r in records] == \
        [(r["text"], r["label"], r["site"]) for r in rows]
    assert len(records) == 56
    assert "胸痛三天，向左臂放射" in [r["text"] for r in records]


def test_a_split_key_gives_the_splits_and_the_sorted_labels():
    path = os.path.join(FIXTURES, "notes.jsonl")
    with open(path, encoding="utf-8") as f:
        raw = [json.loads(line) for line in f]
    notes = []
    splits, labels = text_sets.load_text_splits(path, seed=0, notes=notes)
    assert notes == []   # every split is in the file: nothing held out
    for split in ("train", "dev", "test"):
        assert [r["text"] for r in splits[split]] == [r["text"] for r in raw
                                                      if r["split"] == split]
    assert (len(splits["train"]), len(splits["dev"]), len(splits["test"])) == (20, 4, 4)
    assert labels == ["cardiac", "respiratory"]
    assert text_sets.sites_of(splits) == ("A", "B", "C")


def test_a_single_file_without_splits_holds_out_test_then_dev(tmp_path):
    lines = "".join(f"note {i},{'ab'[i % 2]}\n" for i in range(10))
    path = write(tmp_path / "all.csv", "text,label\n" + lines)
    notes = []
    splits, labels = text_sets.load_text_splits(path, seed=3, dev_fraction=0.25, notes=notes)
    # 10 -> test round(10 * 0.2) = 2, then dev round(8 * 0.25) = 2, train 6
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [6, 2, 2]
    assert notes == ["no test split: held out 2 of 10 training texts (20%, seeded) as test",
                     "no dev split: held out 2 of 8 training texts (25%, seeded) as dev"]
    texts = sorted(r["text"] for rs in splits.values() for r in rs)
    assert texts == sorted(f"note {i}" for i in range(10)) and labels == ["a", "b"]
    assert text_sets.sites_of(splits) == ()


def test_a_folder_of_split_files_in_either_format(tmp_path):
    write(tmp_path / "train.csv", "label,text,site\nx,one,H1\ny,two,H2\n")
    write(tmp_path / "test.jsonl", '{"text": "three", "label": 1, "site": "H1"}\n')
    write(tmp_path / "dev.csv", "")
    notes = []
    splits = text_sets.load_texts(str(tmp_path), notes=notes)
    assert splits == {"train": [{"text": "one", "label": "x", "site": "H1"},
                                {"text": "two", "label": "y", "site": "H2"}],
                      "test": [{"text": "three", "label": "1", "site": "H1"}]}
    assert notes == ["dev.csv: empty file, read as no dev split"]


@pytest.mark.parametrize("name, content, message", [
    ("a.csv", "text,label\nfine,x\n,y\n", "a.csv line 3: field text: empty"),
    ("a.csv", "text,label,site\nfine,x,A\nalso,y,\n", "a.csv line 3: field site: empty"),
    ("a.csv", "text,label\nfine,x\ntoo,many,fields\n",
     "a.csv line 3: 3 fields, the header has 2"),
    ("a.csv", "words,label\nfine,x\n", "a.csv line 1: header: no 'text' column (columns: 'words', 'label')"),
    ("a.csv", 'text,label,split\n"two\nlines",x,train\nthird,y,validation\n',
     "a.csv line 4: field split: unknown split 'validation'; valid: train, dev, test"),
    ("a.jsonl", '{"text": "fine", "label": "x"}\n{"text": "no label"}\n',
     "a.jsonl line 2: field label: missing"),
    ("a.jsonl", '{"text": "fine", "label": "x"}\n\n{"text": ["a"], "label": "y"}\n',
     "a.jsonl line 3: field text: expected text, got list ['a']"),
    ("a.jsonl", '{"text": "a", "label": "x", "site": "A"}\n{"text": "b", "label": "x"}\n',
     "a.jsonl line 2: field site: missing (other records name their site)"),
    ("a.jsonl", '{"text": "fine", "label": "x"}\nnot json\n',
     "a.jsonl line 2: not valid JSON (Expecting value at column 1)"),
    ("a.jsonl", '{"text": "fine", "label": true}\n',
     "a.jsonl line 1: field label: expected text, got bool True"),
    ("a.txt", "text,label\nfine,x\n", "a.txt: not a .csv or .jsonl file (got '.txt')"),
    ("a.csv", "", "a.csv: empty file"),
])
def test_a_bad_record_is_one_line_naming_file_line_and_field(tmp_path, name, content, message):
    path = write(tmp_path / name, content)
    with pytest.raises(TextFormatError) as err:
        text_sets.load_texts(path)
    assert str(err.value) == message


def test_lenient_loading_collects_every_bad_record(tmp_path):
    path = write(tmp_path / "a.csv", "text,label\n,x\nfine,x\nok,\n")
    problems = []
    records = text_sets.load_file(path, problems)
    assert records == [{"text": "fine", "label": "x"}]
    assert problems == ["a.csv line 2: field text: empty", "a.csv line 4: field label: empty"]


def test_missing_paths_and_a_site_column_in_one_split_only(tmp_path):
    with pytest.raises(TextFileNotFoundError, match="no such file or folder"):
        text_sets.load_texts(str(tmp_path / "nothing.csv"))
    with pytest.raises(TextFileNotFoundError, match="no train.csv or train.jsonl"):
        text_sets.load_texts(str(tmp_path))
    write(tmp_path / "train.csv", "text,label,site\none,x,A\ntwo,y,B\n")
    write(tmp_path / "test.csv", "text,label\nthree,x\n")
    with pytest.raises(TextFormatError) as err:
        text_sets.load_text_splits(str(tmp_path), seed=0)
    assert str(err.value) == (f"{tmp_path.name}: field site: only the train split(s) name a "
                              f"site: every split needs the column, or none")


def test_the_data_check_counts_labels_and_sites_by_hand(tmp_path):
    path = write(tmp_path / "a.csv", "text,label,site,split\n"
                 "胸痛 心悸,c,A,train\ncough,r,A,train\nchest pain,c,B,train\n"
                 "fever,r,B,test\nbad,,B,test\n")
    report = text_sets.check_texts("text", path, dev_fraction=0)
    assert report.problems == ["a.csv line 6: field label: empty"]
    assert report.exit_code == 1
    train, test = report.splits
    assert (train.name, train.count, train.labels, train.details) == \
        ("train", 3, {"c": 2, "r": 1}, {"site A": 2, "site B": 1})
    assert (test.name, test.count, test.labels, test.details) == \
        ("test", 1, {"c": 0, "r": 1}, {"site B": 1})
    assert report.about == "2 sites (--partition site: one client each): A, B"
    assert "no problems" not in report.format()


def test_the_data_check_measures_word_pieces_with_a_tokenizer(tmp_path):
    """With the encoder's tokenizer the lengths are word pieces, [CLS] and [SEP] included,
    counted by hand from the packaged MiniLM's vocabulary: "chest pain" 2 + 2, "cough" 1 + 2,
    "palpitations at night" pal ##pit ##ations at night, 5 + 2."""
    from transformers import AutoTokenizer
    from tffre.text.relation_tokenizer import default_encoder_dir
    tokenizer = AutoTokenizer.from_pretrained(default_encoder_dir(), local_files_only=True)
    path = write(tmp_path / "a.csv", "text,label,split\nchest pain,c,train\ncough,r,train\n"
                 "palpitations at night,c,test\n")
    report = text_sets.check_texts("text", path, dev_fraction=0, tokenizer=tokenizer,
                                   max_len=4)
    train, test = report.splits
    assert (train.lengths, test.lengths) == ([4, 3], [7])
    assert report.length_unit == "word pieces" and report.max_len == 4
    jieba = text_sets.check_texts("text", path, dev_fraction=0, max_len=4)
    assert jieba.max_len is None and jieba.splits[0].lengths is None   # nothing measured
