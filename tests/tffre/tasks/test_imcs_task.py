"""The IMCS task's splits: a single training file is trained on with a seeded test split held
out, as the data check reports it."""

import json
import os

from tffre import cli, resources
from tffre.tasks import imcs as imcs_task


def test_a_single_file_run_holds_out_the_test_split_the_data_check_reports(tmp_path, capsys):
    path = os.path.join(resources.path("imcs_sample"), "IMCS-V2_train.json")
    out = tmp_path / "out"
    code = cli.run_main(["--dataset", "imcs", "--data", path, "--model", "mean-logistic",
                         "--algorithm", "fedavgs", "--clients", "3", "--clients-per-round", "2",
                         "--num-rounds", "1", "--num-iters", "1", "--executor", "local",
                         "--checkpoint-every", "0", "--no-progress", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    with open(path, encoding="utf-8") as f:
        total = len(json.load(f))
    held = round(total * 0.2)
    assert summary["data_notes"] == [
        f"no test split: held out {held} of {total} training dialogues (20%, seeded) as test"]
    printed = capsys.readouterr().out
    assert all(f"note: {n}" in printed for n in summary["data_notes"])
    assert summary["eval_split"] == "test" and summary["dev_split"] is None
    # The task's check (what ``data check --dataset imcs --data FILE`` runs).
    report = imcs_task.TASK.check_data("imcs", imcs_task.Options.resolve({"data": path}))
    assert report.notes == summary["data_notes"]
    assert [(s.name, s.labelled) for s in report.splits] == [
        ("train", summary["train_examples"]), ("test", summary["test_examples"])]


def turn(text, status=None):
    """A turn of ``text``; ``status`` ("0"/"1"/"2"): one fever symptom with that status (the
    symptom label is 1 for "1" only), None: no symptom (label 0)."""
    norms, types = (["发热"], [status]) if status else ([], [])
    return {"sentence_id": "1", "speaker": "患者", "sentence": text, "dialogue_act": "Other",
            "symptom_norm": norms, "symptom_type": types}


def write_split(folder, split, dialogues):
    records = {eid: {"diagnosis": "小儿发热", "self_report": "发烧", "dialogue": turns}
               for eid, turns in dialogues.items()}
    with open(os.path.join(folder, f"IMCS-V2_{split}.json"), "w", encoding="utf-8") as f:
        json.dump(records, f, ensure_ascii=False)


def test_the_lookup_baseline_of_a_run_by_hand(tmp_path, capsys):
    """Training sentences: 有发烧 1, 1; 有点发烧 1 and 0 (a tie: 0); 没有发烧 0; 你好 0, 0:
    majority 0 (5 of 8). Test: 有发烧 gold 1 -> 1 hit, 有点发烧 gold 1 -> 0 miss, 发烧两天 gold
    1 (unseen) -> 0 miss, 你好 gold 0 -> 0 hit: lookup 2/4; majority 1/4. Dev: 没有发烧 gold 0
    -> hit, 有发烧 gold 1 -> hit, 咳嗽 (unseen) gold 0 -> hit: 3/3."""
    data = tmp_path / "imcs"
    data.mkdir()
    write_split(data, "train", {"1": [turn("有发烧", "1"), turn("你好")],
                                "2": [turn("有发烧", "1"), turn("有点发烧", "1")],
                                "3": [turn("有点发烧", "2"), turn("没有发烧", "0")],
                                "4": [turn("你好"), turn("好的")]})
    write_split(data, "test", {"5": [turn("有发烧", "1"), turn("有点发烧", "1")],
                               "6": [turn("发烧两天", "1"), turn("你好")]})
    write_split(data, "dev", {"7": [turn("没有发烧", "0"), turn("有发烧", "1"), turn("咳嗽")]})
    out = tmp_path / "out"
    code = cli.run_main(["--dataset", "imcs", "--data", str(data), "--model", "mean-logistic",
                         "--algorithm", "fedavgs", "--clients", "2", "--clients-per-round", "2",
                         "--partition", "iid", "--num-rounds", "1", "--num-iters", "1",
                         "--executor", "local", "--checkpoint-every", "0", "--no-progress",
                         "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["majority_class_test_accuracy"] == 0.25
    assert summary["lookup_test_accuracy"] == 0.5 and summary["lookup_dev_accuracy"] == 1.0
    head = [line for line in capsys.readouterr().out.splitlines() if "majority-class" in line]
    assert head == ["IMCS-V2 symptom (iid, 2 clients): test accuracy at the round of best dev "
                    "accuracy; max over rounds as the paper reports it (chosen on test); "
                    "majority-class baseline 0.2500; lookup baseline 0.5000"]
