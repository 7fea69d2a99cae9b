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
