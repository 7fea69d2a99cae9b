"""The IMCS data check (tffre.data.check_dialogues): counts, labels, jieba lengths, every problem.

Expected counts are computed here from the JSON files with ``json`` and jieba directly (the
shipped dictionary, as a run's segmenter loads it), not with the code under test; the records
the fixture spoils are listed by hand in :data:`SPOILED`.
"""

import collections
import json
import os
import re
import shutil

import jieba
import pytest

from tffre import resources
from tffre.data import check
from tffre.text.segment import MedicalSegmenter

HERE = os.path.dirname(__file__)
PROBLEMS = os.path.join(HERE, "fixtures", "imcs", "problems")
SAMPLE = resources.path("imcs_sample")
PUBLISHED = os.path.join(HERE, os.pardir, os.pardir, "fixtures")
FILES = {"train": "IMCS-V2_train.json", "dev": "IMCS-V2_dev.json", "test": "IMCS-V2_test.json"}
# The fixture's records with a problem, which a lenient load skips: 103 lacks a speaker, 104
# has an unknown dialogue act and a symptom_type 3, 105 lacks its diagnosis. (Record 101 is
# given twice: JSON keeps the second, which is read; 102 of dev repeats train's 102, and both
# are read; 106 has no turns and is skipped, as a run skips it.)
SPOILED = {"train": {"103", "104", "105"}}


def run_s_jieba(splits):
    """A run's segmenter without --user-dict or --dict-from-clients: the shipped dictionary."""
    return MedicalSegmenter()


def check_imcs(path, **options):
    return check.check_dataset("dialogues", "imcs", path, segmenter_for=run_s_jieba, **options)


def words(text):
    """The report's lines, each split on whitespace (column widths are not checked)."""
    return [line.split() for line in text.splitlines()]


@pytest.fixture(scope="module")
def jieba_count():
    """Tokens of a text as a run's default segmenter cuts it (whitespace dropped)."""
    tokenizer = jieba.Tokenizer()
    tokenizer.load_userdict(resources.path("medical_dict.txt"))
    return lambda text: len([t for t in tokenizer.lcut(text) if t.strip()])


def read_records(folder, split):
    with open(os.path.join(folder, FILES[split]), encoding="utf-8") as f:
        return json.load(f)   # a repeated key: the last record, as a run reads it


def expected_split(records, spoiled=()):
    """(dialogues, sentences, symptom labels Counter, sentence texts) of the records kept."""
    kept = [r for eid, r in records.items() if eid not in spoiled and r["dialogue"]]
    turns = [t for r in kept for t in r["dialogue"]]
    # The symptom rule: 1 when a symptom_type of the sentence is "1" (a repeated norm with
    # "1" among its statuses resolves to "1").
    labels = collections.Counter(int("1" in [str(x) for x in t["symptom_type"]]) for t in turns)
    return len(kept), len(turns), labels, [t["sentence"] for t in turns]


def test_every_problem_of_a_folder_with_its_file_record_sentence_and_field(jieba_count):
    report = check_imcs(PROBLEMS, task="symptom", max_len=4)
    assert report.problems == [
        "IMCS-V2_train.json, example_id=101: given 2 times in this file; JSON keeps the last "
        "record, the others are lost",
        "IMCS-V2_train.json, example_id=103, sentence_id=2, field=speaker: missing field",
        "IMCS-V2_train.json, example_id=104, sentence_id=1, field=dialogue_act: unknown "
        "dialogue act 'Ask-Something'",
        "IMCS-V2_train.json, example_id=104, sentence_id=2, field=symptom_type: symptom_type "
        "'3' is not one of 0/1/2",
        "IMCS-V2_train.json, example_id=105, field=diagnosis: missing field",
        "IMCS-V2_dev.json, example_id=102: also in IMCS-V2_train.json, the train split: a "
        "dialogue in two splits"]
    assert report.exit_code == 1
    assert report.notes == ["IMCS-V2_train.json: 1 dialogue(s) with no turns skipped",
                            "test_input.json: left out (unlabeled IMCS test input)"]
    assert [s.name for s in report.splits] == ["train", "dev", "test"]
    assert report.labels == ["no present symptom", "present symptom"]
    for s in report.splits:
        dialogues, sentences, labels, texts = expected_split(read_records(PROBLEMS, s.name),
                                                             SPOILED.get(s.name, ()))
        assert (s.count, s.details, s.labelled) == (dialogues, {"sentences": sentences},
                                                    sentences)
        assert s.labels == {"no present symptom": labels[0], "present symptom": labels[1]}
        assert sorted(s.lengths) == sorted(jieba_count(t) for t in texts)
    text = report.format()
    assert "6 problem(s):" in text and "  IMCS-V2_train.json, example_id=105" in text
    lines = words(text)
    train = report.splits[0]
    assert ["dialogues", str(train.count), "2", "1"] in lines
    assert ["split", "min", "p50", "p95", "max", ">", "4"] in lines
    cut = {s.name: sum(n > 4 for n in s.lengths) for s in report.splits}
    assert ["train", *map(str, _percentiles(train.lengths)), str(cut["train"])] in lines


def _percentiles(values):
    """Nearest-rank min, p50, p95, max, counted here."""
    ordered = sorted(values)
    return [ordered[max(0, -(-q * len(ordered) // 100) - 1)] for q in (0, 50, 95, 100)]


def test_the_diagnosis_task_refuses_an_unknown_diagnosis():
    report = check_imcs(PROBLEMS, task="diagnosis", max_len=192)
    assert report.problems[-1] == ("IMCS-V2_dev.json, example_id=201, field=diagnosis: "
                                   "unknown diagnosis '小儿肺炎' (--task diagnosis takes "
                                   "IMCS's 10)")
    # One example per dialogue; dev keeps only 102.
    assert [(s.name, s.count, s.labelled) for s in report.splits] == [
        ("train", 2, 2), ("dev", 1, 1), ("test", 1, 1)]
    assert report.splits[1].labels["小儿腹泻"] == 1
    assert "label (--task diagnosis)" in report.format()


def test_the_sample_folder(jieba_count):
    report = check_imcs(SAMPLE, task="dialogue-act", max_len=8)
    assert report.problems == [] and report.notes == [] and report.exit_code == 0
    from tffre.data.imcs_dialogues import DIALOGUE_ACTS  # the label vocabulary, not a count
    assert report.labels == list(DIALOGUE_ACTS)
    for s in report.splits:
        records = read_records(SAMPLE, s.name)
        acts = collections.Counter(t["dialogue_act"] for r in records.values()
                                   for t in r["dialogue"])
        assert s.count == len(records) and s.labels == {a: acts.get(a, 0) for a in DIALOGUE_ACTS}
        texts = [t["sentence"] for r in records.values() for t in r["dialogue"]]
        assert sum(n > 8 for n in s.lengths) == sum(jieba_count(t) > 8 for t in texts)
    assert "no problems" in report.format()


def test_a_single_file_holds_out_a_test_split_like_a_sentence_set():
    path = os.path.join(SAMPLE, FILES["train"])
    records = read_records(SAMPLE, "train")
    report = check_imcs(path, task="symptom", max_len=16, seed=0)
    held = round(len(records) * 0.2)
    assert [(s.name, s.count) for s in report.splits] == [("train", len(records) - held),
                                                          ("test", held)]
    assert sum(s.details["sentences"] for s in report.splits) == \
        sum(len(r["dialogue"]) for r in records.values())
    assert report.notes == [f"no test split: held out {held} of {len(records)} training "
                            "dialogues (20%, seeded) as test"] and report.problems == []
    # The same note as a sentence set's single file, but for the items it counts.
    gad = check.check_dataset("relations", "gad", os.path.join(PUBLISHED, "gad_fold",
                                                               "train.tsv"), dev_fraction=None)
    pattern = r"no test split: held out \d+ of \d+ training (examples|dialogues) \(20%, " \
              r"seeded\) as test"
    assert re.fullmatch(pattern, gad.notes[0]) and re.fullmatch(pattern, report.notes[0])
    # Another seed holds out other dialogues (and as many).
    other = check_imcs(path, task="symptom", max_len=16, seed=1)
    assert [s.count for s in other.splits] == [s.count for s in report.splits]
    assert [s.details for s in other.splits] != [s.details for s in report.splits]


def test_a_single_file_is_the_whole_set_whatever_its_name(tmp_path):
    # IMCS-V2_dev.json alone (the example) is read, not refused: its dialogues with a
    # seeded 20% held out as test, and a note that its name says 'dev'.
    total = len(read_records(SAMPLE, "dev"))
    shutil.copy(os.path.join(SAMPLE, FILES["dev"]), tmp_path / "dialogues.json")
    for path in (os.path.join(SAMPLE, FILES["dev"]), str(tmp_path / "dialogues.json")):
        report = check_imcs(path, task="symptom", max_len=16)
        assert [(s.name, s.count) for s in report.splits] == [
            ("train", total - round(total * 0.2)), ("test", round(total * 0.2))]
        assert report.problems == []
        named = [n for n in report.notes if "a single file is read as the whole set" in n]
        assert named == ([f"{FILES['dev']}: a single file is read as the whole set, although "
                          "its name says 'dev' (to use it as the dev split, give the folder "
                          "that holds it and a train file)"] if path.endswith(FILES["dev"])
                         else [])


def test_a_folder_without_test_scores_dev_and_one_without_train_is_a_problem(tmp_path):
    for split in ("train", "dev"):
        shutil.copy(os.path.join(SAMPLE, FILES[split]), tmp_path)
    report = check_imcs(str(tmp_path), task="symptom", max_len=16)
    assert [s.name for s in report.splits] == ["train", "dev"]
    assert report.notes == ["no test split: the dev split is scored as the test set"]
    os.remove(tmp_path / FILES["train"])
    report = check_imcs(str(tmp_path), task="symptom", max_len=16)
    assert report.problems == [f"{tmp_path}: no training dialogues (a file named "
                               "*train*.json)"] and report.exit_code == 1


def test_a_file_that_is_not_imcs_is_one_problem_and_the_rest_is_read(tmp_path):
    shutil.copy(os.path.join(SAMPLE, FILES["test"]), tmp_path)
    shutil.copy(os.path.join(SAMPLE, FILES["dev"]), tmp_path)
    (tmp_path / FILES["train"]).write_text('{"1": {"diagnosis": "x",,}}', encoding="utf-8")
    report = check_imcs(str(tmp_path), task="symptom", max_len=16)
    assert report.problems == ["IMCS-V2_train.json: invalid JSON at line 1 column 25: "
                               "Expecting property name enclosed in double quotes"]
    assert [(s.name, s.count) for s in report.splits] == [
        ("dev", len(read_records(SAMPLE, "dev"))), ("test", len(read_records(SAMPLE, "test")))]


def test_missing_data_is_one_problem(tmp_path):
    report = check_imcs(str(tmp_path / "nope"), task="symptom", max_len=16)
    assert report.problems == [f"{tmp_path / 'nope'}: no such IMCS file or folder"]
    assert report.splits == [] and report.exit_code == 1


def write_dialogues(folder, split, dialogues):
    """An IMCS split file of ``dialogues`` ({example_id: [sentence, ...]}), every turn a
    doctor's "Other" without symptoms (the overlap reads the sentences only)."""
    records = {eid: {"diagnosis": "小儿发热", "self_report": "发烧", "dialogue": [
        {"sentence_id": str(i), "speaker": "医生", "sentence": text, "dialogue_act": "Other",
         "symptom_norm": [], "symptom_type": []} for i, text in enumerate(texts, 1)]}
        for eid, texts in dialogues.items()}
    with open(os.path.join(folder, FILES[split]), "w", encoding="utf-8") as f:
        json.dump(records, f, ensure_ascii=False)


def test_the_verbatim_overlap_with_train_by_hand(tmp_path, cli_here):
    write_dialogues(tmp_path, "train", {"1": ["你好", "宝宝发烧了", "好的"], "2": ["你好", "咳嗽吗？"]})
    # Test, 7 sentences: 你好 (twice), 宝宝发烧了 and 好的 are training texts: 4 of 7, 57.1%;
    # "宝宝发烧了 " (a trailing space), 发烧吗？ and 谢谢 are not. Distinct: 6 texts, 3 in train.
    write_dialogues(tmp_path, "test", {"3": ["你好", "宝宝发烧了", "宝宝发烧了 ", "发烧吗？"],
                                       "4": ["好的", "谢谢", "你好"]})
    # Dev, 2 sentences: 咳嗽吗？ is a training text, 不咳嗽 is not: 1 of 2, 50.0%.
    write_dialogues(tmp_path, "dev", {"5": ["咳嗽吗？", "不咳嗽"]})
    report = check_imcs(str(tmp_path), task="symptom", max_len=16)
    assert report.problems == []
    assert report.tables == [(
        "sentences found verbatim in train (the same text; a model may answer these from "
        "memory)", ["split", "sentences", "in train", "share", "distinct", "distinct in train"],
        [["dev", 2, 1, "50.0%", 2, 1], ["test", 7, 4, "57.1%", 6, 3]])]
    # The diagnosis task (one example per dialogue) counts the same sentences.
    assert check_imcs(str(tmp_path), task="diagnosis", max_len=16).tables == report.tables
    # ``python -m tffre data check --dataset imcs`` prints it, after the lengths.
    out = cli_here("data", "check", "--dataset", "imcs", "--data", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    lines = words(out.stdout)
    at = lines.index("sentences found verbatim in train (the same text; a model may answer "
                     "these from memory)".split())
    assert lines[at + 1:at + 4] == [["split", "sentences", "in", "train", "share", "distinct",
                                     "distinct", "in", "train"],
                                    ["dev", "2", "1", "50.0%", "2", "1"],
                                    ["test", "7", "4", "57.1%", "6", "3"]]
    assert lines.index(["split", "min", "p50", "p95", "max", ">", "16"]) < at


def test_no_overlap_table_without_a_training_split(tmp_path):
    write_dialogues(tmp_path, "dev", {"5": ["咳嗽吗？"]})
    report = check_imcs(str(tmp_path), task="symptom", max_len=16)
    assert report.problems and report.tables == []
    assert "found verbatim" not in report.format()
