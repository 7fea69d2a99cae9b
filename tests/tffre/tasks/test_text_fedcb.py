"""FedCB on text: relation descriptions and IMCS diagnoses as class concepts,
from the command line."""

import json

import pandas as pd

from tffre import cli
from tffre.data.imcs_dialogues import DIAGNOSES
from tiny_encoder import make_encoder_folder
from test_relation_task import write_splits


def test_fedcb_on_relations_with_a_concept_file(tmp_path):
    encoder = make_encoder_folder(str(tmp_path / "enc"), weights="safetensors")[0]
    data = write_splits(str(tmp_path / "re"))
    concepts = tmp_path / "relations.json"
    concepts.write_text(json.dumps({"false": "no relation", "treats": "the drug treats the "
                                    "problem", "causes": "the drug causes the problem"}))
    out = tmp_path / "out"
    code = cli.run_main(["--dataset", "jsonl", "--data", data, "--encoder", encoder,
                         "--concept-encoder", encoder, "--concept-file", str(concepts),
                         "--algorithm", "fedcb", "--clients", "3", "--clients-per-round", "2",
                         "--num-rounds", "1", "--num-epochs", "1", "--num-iters", "2",
                         "--max-len", "24", "--executor", "local", "--no-progress",
                         "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    given = summary["task_context"]
    # The concepts in label order (the negative label first), with the text templates.
    assert given["concepts"] == ["no relation", "the drug causes the problem",
                                 "the drug treats the problem"] == \
        [json.loads(concepts.read_text())[label] for label in summary["labels"]]
    assert given["prompts"] == "text"
    assert pd.read_csv(out / "metrics.csv")["test_f1"].notna().all()


def test_fedcb_on_imcs_diagnosis(tmp_path):
    out = tmp_path / "out"
    code = cli.run_main(["--dataset", "imcs", "--task", "diagnosis", "--algorithm",
                         "fedcb", "--clients", "3", "--clients-per-round", "2",
                         "--num-rounds", "1", "--num-epochs", "1", "--num-iters", "2",
                         "--max-len", "24", "--lstm-units", "8", "--executor", "local",
                         "--no-progress", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    concepts = summary["task_context"]["concepts"]
    assert len(concepts) == len(DIAGNOSES) and concepts[DIAGNOSES.index("新生儿黄疸")] == \
        "neonatal jaundice"
    assert set(pd.read_csv(out / "metrics.csv")["algorithm"]) == {"FedCB"}
