"""The independent reference of the deployment tests: the local executor (``build_algorithm``)
on the same sites (in name order), seed, initial weights and batches as a deployed run."""

import os

import numpy as np
import tensorflow as tf

from deploy_fakes import TinyTask

from tffre import builder
from tffre.data import FederatedData
from tffre.runner.checkpoints import Checkpoints
from tffre.runner.loop import data_seed
from tffre.runner.processes import pretrained_weights


def local_rounds(name, model_fn, loss, input_spec, context, hparams, arrays, *, num_classes,
                 batch_size, seed, rounds, load_pretrained=None):
    """``rounds`` rounds of ``name`` with the local executor over ``arrays`` ({site: (x, y)},
    in name order), from the weights of a model built right after ``set_random_seed(seed)``
    (with ``load_pretrained``'s weights), on batches shuffled as a deployed site shuffles
    them. Returns (final state, the initial weights, [each round's metrics])."""
    tf.keras.utils.set_random_seed(seed)
    process = builder.build_algorithm(name, model_fn, loss=loss, input_spec=input_spec,
                                      executor="local", context=context, **hparams)
    tf.keras.utils.set_random_seed(seed)
    initial = pretrained_weights(process.model_fn, load_pretrained)
    state = process.set_model_weights(process.initialize(), initial)
    sites = sorted(arrays)
    data = FederatedData({s: {"train": arrays[s]} for s in sites}, num_classes=num_classes)
    metrics = []
    for rnd in range(1, rounds + 1):
        datasets = [data.client_dataset(s, "train", batch_size=batch_size,
                                        seed=data_seed(seed, rnd)) for s in sites]
        output = process.next(state, datasets, client_ids=sites)
        state = output.state
        metrics.append(output.metrics)
    return state, initial, metrics


def local_run(name, arrays, hparams, rounds, named=False, batch_size=4, seed=0,
              server_data=None):
    """``rounds`` rounds of ``name`` with the local executor over ``arrays`` ({site: (x, y)});
    returns (final server state, [each round's metrics]). ``server_data``: D_v's (x, y)
    (FedED), batched by ``batch_size`` as the runner batches it."""
    from tffre.definition import TaskContext
    task = TinyTask(arrays, named=named)
    # Every site in every round, as a deployment's context says (a robust rule's buffer).
    context = TaskContext(
        num_clients=len(arrays), clients_per_round=len(arrays),
        server_data=None if server_data is None else
        tf.data.Dataset.from_tensor_slices(tuple(server_data)).batch(batch_size))
    state, _, metrics = local_rounds(
        name, task.model_fn(), task.loss(), task.model(None, None).input_spec, context, hparams,
        arrays, num_classes=3, batch_size=batch_size, seed=seed, rounds=rounds)
    return state, metrics


def simulated_reference(dataset, folders, name, settings, rounds, out):
    """The local executor over a real task's sites, each site's folder read as the simulation
    reads a dataset (``python -m tffre run --data FOLDER``, one client, its whole training
    split): ``rounds`` rounds of ``name`` over the sites in name order, with the simulation's
    model, pretrained weights, hyperparameters, seed and batches. ``settings``: the run's
    options ({option: value}, as ``config.resolve`` takes them). Returns (final state, the
    initial weights, {site: its training arrays})."""
    from tffre import config as config_lib
    from tffre import tasks
    from tffre.definition import TaskContext
    sites = sorted(folders)
    jobs = {}
    for site in sites:
        cfg = config_lib.resolve({"dataset": dataset, "data": folders[site], "algorithm": name,
                                  "clients": 1, "clients_per_round": 1, "partition": "iid",
                                  "out": str(out / site), **settings})
        jobs[site] = tasks.task_of(dataset).prepare(cfg), cfg
    job, cfg = jobs[sites[0]]
    arrays = {s: j.data.clients[j.data.client_ids[0]]["train"] for s, (j, _) in jobs.items()}
    context = TaskContext(num_clients=len(sites), clients_per_round=len(sites),
                          concepts=None if job.concepts is None else tuple(job.concepts),
                          prompts=job.prompts)
    state, initial, _ = prepared_rounds(name, job, cfg, arrays, context, rounds)
    return state, initial, arrays


def prepared_rounds(name, job, cfg, arrays, context, rounds):
    """:func:`local_rounds` of a prepared ``job`` (a :class:`tffre.runner.PreparedTask`) over
    ``arrays``: its model, loss, input spec and pretrained weights, with ``cfg``'s
    hyperparameters of ``name``, batch size and seed."""
    return local_rounds(
        name, job.model.model_fn, job.model.loss, job.data.element_spec(), context,
        cfg.hparams[name].asdict(), arrays, num_classes=job.data.num_classes,
        batch_size=cfg.run.batch_size, seed=cfg.run.seed, rounds=rounds,
        load_pretrained=job.model.load_pretrained)


def sites_reference(out, nodes, rounds, task=None, server_only=None):
    """The local executor over a deployed run's sites, each site's data and the model read by
    the task's own site code (``Sites.site_data``, ``Sites.model``) from the run's job
    (``out/deploy.json``): what the sites agreed on (document-level RE's row limits, fitted to
    every site's documents) is then the same on both sides, as a per-site simulation cannot
    make it. ``nodes``: {site: its node configuration}; ``task``: the sites' task object
    (default the job's); ``server_only``: hyperparameters the server keeps out of the job
    (DP's noise seed). Returns (final state, the initial weights, {site: its training
    arrays})."""
    import json

    from tffre.deploy.tasks import DeployJob, load_task, task_context
    job = DeployJob.from_json(json.loads((out / "deploy.json").read_text())["job"])
    task = task or load_task(job.task)
    sites = sorted(nodes)
    model = task.model(job, nodes[sites[0]])
    arrays = {s: task.site_data(job, nodes[s]).train for s in sites}
    state, initial, _ = local_rounds(
        job.algorithm, model.model_fn, model.loss, model.input_spec, task_context(job),
        dict(job.hparams.asdict(), **(server_only or {})), arrays, num_classes=len(job.labels),
        batch_size=job.batch_size, seed=job.seed, rounds=rounds,
        load_pretrained=model.load_pretrained)
    return state, initial, arrays


def assert_trained_as_local(out, name, want, initial, rounds):
    """The deployed run in ``out`` checkpointed ``rounds`` rounds of algorithm ``name`` whose
    trainable weights equal the local reference's ``want`` (to 1e-5) and moved from
    ``initial`` (the rounds trained)."""
    got, done = Checkpoints(os.path.join(str(out), "checkpoints", name)).load_latest(want)
    assert done == rounds
    for g, w in zip(got["model"].trainable, want["model"].trainable):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert any(np.abs(np.asarray(g) - np.asarray(i)).max() > 1e-4
               for g, i in zip(got["model"].trainable, initial.trainable))
