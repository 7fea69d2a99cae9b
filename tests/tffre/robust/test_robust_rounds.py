"""--robust in a round: the registry rows with a robust rule in place of the mean, on the local
and TFF executors, against numpy's median of the clients' deltas; refusals in one line."""

import numpy as np
import pytest
import tensorflow_federated as tff

from tffre import build_algorithm, registry
from tffre.definition import TaskContext
from tffre.faults import Fault, UploadFaults
from tffre.federation.split_round import sum_refusal
from tiny import INPUT_SPEC, client_arrays, initial_weights, tiny_model, to_datasets

IDS = ["a", "b", "c", "d", "e"]
COMMON = dict(input_spec=INPUT_SPEC, learning_rate=0.1, num_epochs=1, num_iters=None,
              context=TaskContext(num_clients=5, clients_per_round=5))


def start(process):
    return process.set_model_weights(process.initialize(), tff.learning.models.ModelWeights(
        trainable=initial_weights(), non_trainable=[]))


def weights(process, state):
    return [np.asarray(w, np.float64) for w in process.get_model_weights(state).trainable]


@pytest.fixture(scope="module")
def deltas(loss_module):
    """Each client's delta theta_t - theta_k, from a one-client FedAvg round (server step 1)."""
    datasets = to_datasets(client_arrays([9, 6, 5, 8, 7], seed=3))
    plain = build_algorithm("fedavg", tiny_model, loss=loss_module, executor="local", **COMMON)
    w0 = [np.float64(w) for w in initial_weights()]
    out = []
    for k, ds in enumerate(datasets):
        alone = weights(plain, plain.next(start(plain), [ds], client_ids=[IDS[k]]).state)
        out.append([a - b for a, b in zip(w0, alone)])
    return datasets, w0, out


@pytest.fixture(scope="module")
def loss_module():
    import tensorflow as tf
    return tf.keras.losses.SparseCategoricalCrossentropy()


@pytest.mark.parametrize("executor", ["local", "tff"])
def test_fedavg_with_the_median_is_w0_minus_numpys_median_of_the_deltas(deltas, loss_module,
                                                                         executor):
    datasets, w0, ds = deltas
    process = build_algorithm("fedavg", tiny_model, loss=loss_module, executor=executor,
                              robust="median", **COMMON)
    got = weights(process, process.next(start(process), datasets, client_ids=IDS).state)
    want = [w - np.median(np.stack([d[i] for d in ds]), axis=0) for i, w in enumerate(w0)]
    deviation = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want))
    print(f"median round ({executor}) vs numpy: {deviation:.2e}")
    assert deviation < 1e-6


def test_the_median_holds_against_a_scaled_site_where_the_mean_moves(deltas, loss_module):
    """One site of five sends its delta times -50: the mean moves by its weight times 51
    deltas, the median no further than the honest deltas' spread (Yin et al. 2018)."""
    datasets, w0, ds = deltas
    moved = {}
    for rule in (None, "median"):
        rounds = []
        for faulty in (False, True):
            process = build_algorithm("fedavg", tiny_model, loss=loss_module, executor="local",
                                      robust=rule, **COMMON)
            if faulty:
                process.simulate_faults(UploadFaults(Fault("scale", -50.0), ["b"]))
            rounds.append(weights(process, process.next(start(process), datasets,
                                                        client_ids=IDS).state))
        moved[rule] = max(float(np.max(np.abs(a - b))) for a, b in zip(*rounds))
    honest_spread = max(float(np.max(np.ptp(np.stack([d[i] for d in ds]), axis=0)))
                        for i in range(len(w0)))
    assert 0 < moved["median"] <= honest_spread
    assert moved[None] > 5 * moved["median"]


def test_fedadam_composes_with_krum(deltas, loss_module):
    datasets, _, _ = deltas
    process = build_algorithm("fedadam", tiny_model, loss=loss_module, executor="local",
                              robust="krum", robust_f=1, **COMMON)
    state = process.next(start(process), datasets, client_ids=IDS).state
    assert "server_optimizer" in state and np.all(np.isfinite(weights(process, state)[0]))


def test_refusals_are_one_line(loss_module):
    for name, values, why in [
            ("fedatt", {}, "FedAtt: --robust median: its attention aggregator is its own rule"),
            ("fedavg", {"dp_noise_multiplier": 1.0, "dp_clip": 1.0},
             "DP's noise and accounting assume a sum of clipped updates"),
            ("feded", {}, "it uploads no model delta")]:
        with pytest.raises(ValueError, match=why):
            registry.resolve_hparams(name, robust="median", **values)
    with pytest.raises(ValueError, match=r"FedAvg: --robust krum: .*n > 2f \+ 2"):
        build_algorithm("fedavg", tiny_model, loss=loss_module, executor="local",
                        robust="krum", robust_f=2, **COMMON)


def test_secure_aggregation_refuses_a_robust_round(loss_module):
    from tffre.builder import ModelRecipe, build
    spec = registry.get_spec("fedavg")
    built = build(spec, registry.resolve_hparams("fedavg", robust="trimmed-mean",
                                                 robust_beta=0.2),
                  ModelRecipe(tiny_model, loss=loss_module, input_spec=INPUT_SPEC),
                  COMMON["context"])
    assert "cannot use secure aggregation" in sum_refusal(built.round(), "FedAvg")
