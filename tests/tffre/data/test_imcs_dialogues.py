"""The IMCS-V2 loader, its validation errors and the task label rules."""

import json
import os

import pytest

from tffre import resources
from tffre.data import imcs_dialogues as imcs


def turn(sid, speaker="患者", sentence="有发烧", act="Inform-Symptom", norms=("发热",), types=("1",)):
    return {"sentence_id": str(sid), "speaker": speaker, "sentence": sentence, "dialogue_act": act,
            "BIO_label": " ".join("O" * len(sentence)), "symptom_norm": list(norms),
            "symptom_type": list(types), "local_implicit_info": {}}


def record(diagnosis="小儿发热", turns=None, report_key="self_report"):
    turns = [turn(1, "医生", "宝宝发烧吗？", "Request-Symptom"), turn(2)] if turns is None else turns
    return {"diagnosis": diagnosis, report_key: "宝宝发烧两天了", "dialogue": turns,
            "report": [{"诊断": diagnosis}], "explicit_info": {"Symptom": ["发热"]},
            "implicit_info": {"Symptom": {"发热": "1"}}}


def write(tmp_path, name, records):
    path = tmp_path / name
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    return str(path)


def test_loads_a_split_file_and_both_self_report_spellings(tmp_path):
    path = write(tmp_path, "IMCS-V2_train.json",
                 {"101": record(), "102": record("小儿腹泻", report_key="self-report")})
    splits = imcs.load_imcs(path, verbose=False)
    assert list(splits) == ["train"]
    assert [d.self_report for d in splits["train"]] == ["宝宝发烧两天了"] * 2


def test_loads_a_folder_and_leaves_out_test_input(tmp_path, capsys):
    write(tmp_path, "IMCS-V2_train.json", {"1": record()})
    write(tmp_path, "IMCS-V2_dev.json", {"2": record()})
    write(tmp_path, "test_input.json", {"3": {"self_report": "x", "dialogue": [
        {"sentence_id": "1", "speaker": "医生", "sentence": "你好"}]}})
    splits = imcs.load_imcs(str(tmp_path))
    assert sorted(splits) == ["dev", "train"]
    assert "test_input.json: left out (unlabeled IMCS test input)" in capsys.readouterr().out


def test_test_input_file_cannot_be_loaded_for_training(tmp_path):
    path = write(tmp_path, "test_input.json", {"3": {"self_report": "x", "dialogue": [
        {"sentence_id": "1", "speaker": "医生", "sentence": "你好"}]}})
    with pytest.raises(imcs.UnlabeledSplitError, match="test_input.json.*has no labels.*training"):
        imcs.load_imcs(path)


def test_empty_dialogues_are_skipped_and_counted(tmp_path, capsys):
    path = write(tmp_path, "IMCS-V2_train.json", {"1": record(), "2": record(turns=[]),
                                                    "3": record(turns=[])})
    splits = imcs.load_imcs(path)
    assert len(splits["train"]) == 1
    assert "IMCS-V2_train.json: 1 dialogues, 2 with no turns skipped" in capsys.readouterr().out


def malformed_cases():
    bad_turn_field = record()
    del bad_turn_field["dialogue"][1]["speaker"]
    unaligned = record(turns=[turn(1), turn(7, norms=("发热", "咳嗽"), types=("1",))])
    bad_type = record(turns=[turn(5, types=("3",))])
    no_diagnosis = record()
    del no_diagnosis["diagnosis"]
    return [
        ({"42": bad_turn_field}, r"example_id=42, sentence_id=2, field=speaker: missing field"),
        ({"43": unaligned}, r"example_id=43, sentence_id=7, field=symptom_type: unaligned"),
        ({"44": bad_type}, r"example_id=44, sentence_id=5, field=symptom_type: .*not one of 0/1/2"),
        ({"1": record(), "45": no_diagnosis}, r"example_id=45, field=diagnosis: missing field"),
    ]


@pytest.mark.parametrize("records,message", malformed_cases())
def test_malformed_input_names_file_record_sentence_and_field(tmp_path, records, message):
    path = write(tmp_path, "IMCS-V2_dev.json", records)
    with pytest.raises(imcs.ImcsFormatError, match=r"IMCS-V2_dev.json, " + message):
        imcs.load_imcs(path, verbose=False)


@pytest.mark.parametrize("records,message", [
    ({"a": 1}, r"example_id=a: record is a JSON number; expected IMCS records"),
    ({"a": {"b": 1}}, r"example_id=a, field=dialogue: missing field; expected IMCS records"),
    ({"a": {"dialogue": "你好", "diagnosis": "小儿发热"}},
     r"example_id=a, field=dialogue: dialogue must be a list of turns, got a JSON string"),
    ({"a": {"dialogue": "你好"}}, r"example_id=a, field=dialogue: dialogue must be a list"),
    ({"1": record(), "b": ["x"]}, r"example_id=b: record is a JSON array; expected IMCS records"),
    ([record()], r"the top level is a JSON array; expected IMCS records"),
    ({}, r"no records; expected IMCS records"),
])
def test_non_imcs_json_is_malformed_not_unlabeled(tmp_path, records, message):
    path = write(tmp_path, "IMCS-V2_train.json", records)
    with pytest.raises(imcs.ImcsFormatError, match=r"^IMCS-V2_train.json(, |: )" + message) as err:
        imcs.load_imcs(path, verbose=False)
    assert not isinstance(err.value, imcs.UnlabeledSplitError)
    # The message says what an IMCS file holds.
    text = str(err.value)
    if "expected IMCS records" in text:
        assert "keyed by example_id" in text and "'dialogue' list of turns" in text
        assert "'diagnosis'" in text


def test_turns_without_labels_are_the_unlabeled_input_whatever_the_file_name(tmp_path):
    path = write(tmp_path, "IMCS-V2_test.json", {"7": {"self_report": "x", "dialogue": [
        {"sentence_id": "1", "speaker": "医生", "sentence": "你好"}]}})
    with pytest.raises(imcs.UnlabeledSplitError,
                       match=r"IMCS-V2_test.json, example_id=7: .*no labels"):
        imcs.load_imcs(path, verbose=False)


def test_invalid_json_names_the_file_and_position(tmp_path):
    path = tmp_path / "IMCS-V2_train.json"
    path.write_text('{"1": {"diagnosis": "x",,}}', encoding="utf-8")
    with pytest.raises(imcs.ImcsFormatError, match=r"IMCS-V2_train.json: invalid JSON at line 1"):
        imcs.load_imcs(str(path))


@pytest.mark.parametrize("norms,types,label", [
    (["咳嗽"], ["1"], 1),
    (["咳嗽"], ["0"], 0),            # negated: "不咳嗽"
    (["咳嗽"], ["2"], 0),            # uncertain
    (["咳嗽", "咳嗽"], ["0", "1"], 1),  # repeated norm: 1 beats 0
    (["咳嗽", "咳嗽"], ["2", "0"], 0),  # 0 beats 2: still not present
    (["咳嗽", "发热"], ["0", "1"], 1),
    ([], [], 0),
])
def test_symptom_label_rule(norms, types, label):
    assert imcs.symptom_label(turn(1, norms=norms, types=types)) == label


def test_integer_symptom_types_are_accepted(tmp_path):
    rec = record(turns=[turn(1, types=(1,)), turn(2, types=(0,))])
    dialogues = imcs.load_imcs(write(tmp_path, "IMCS-V2_train.json", {"5": rec}), verbose=False)["train"]
    assert imcs.to_examples(dialogues, "symptom")["label"].tolist() == [1, 0]


def test_resolve_symptoms_priority():
    assert imcs.resolve_symptoms(["a", "a", "b", "b", "c"], ["2", "0", "2", "1", "2"]) == \
        {"a": "0", "b": "1", "c": "2"}


def test_to_examples_for_each_task(tmp_path):
    rec = record("小儿腹泻", turns=[turn(1, "医生", "拉肚子吗？", "Request-Symptom", ["腹泻"], ["1"]),
                                 turn(2, "患者", "不拉肚子", "Inform-Symptom", ["腹泻"], ["0"]),
                                 turn(3, "医生", "考虑是小儿腹泻", "Diagnose", [], [])])
    dialogues = imcs.load_imcs(write(tmp_path, "IMCS-V2_train.json", {"9": rec}), verbose=False)["train"]
    sx = imcs.to_examples(dialogues, "symptom")
    assert list(sx.columns) == ["example_id", "split", "sentence_id", "speaker", "text", "label"]
    assert sx["split"].tolist() == ["train"] * 3
    assert sx["label"].tolist() == [1, 0, 0]
    assert sx["sentence_id"].tolist() == ["1", "2", "3"]
    acts = imcs.to_examples(dialogues, "dialogue-act")["label"].tolist()
    assert acts == [imcs.DIALOGUE_ACTS.index(a) for a in ("Request-Symptom", "Inform-Symptom", "Diagnose")]
    dx = imcs.to_examples(dialogues, "diagnosis")
    assert len(dx) == 1 and dx["sentence_id"].tolist() == [""]
    assert dx["label"].tolist() == [imcs.DIAGNOSES.index("小儿腹泻")]
    assert dx["text"][0].startswith("宝宝发烧两天了。拉肚子吗？")
    with pytest.raises(ValueError, match="unknown task 'ner'"):
        imcs.to_examples(dialogues, "ner")


def raw_sample():
    """The embedded sample's split files, read with json alone: {split: {example_id: record}}."""
    out = {}
    for split in ("train", "dev", "test"):
        with open(os.path.join(imcs_sample(), f"IMCS-V2_{split}.json"), encoding="utf-8") as f:
            out[split] = json.load(f)
    return out


@pytest.mark.parametrize("task", ["symptom", "diagnosis"])
def test_to_examples_takes_load_imcs_mapping_and_records_the_split(task):
    raw = raw_sample()
    examples = imcs.to_examples(imcs.load_imcs(imcs_sample(), verbose=False), task)
    assert list(examples.columns) == ["example_id", "split", "sentence_id", "speaker", "text",
                                      "label"]
    total = 0
    for split, records in raw.items():
        rows = examples[examples["split"] == split]
        per_dialogue = {eid: len(r["dialogue"]) if task == "symptom" else 1
                        for eid, r in records.items() if r["dialogue"]}
        assert rows["example_id"].value_counts().to_dict() == per_dialogue
        total += sum(per_dialogue.values())
        if task == "symptom":
            assert rows["text"].tolist() == [t["sentence"] for r in records.values()
                                             for t in r["dialogue"]]
            # Hand rule: a "1" anywhere in symptom_type wins the 1 > 0 > 2 resolution.
            assert rows["label"].tolist() == [int("1" in map(str, t["symptom_type"]))
                                              for r in records.values() for t in r["dialogue"]]
        else:
            assert rows["label"].tolist() == [imcs.DIAGNOSES.index(r["diagnosis"])
                                              for r in records.values() if r["dialogue"]]
    assert len(examples) == total


def test_to_examples_refuses_other_inputs_saying_what_to_pass(tmp_path):
    path = write(tmp_path, "IMCS-V2_train.json", {"9": record()})
    dialogues = imcs.load_imcs(path, verbose=False)
    usage = r"pass a list of Dialogue or the \{split: \[Dialogue\]\} mapping returned by load_imcs"
    for bad in ("IMCS-V2_train.json", ["a", "b"], [{"dialogue": []}], dialogues["train"][0], 3,
                {"train": "x"}):
        with pytest.raises(TypeError, match=usage):
            imcs.to_examples(bad, "symptom")
    assert len(imcs.to_examples(tuple(dialogues["train"]), "symptom")) == 2


def test_embedded_sample_has_the_schema_and_all_acts():
    splits = imcs.load_imcs(imcs_sample(), verbose=False)
    assert {len(splits[s]) for s in ("train", "dev", "test")} == {320, 60, 100}
    acts = {t["dialogue_act"] for d in splits["train"] for t in d.turns}
    assert acts == set(imcs.DIALOGUE_ACTS)
    assert {d.diagnosis for d in splits["train"]} == set(imcs.DIAGNOSES)
    types = {s for d in splits["train"] for t in d.turns for s in t["symptom_type"]}
    assert types == {"0", "1", "2"}
    negated = [t["sentence"] for d in splits["train"] for t in d.turns
               if t["symptom_type"] == ["0"] and t["sentence"].startswith("不")]
    assert negated  # "不咳嗽"-style sentences labelled absent


def imcs_sample():
    return resources.path("imcs_sample")


PROBLEMS = os.path.join(os.path.dirname(__file__), "fixtures", "imcs", "problems")


def test_a_lenient_load_of_good_data_is_the_run_s():
    strict = imcs.load_imcs(imcs_sample(), verbose=False)
    problems, notes = [], []
    lenient = imcs.load_imcs(imcs_sample(), verbose=False, notes=notes, problems=problems)
    assert problems == [] and notes == [] and lenient == strict


def test_a_lenient_load_skips_each_bad_record_and_a_run_stops_at_the_first():
    path = os.path.join(PROBLEMS, "IMCS-V2_train.json")
    problems = []
    dialogues, skipped = imcs.load_split_file(path, problems)
    with open(path, encoding="utf-8") as f:
        records = json.load(f)
    # 103, 104 and 105 are spoiled (test_check_dialogues.py lists why), 106 has no turns.
    assert [d.example_id for d in dialogues] == [eid for eid in records
                                                 if eid not in ("103", "104", "105", "106")]
    assert skipped == 1 and len(problems) == 5
    # The repeated key is the lenient load's own finding; a run raises the next problem.
    assert problems[0].startswith("IMCS-V2_train.json, example_id=101: given 2 times")
    with pytest.raises(imcs.ImcsFormatError) as err:
        imcs.load_split_file(path)
    assert str(err.value) == problems[1]


def test_a_file_of_a_folder_that_is_not_imcs_is_a_problem_and_the_others_load(tmp_path):
    write(tmp_path, "IMCS-V2_train.json", {"1": record()})
    write(tmp_path, "IMCS-V2_dev.json", [record()])
    problems = []
    splits = imcs.load_imcs(str(tmp_path), verbose=False, problems=problems)
    assert list(splits) == ["dev", "train"] and splits["dev"] == []
    assert problems == ["IMCS-V2_dev.json: the top level is a JSON array; " + imcs.EXPECTED]


def test_a_single_file_is_train_with_a_seeded_test_split_held_out(tmp_path):
    path = write(tmp_path, "IMCS-V2_train.json", {str(k): record() for k in range(10)})
    notes = []
    splits = imcs.load_imcs_splits(path, seed=0, notes=notes)
    assert list(splits) == ["train", "test"] and [len(s) for s in splits.values()] == [8, 2]
    ids = [d.example_id for s in splits.values() for d in s]
    assert sorted(ids) == sorted(str(k) for k in range(10))
    assert {d.split for d in splits["train"]} == {"train"}
    assert {d.split for d in splits["test"]} == {"test"}
    assert notes == ["no test split: held out 2 of 10 training dialogues (20%, seeded) as test"]
    again = imcs.load_imcs_splits(path, seed=0)
    assert [d.example_id for d in again["test"]] == [d.example_id for d in splits["test"]]


def test_a_single_file_is_the_whole_set_whatever_its_name(tmp_path):
    for split in ("dev", "test"):
        path = write(tmp_path, f"IMCS-V2_{split}.json", {str(k): record() for k in range(5)})
        notes = []
        splits = imcs.load_imcs_splits(path, seed=0, notes=notes)
        assert [len(s) for s in splits.values()] == [4, 1]
        assert notes[0] == (f"IMCS-V2_{split}.json: a single file is read as the whole set, "
                            f"although its name says '{split}' (to use it as the {split} "
                            "split, give the folder that holds it and a train file)")
    # A name that names no split: the training dialogues.
    path = write(tmp_path, "dialogues.json", {str(k): record() for k in range(5)})
    splits = imcs.load_imcs_splits(path, seed=0)
    assert [len(s) for s in splits.values()] == [4, 1]
    assert {d.split for d in splits["train"]} == {"train"}


def test_a_folder_with_every_split_is_read_as_it_is():
    notes = []
    splits = imcs.load_imcs_splits(imcs_sample(), seed=0, notes=notes)
    assert splits == {s: v for s, v in imcs.load_imcs(imcs_sample(), verbose=False).items()}
    assert list(splits) == ["train", "dev", "test"] and notes == []
