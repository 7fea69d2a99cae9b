"""The image task across sites (the sites that tffre.tasks.images.RECIPE derives): two
sites of the embedded sample, deployed in-process (a FakeGrid), reach the local executor's
final weights (BatchNorm's statistics included) for FedCB; the deployed macro-F1 is
sklearn's on the pooled predictions; a site with other classes is refused in one line; a
site's data is read and checked as a run reads and checks it.

FedAvg's run over the same sites is opt-in (``TFFRE_DEPLOY_EQUALITY=1``, with the other
opt-in deployment equalities): the sites' code, their BatchNorm statistics and the
refusal are FedCB's run's too, and FedAvg's deployed rounds equal the local executor's in
the suite on the tiny task (``tests/tffre/deploy/test_flower_round.py``). Each algorithm
here traces ResNet-18's client loop at two sites and in the reference (FedAvg's run
adds about 20 s to the process's 80 s).

The reference is the simulation's: the model, loss and FedCB concepts of the task's own
``prepare``, the sites' arrays read by the loader (tffre.data.image_sets.load_oct_c8), the
local executor (builder.build_algorithm) with hyperparameters resolved as ``run`` resolves
them. No deployment code builds it.

ResNet-18 trains only with oneDNN off (TF 2.14 corrupts memory on a batch of another size,
DEVELOPERS.md), which must be set before TensorFlow is imported: the deployments and the
reference run in one fresh process (:func:`worker`, the task's environment), whose
results the tests read.
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tffre.data.image_sets import load_oct_c8
from tffre.deploy.tasks import DeployJob
from tffre.tasks import images
from tffre.tasks.sites import SiteDataError

HERE = os.path.dirname(os.path.abspath(__file__))
#: The deployment's half of the image recipe.
IMAGE_SITES = images.TASK.sites()
SIZE, WIDTH, ROUNDS = 8, 2, 2
CLASSES = sorted(os.listdir(os.path.join(images.SAMPLE_DIR, "train")))
#: Site a: 3 training images per class (24: full batches of 8); site b: 2 per class and 3
#: more (19: a last batch of 3, BatchNorm's statistics of a smaller batch).
SITES = {"a": (0, 3, 0), "b": (3, 5, 3)}
#: The algorithms the fresh process deploys; FedCB's run holds site c (other classes).
ALGORITHMS = ("FedAvg", "FedCB") if os.environ.get("TFFRE_DEPLOY_EQUALITY") == "1" \
    else ("FedCB",)
REFUSED_IN = "FedCB"
RUN = {"dataset": "oct-c8", "image-size": SIZE, "resnet-width": WIDTH, "batch-size": 8,
       "learning-rate": 0.05, "num-epochs": 1, "num-iters": 3, "seed": 0}


def site_folder(root, name, first, last, extra, rename=None):
    """An OCT-C8 folder of the sample's images: per class, training images [first, last)
    (the first class ``extra`` more), one val and two test images; ``rename``: {class: new
    name} for a site whose classes differ."""
    for split, take in (("train", None), ("val", (first // 3, first // 3 + 1)),
                        ("test", (first // 3 * 2, first // 3 * 2 + 2))):
        for k, label in enumerate(CLASSES):
            source = os.path.join(images.SAMPLE_DIR, split, label)
            files = sorted(os.listdir(source))
            lo, hi = take or (first, last + (extra if k == 0 else 0))
            target = os.path.join(root, name, split, (rename or {}).get(label, label))
            os.makedirs(target)
            for f in files[lo:hi]:
                shutil.copy(os.path.join(source, f), target)
    return os.path.join(root, name)


def concept_file(root):
    path = os.path.join(root, "concepts.tsv")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{c}\ta retina with {c.replace('_', ' ')}\n" for c in CLASSES)
    return path


# --- the fresh process ---

def deploy(root, name, folders, concepts, log):
    """``name`` deployed on ``folders`` ({site: folder}) through a FakeGrid; the out folder."""
    from deploy_fakes import FakeGrid, run_config
    from tffre.deploy.client_app import make_client_app
    from tffre.deploy.client_app import NodeRuntime
    from tffre.deploy.server_app import run_server
    task = images.TASK.sites()
    nodes = {s: (make_client_app(NodeRuntime(task)),
                 {"site": s, "data": folder, "state-dir": os.path.join(root, name, s)})
             for s, folder in folders.items()}
    out = os.path.join(root, name, "out")
    run_server(FakeGrid(nodes), run_config(name, out, **{
        **RUN, "num-rounds": ROUNDS, "eval-every": ROUNDS, "concept-file": concepts}),
        task=task, log=log)
    return out


def reference(root, name, folders, concepts):
    """The local executor's final state over the sites (name order) from the simulation's
    model, loss, concepts and hyperparameters; its initial weights, the model it trains and
    the sites' arrays."""
    import tensorflow as tf
    from tffre import builder
    from tffre import config as config_lib
    from tffre.data import FederatedData
    from tffre.definition import TaskContext
    from tffre.runner.loop import data_seed
    from tffre.runner.processes import pretrained_weights
    sites = sorted(folders)
    cfg = config_lib.resolve({
        **{k.replace("-", "_"): v for k, v in RUN.items()}, "algorithm": name,
        "data": folders[sites[0]], "clients": 2, "clients_per_round": 2, "partition": "iid",
        "concept_file": concepts, "out": os.path.join(root, "sim")})
    sim = images.TASK.prepare(cfg)
    arrays = {s: load_oct_c8(folders[s], (SIZE, SIZE))[0] for s in sites}
    data = FederatedData({s: {"train": arrays[s]["train"]} for s in sites},
                         num_classes=len(CLASSES))
    context = TaskContext(num_clients=2, clients_per_round=2, concepts=tuple(sim.concepts),
                          prompts=sim.prompts)
    tf.keras.utils.set_random_seed(cfg.run.seed)
    process = builder.build_algorithm(name, sim.model.model_fn, loss=sim.model.loss,
                                      input_spec=data.element_spec(), executor="local",
                                      context=context, hparams=cfg.hparams[name])
    tf.keras.utils.set_random_seed(cfg.run.seed)
    initial = pretrained_weights(process.model_fn)
    state = process.set_model_weights(process.initialize(), initial)
    for rnd in range(1, ROUNDS + 1):
        batches = [data.client_dataset(s, "train", batch_size=cfg.run.batch_size,
                                       seed=data_seed(cfg.run.seed, rnd)) for s in sites]
        state = process.next(state, batches, client_ids=sites).state
    return state, initial, process.model_fn, arrays


def pooled_macro_f1(model_fn, weights, arrays):
    """sklearn's macro-F1 over classes 0..K-1 of ``weights``' predictions on every site's
    split, pooled."""
    from sklearn.metrics import f1_score
    from tffre.evaluation import main_output
    model = model_fn()
    weights.assign_weights_to(model)
    out = {}
    for split, key in (("dev", "val"), ("test", "test")):
        x = np.concatenate([a[key][0] for a in arrays.values()])
        y = np.concatenate([a[key][1] for a in arrays.values()])
        pred = np.argmax(main_output(model(x, training=False)).numpy(), axis=-1)
        out[split] = float(f1_score(y, pred, labels=list(range(len(CLASSES))),
                                    average="macro", zero_division=0))
    return out


def worker(root):
    """Each algorithm deployed and its reference, in this (fresh) process: writes
    ``results.json`` and ``<name>.npz`` (deployed and local weights) into ``root``."""
    from tffre.runner.checkpoints import Checkpoints
    concepts = concept_file(root)
    folders = {s: site_folder(root, s, *spec) for s, spec in SITES.items()}
    other = site_folder(root, "c", 0, 2, 0, rename={CLASSES[-1]: "NORMAL"})
    results = {}
    for name in ALGORITHMS:
        lines = []

        def log(line):
            print(line, flush=True)
            lines.append(line)
        # Site c (other classes) takes part in FedCB's run, and must be left out.
        sites = {**folders, "c": other} if name == REFUSED_IN else folders
        out = deploy(root, name, sites, concepts, log)
        want, initial, model_fn, arrays = reference(root, name, folders, concepts)
        got, done = Checkpoints(os.path.join(out, "checkpoints", name)).load_latest(want)
        weights = {}
        for kind, model in (("deployed", got["model"]), ("local", want["model"]),
                            ("initial", initial)):
            for part in ("trainable", "non_trainable"):
                for i, value in enumerate(getattr(model, part)):
                    weights[f"{kind}/{part}/{i}"] = np.asarray(value)
        np.savez(os.path.join(root, f"{name}.npz"), **weights)
        with open(os.path.join(out, "deploy.json")) as f:
            job = DeployJob.from_json(json.load(f)["job"])
        results[name] = {"out": out, "done": done, "log": lines, "job": job.to_json(),
                         "sklearn_f1": pooled_macro_f1(model_fn, got["model"], arrays)}
    with open(os.path.join(root, "results.json"), "w") as f:
        json.dump(results, f)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """The worker's results ({name: ...}) and its folder."""
    root = str(tmp_path_factory.mktemp("image_sites"))
    env = {**os.environ, **images.TASK.environment}   # oneDNN off, as the sites need it
    paths = [HERE, os.path.join(HERE, "..", "deploy"), os.path.join(HERE, "..")]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", "import sys, test_image_sites as t; "
                           "t.worker(sys.argv[1])", root], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-5000:])
    with open(os.path.join(root, "results.json")) as f:
        return json.load(f), root


def equal_weights(root, name):
    """The deployed final weights equal the local executor's, BatchNorm's moving statistics
    (the non-trainable weights) included, and both moved from the initial ones."""
    with np.load(os.path.join(root, f"{name}.npz")) as saved:
        for part in ("trainable", "non_trainable"):
            keys = [n[len("initial/"):] for n in saved.files
                    if n.startswith(f"initial/{part}/")]
            assert keys, part
            for key in keys:
                np.testing.assert_allclose(saved["deployed/" + key], saved["local/" + key],
                                           rtol=1e-5, atol=1e-5, err_msg=key)
            assert max(np.abs(saved["local/" + k] - saved["initial/" + k]).max()
                       for k in keys) > 1e-3, part


@pytest.mark.skipif("FedAvg" not in ALGORITHMS,
                    reason="opt-in: set TFFRE_DEPLOY_EQUALITY=1 (about 20 s)")
def test_fedavg_across_sites_equals_the_local_executor(deployed):
    results, root = deployed
    assert results["FedAvg"]["done"] == ROUNDS
    equal_weights(root, "FedAvg")


def test_fedcb_across_sites_equals_the_local_executor(deployed):
    """FedCB: the server's concept file gives the concepts (the sites read none), in the
    image prompts, as a run's prepare gives them."""
    results, root = deployed
    job = DeployJob.from_json(results["FedCB"]["job"])
    assert job.concepts == tuple(f"a retina with {c.replace('_', ' ')}" for c in CLASSES)
    assert results["FedCB"]["done"] == ROUNDS
    equal_weights(root, "FedCB")
    rows = pd.read_csv(os.path.join(results["FedCB"]["out"], "metrics.csv"))
    assert list(rows["clients"]) == ["a b"] * ROUNDS   # site c refused: its classes differ


def test_deployed_macro_f1_is_sklearns_on_the_pooled_predictions(deployed):
    results, _ = deployed
    for name in ALGORITHMS:
        last = pd.read_csv(os.path.join(results[name]["out"], "metrics.csv")).iloc[-1]
        for split, f1 in results[name]["sklearn_f1"].items():
            assert last[f"{split}_f1"] == pytest.approx(f1, abs=1e-9), (name, split)


def test_a_site_with_other_classes_is_refused_in_one_line(deployed):
    """Site c's classes differ from the first site's: the server says so in one line when
    the sites agree, and c takes part in no round (each round names why)."""
    results, _ = deployed
    log = results[REFUSED_IN]["log"]
    lines = [line for line in log if line.startswith("site c (node")]
    assert len(lines) == 1 and "\n" not in lines[0], log
    assert "its labels" in lines[0] and "NORMAL" in lines[0] and "takes no part" in lines[0]
    assert DeployJob.from_json(results[REFUSED_IN]["job"]).num_clients == 2
    rows = pd.read_csv(os.path.join(results[REFUSED_IN]["out"], "metrics.csv"))
    assert list(rows["missing_clients"]) == ["c"] * ROUNDS
    assert all(r.startswith("c: ") and "differ" in r for r in rows["missing_reasons"])


# --- a site's data, in this process (no training) ---

def job(dataset="oct-c8", **facts):
    return DeployJob(task="images", dataset=dataset, algorithm="FedAvg", hparams={},
                     options={"image_size": SIZE, "resnet_width": WIDTH,
                              "small_input": False}, batch_size=8, seed=3, **facts)


def test_a_site_reads_its_folder_as_a_run_reads_it(tmp_path):
    """OCT-C8's split folders, and Kvasir's class folders split with the job's seed: the
    loader's arrays, the run's image size; the survey lists the same without decoding."""
    from tffre.data.image_sets import load_kvasir
    folder = site_folder(str(tmp_path), "a", 0, 3, 0)
    flat = os.path.join(folder, "train")      # class folders only: Kvasir's layout
    for dataset, path, (want, _) in (("oct-c8", folder, load_oct_c8(folder, (SIZE, SIZE))),
                                     ("kvasir", flat, load_kvasir(flat, (SIZE, SIZE), 3))):
        site = {"site": "a", "data": path}
        facts = IMAGE_SITES.survey(job(dataset), site)
        assert facts == {"labels": CLASSES, "examples": len(want["train"][1])}
        data = IMAGE_SITES.site_data(job(dataset, labels=tuple(CLASSES)), site)
        for got, split in ((data.train, "train"), (data.held_out["dev"], "val"),
                           (data.held_out["test"], "test")):
            np.testing.assert_array_equal(got[0], want[split][0])
            np.testing.assert_array_equal(got[1], want[split][1])
        assert data.train[0].shape[1:] == (SIZE, SIZE, 3)


def test_a_site_checks_its_folder_as_the_data_check_does(tmp_path):
    folder = site_folder(str(tmp_path), "a", 0, 3, 0)
    assert IMAGE_SITES.check_site({"data": folder}, "oct-c8") == \
        f"{folder}: oct-c8, train 24, val 8, test 16 examples"
    # Without --dataset the layout decides: split folders are OCT-C8's.
    assert IMAGE_SITES.check_site({"data": folder}).startswith(f"{folder}: oct-c8,")
    os.remove(os.path.join(folder, "val", CLASSES[0], sorted(os.listdir(
        os.path.join(folder, "val", CLASSES[0])))[0]))
    with pytest.raises(SiteDataError, match="class folder has no images.*see: python -m "
                       "tffre data check --dataset oct-c8") as err:
        IMAGE_SITES.check_site({"data": folder}, "oct-c8")
    assert "\n" not in str(err.value)
    with pytest.raises(SiteDataError, match="no such folder"):
        IMAGE_SITES.survey(job(), {"data": str(tmp_path / "missing")})


def test_a_site_whose_classes_differ_from_the_job_is_refused(tmp_path):
    folder = site_folder(str(tmp_path), "c", 0, 2, 0, rename={CLASSES[-1]: "NORMAL"})
    with pytest.raises(SiteDataError, match="differ from the run's"):
        IMAGE_SITES.site_data(job(labels=tuple(CLASSES)), {"data": folder})
