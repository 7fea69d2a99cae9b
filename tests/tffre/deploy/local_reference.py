"""The independent reference of the deployment tests: the local executor (``build_algorithm``)
on the same sites (in name order), seed, initial weights and batches as a deployed run."""

import tensorflow as tf

from deploy_fakes import TinyTask

from tffre import builder
from tffre.data import FederatedData
from tffre.runner.loop import data_seed
from tffre.runner.processes import pretrained_weights


def local_run(name, arrays, hparams, rounds, named=False, batch_size=4, seed=0,
              server_data=None):
    """``rounds`` rounds of ``name`` with the local executor over ``arrays`` ({site: (x, y)});
    returns (final server state, [each round's metrics]). ``server_data``: D_v's (x, y)
    (FedED), batched by ``batch_size`` as the runner batches it."""
    from tffre.definition import TaskContext
    task = TinyTask(arrays, named=named)
    context = None if server_data is None else TaskContext(
        num_clients=len(arrays), clients_per_round=len(arrays),
        server_data=tf.data.Dataset.from_tensor_slices(tuple(server_data)).batch(batch_size))
    tf.keras.utils.set_random_seed(seed)
    process = builder.build_algorithm(name, task.model_fn(), loss=task.loss(),
                                      input_spec=task.model(None, None).input_spec,
                                      executor="local", context=context, **hparams)
    tf.keras.utils.set_random_seed(seed)
    state = process.set_model_weights(process.initialize(),
                                      pretrained_weights(process.model_fn))
    sites = sorted(arrays)
    data = FederatedData({s: {"train": arrays[s]} for s in sites}, num_classes=3)
    metrics = []
    for rnd in range(1, rounds + 1):
        datasets = [data.client_dataset(s, "train", batch_size=batch_size,
                                        seed=data_seed(seed, rnd)) for s in sites]
        output = process.next(state, datasets, client_ids=sites)
        state = output.state
        metrics.append(output.metrics)
    return state, metrics
