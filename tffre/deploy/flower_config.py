"""A deployed run's settings: ``python -m tffre run``'s options plus the deployment's own.

The ServerApp reads Flower's run config (``flwr run ... --run-config 'k=v'``).
Its keys are ``python -m tffre run``'s option names with dashes
(``learning-rate``, ``num-rounds``, ``algorithm``, ``dataset``, ``out``...),
resolved and checked by :func:`tffre.config.resolve` exactly as the command
line's, plus :class:`DeploySettings` (``min-nodes``, ``round-timeout``,
``secagg``...). An empty string means "not set" (Flower's run config has no
None). Flower only accepts override keys its app's pyproject.toml lists:
:mod:`tffre.deploy.project` writes them all.

Options that name the server's files keep their meaning there (``out``,
``encoder``: the server's copy of the encoder, for the initial weights and the
bundle's tokenizer); ``data`` is the sites' business and ignored. ``server-data``
names the server's labelled set D_v (FedED) on the server's machine;
``server-fraction`` is refused: the server holds no training data to split.
"""

import dataclasses
from typing import Optional

from tffre.hparams import (Params, boolean, non_negative_int, optional, param, positive_float,
                           positive_int, text)

#: Options of ``python -m tffre run`` a deployment does not take (its sites are its clients,
#: their data is their own). ``alpha`` is taken: the synthetic task generates its data from
#: it (a partition's alpha is unused, since a deployment partitions nothing).
IGNORED = ("clients", "clients_per_round", "client_fraction", "executor",
           "max_parallel_clients", "client_workers", "loop", "centralised", "no_progress",
           "partition", "data", "config")


@dataclasses.dataclass(frozen=True)
class DeploySettings(Params):
    """The deployment's own settings (see each field's help)."""

    min_nodes: int = param(2, positive_int, "sites whose uploads a round needs; with fewer "
                           "answers the round is retried, then the run stops")
    start_timeout: float = param(600.0, positive_float, "seconds to wait at the start for "
                                 "min-nodes sites to say hello")
    round_timeout: float = param(1800.0, positive_float, "seconds to wait for the sites' "
                                 "replies to one message; a site that does not answer in time "
                                 "is named in metrics.csv's missing_clients")
    round_retries: int = param(3, non_negative_int, "times a round with fewer than min-nodes "
                               "uploads is tried again before the run stops")
    poll: float = param(0.1, positive_float, "seconds between the server's pulls for replies")
    secagg: bool = param(False, boolean, "sum the uploads with Flower's SecAgg+ (Bell et al. "
                         "2020): the server learns only the sum (sum aggregations only)",
                         flag=True)
    secagg_max_weight: float = param(1000.0, positive_float, "SecAgg+: the largest client "
                                     "weight (examples) expected; a client's contribution is "
                                     "divided by it before quantization")
    secagg_clip: float = param(8.0, positive_float, "SecAgg+: contributions (after division "
                               "by secagg-max-weight) must lie in [-clip, clip]")
    secagg_shares: float = param(1.0, positive_float, "SecAgg+: key shares per client, as a "
                                 "fraction of the round's clients (<= 1) or a count (> 1)")
    secagg_threshold: float = param(0.5, positive_float, "SecAgg+: shares needed to "
                                    "reconstruct a dropped client's mask, as a fraction of the "
                                    "shares (<= 1) or a count (> 1)")
    deploy_task: Optional[str] = param(None, optional(text), "what the sites load: "
                                       "module:attribute of a task of your own (default: "
                                       "the dataset's task)")

    def check(self):
        if self.secagg and self.min_nodes < 2:
            raise ValueError("secagg needs min-nodes >= 2 (SecAgg+ needs two clients)")


def split_run_config(run_config):
    """({tffre run option: value}, {deployment setting: value}) of a Flower run config; keys
    with dashes or underscores, "" meaning unset."""
    from tffre import config as config_lib
    options, deploy = {}, {}
    known = config_lib.vocabulary()
    ours = set(DeploySettings.names())
    for key, value in dict(run_config).items():
        name = str(key).replace("-", "_")
        if value == "" or value is None or name in IGNORED:
            continue
        if name in ours:
            deploy[name] = value
        elif name in known:
            options[name] = value
        else:
            raise ValueError(f"run config: unknown key {key!r}")
    return options, deploy


def _check_server_data(options):
    """A one-line error when the algorithm needs D_v (FedED) and ``server-data`` is not given
    (before :func:`tffre.config.resolve`, whose message offers server-fraction)."""
    from tffre import registry
    if "server_data" in options:
        return
    for name in str(options.get("algorithm", "")).split(","):
        try:
            needs = registry.get_spec(name.strip()).load_definition().needs_server_data
        except (KeyError, ValueError):
            continue   # an unknown name: tffre.config.resolve says so
        if needs:
            raise ValueError(f"run config: {name.strip()} needs the server's labelled set D_v: "
                             f"give server-data (a file or folder of the dataset's format at "
                             f"the server)")


def resolve_run(run_config):
    """(:class:`tffre.tasks.RunConfig`, :class:`DeploySettings`) of a Flower run config; a
    one-line ValueError naming the key for a bad value."""
    from tffre import config as config_lib
    from tffre import tasks
    options, deploy = split_run_config(run_config)
    try:
        task = tasks.task_of(str(options.get("dataset", "synthetic")))
    except ValueError as err:
        raise config_lib.ConfigError(f"run config: dataset: {err}") from None
    if "server_fraction" in options:
        raise config_lib.ConfigError(
            "run config: server-fraction: a deployment's server holds no training data to "
            "split; give server-data, D_v's file or folder at the server")
    _check_server_data(options)
    if "data" in task.Options.names():
        options["data"] = "sample"   # the server reads no data: each site names its own
    cfg = config_lib.resolve(options)
    if len(cfg.algorithms) != 1:
        raise ValueError(f"run config: algorithm: a deployment runs one algorithm, got "
                         f"{','.join(cfg.algorithms)}")
    return cfg, DeploySettings.resolve(deploy)
