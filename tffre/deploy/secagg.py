"""Secure aggregation: the round's sums through Flower's SecAgg+ (Bell et al. 2020).

Flower 1.23's ``SecAggPlusWorkflow`` (server) and ``secaggplus_mod`` (client)
compute ``sum_k r_k p_k / sum_k r_k`` of one list of float arrays per client
(``p_k``; ``r_k = num_examples / max_weight``), masked so that the server can
unmask only the total. tffre's rounds aggregate with mergeable accumulators;
where every one of them is a sum (:func:`tffre.federation.split_round.sum_refusal`:
the weighted mean, the statistics' mean, an algorithm's summed predictions, differential
privacy's clipped sum before its noise), a round's accumulator is the sum of
what each client adds, ``c_k = accumulate(zero(), upload_k)``
(:meth:`tffre.federation.split_round.SplitRound.contribution`), and the round's
aggregate is ``report(sum_k c_k)``. So:

* each site computes ``c_k`` and hands SecAgg+ ``p_k = c_k / W`` (``W`` =
  ``secagg-max-weight``, so that every value lies in ``[-C, C]``, ``C`` =
  ``secagg-clip``; a value outside is refused in one line rather than clipped) with
  ``num_examples = 1`` and the workflow's ``max_weight = 1``, so that ``r_k = 1``;
* the server gets the mean of the ``p_k`` over the K sites whose masked vectors were
  summed and multiplies it by ``K W``: ``sum_k c_k``; integer parts (counts) are
  rounded back;
* then ``report`` and ``update`` as in a plain round.

**Quantization error.** SecAgg+ rounds each ``p_k`` value stochastically to a grid of
step ``2C / 2**22`` (unbiased), so each summed value is off by at most
``K W 2C / 2**22`` (``K`` the sites summed; 3.8e-3 for K = 1, W = 1000, C = 8). The
model delta's weighted mean ``sum_k n_k u_k / sum_k n_k`` then differs from the
plain one by about that bound divided by ``sum_k n_k``. Choose ``W`` near the
largest client weight (examples) to make it small.

**Declared ranges.** What an algorithm uploads besides the training sums may lie in a
known range or lack a bound; the algorithm says which
(:meth:`tffre.definition.Definition.upload_ranges`, one
:class:`tffre.definition.UploadRange` per part), and this module names no algorithm. A
value beyond ``[-C W, C W]`` is refused at the site in one line; where the part's values
are declared to lack a bound, the line quotes the declaration (what the values are and
what to use instead).

**What the server holds.** The masked vectors (uniform modulo 2**32) and the sum;
never a site's ``c_k`` or upload: the mod clears the FitRes arrays before they
leave the site. The price: four messages per round instead of one, and no
per-site check (a NaN update is still excluded, by its own site, as in
simulation; a site cannot be refused for what it sends).
"""

import collections
import json

import numpy as np

from tffre.deploy import protocol
from tffre.federation.messages import TRAIN
from tffre.federation.round_driver import TooFewSites
from tffre.federation.split_round import MessageError, from_arrays, to_arrays

FIT_INS_ARRAYS = "fitins.parameters"


def is_fit_ins(content):
    """True for a legacy FitIns message (SecAgg+'s collect stage)."""
    return FIT_INS_ARRAYS in content.array_records


def optional_secaggplus_mod(msg, context, call_next):
    """Flower's ``secaggplus_mod`` for the messages of the SecAgg+ protocol; every other
    message goes straight to the handler."""
    from flwr.client.mod import secaggplus_mod
    from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS
    if msg.metadata.message_type == protocol.MESSAGE_TYPES[TRAIN] and \
            RECORD_KEY_CONFIGS in msg.content.config_records:
        return secaggplus_mod(msg, context, call_next)
    return call_next(msg, context)


def encode(contribution, max_weight, clip, hints=None):
    """``[c / W, ...]`` as float64 arrays, in the accumulator's path order; ValueError naming
    the part when a value is outside ``[-clip, clip]`` (and why it can be, from ``hints``:
    {path prefix: text})."""
    named = to_arrays(contribution)
    out = []
    for name, value in named.items():
        scaled = np.asarray(value, np.float64) / max_weight
        # The value farthest from 0, with its sign (a log-probability's is negative).
        peak = float(scaled.flat[np.argmax(np.abs(scaled))]) if scaled.size else 0.0
        if not np.isfinite(peak) or abs(peak) > clip:
            why = next((h for p, h in (hints or {}).items() if name.startswith(p)), "")
            raise ValueError(f"secure aggregation: {name} reaches {peak * max_weight:g}, "
                             f"beyond secagg-clip x secagg-max-weight = {clip * max_weight:g}; "
                             f"raise secagg-max-weight{why}")
        # At least one dimension: Flower's dequantization adds its offset in place, which a
        # 0-d array (a numpy scalar after arithmetic) silently ignores.
        out.append(np.atleast_1d(scaled))
    return out


def decode(mean, count, max_weight, spec):
    """The accumulator of ``spec`` from SecAgg+'s mean of ``count`` sites' encoded values:
    ``mean * count * W``, integer parts rounded."""
    import tensorflow as tf
    specs = tf.nest.flatten(spec)
    if len(mean) != len(specs):
        raise MessageError(f"secure sum: {len(mean)} arrays, the round's accumulator has "
                           f"{len(specs)}")
    values = []
    for value, s in zip(mean, specs):
        total = np.asarray(value, np.float64) * count * max_weight
        dtype = np.dtype(s.dtype.as_numpy_dtype)
        values.append((np.rint(total) if dtype.kind in "iub" else total).astype(dtype)
                      .reshape(s.shape.as_list()))
    return from_arrays(values, spec, "secure sum")


def client_reply(runtime, msg, context):
    """The site's FitRes in SecAgg+'s collect stage: its encoded contribution (which the mod
    masks, then clears) and the reply config as metrics."""
    from flwr.app import Message
    from flwr.common import Code, FitRes, Status, ndarrays_to_parameters, parameters_to_ndarrays
    from flwr.common import recorddict_compat as compat
    from tffre.federation.site_runtime import site_settings
    fit_ins = compat.recorddict_to_fitins(msg.content, keep_input=True)
    config = dict(fit_ins.config)
    names = json.loads(config.pop("arrays"))
    arrays = collections.OrderedDict(zip(names, parameters_to_ndarrays(fit_ins.parameters)))
    reply, upload = runtime.handle(TRAIN, config, arrays, context.node_config)
    if "error" in reply:   # the mod turns it into an error reply naming the site
        raise ValueError(f"site {reply['site']}: {reply['error']}")
    site = site_settings(context.node_config)
    job = runtime.job_of(config["job"])   # parsed by handle already: the runtime's cached job
    built = runtime.build(job, site)
    definition = built.definition   # its declared upload ranges name what can overflow
    encoded = encode(runtime.contribution(built, upload), float(config["secagg_max_weight"]),
                     float(config["secagg_clip"]),
                     hints=declared_hints(definition.upload_ranges(definition.hparams)))
    fit_res = FitRes(Status(Code.OK, ""), ndarrays_to_parameters(encoded), 1,
                     {k: v for k, v in reply.items() if isinstance(v, (str, int, float))})
    return Message(compat.fitres_to_recorddict(fit_res, keep_input=False), reply_to=msg)


def declared_hints(ranges):
    """{path prefix: why} from an algorithm's declared upload ranges
    (:meth:`tffre.definition.Definition.upload_ranges`): the parts whose values lack a bound,
    and so can leave SecAgg+'s range."""
    return {f"{r.part}/": f"; {r.why_unbounded()}" for r in ranges if not r.bounded}


def range_hints(job):
    """{path prefix: why} a job's contributions can leave SecAgg+'s range, as its algorithm
    declares them under the job's hyperparameters (:func:`declared_hints`)."""
    from tffre.registry import get_spec, resolve_hparams
    definition = get_spec(job.algorithm).load_definition()
    return declared_hints(definition.upload_ranges(resolve_hparams(job.algorithm,
                                                                   job.hparams)))


class _Capture:
    """The legacy Strategy SecAgg+ asks for each site's FitIns and hands the unmasked mean."""

    def __init__(self, fit_ins):
        self.fit_ins = fit_ins
        self.mean, self.sites, self.failures = None, [], []
        self.constants = {}   # node id -> the constants hash its reply names

    # flwr.server.strategy.Strategy's interface (only what the workflow calls)
    def configure_fit(self, server_round, parameters, client_manager):
        return [(proxy, self.fit_ins[proxy.node_id]) for proxy in client_manager.all().values()
                if proxy.node_id in self.fit_ins]

    def aggregate_fit(self, server_round, results, failures):
        from flwr.common import parameters_to_ndarrays
        self.failures = list(failures)
        if results:
            self.mean = parameters_to_ndarrays(results[0][1].parameters)
            self.sites = [str(res.metrics.get("site", proxy.node_id)) for proxy, res in results]
            self.constants = {proxy.node_id: str(res.metrics.get("constants", ""))
                              for proxy, res in results}
        return None, {}


class _FastGrid:
    """A grid whose ``send_and_receive`` polls every ``poll`` seconds (Flower's waits 3 s)."""

    def __init__(self, grid, link):
        self._grid, self._link = grid, link

    def __getattr__(self, name):
        return getattr(self._grid, name)

    def send_and_receive(self, messages, *, timeout=None):
        import time
        ids = {mid for mid in self._grid.push_messages(list(messages)) if mid}
        replies, deadline = [], time.monotonic() + (timeout or float("inf"))
        while ids:
            got = list(self._grid.pull_messages(list(ids)))
            replies += got
            ids -= {m.metadata.reply_to_message_id for m in got}
            if not ids or time.monotonic() >= deadline:
                break
            time.sleep(self._link.poll)
        return replies


class SecureSum:
    """Sums a round's uploads with SecAgg+ (see the module docstring).

    Args:
      settings: the :class:`tffre.deploy.flower_config.DeploySettings` (``secagg_*``).
      grid: the ServerApp's grid (the workflow sends its own messages).
    """

    def __init__(self, settings, grid):
        self.settings = settings
        self.grid = grid

    def workflow(self, timeout):
        from flwr.server.workflow import SecAggPlusWorkflow

        def number(value):   # a fraction of the sites (<= 1) or a count
            return float(value) if value <= 1 else int(value)
        return SecAggPlusWorkflow(number(self.settings.secagg_shares),
                                  number(self.settings.secagg_threshold), max_weight=1.0,
                                  clipping_range=float(self.settings.secagg_clip),
                                  timeout=timeout)

    def round(self, rounds, parts, job, state, rnd, layout, sites, start):
        """One round through SecAgg+ (:meth:`tffre.federation.round_driver.FederatedRounds.train`'s
        secure branch)."""
        from flwr.app import ArrayRecord, ConfigRecord, Context, RecordDict
        from flwr.common import FitIns, ndarrays_to_parameters
        from flwr.server.client_manager import SimpleClientManager
        from flwr.server.compat.grid_client_proxy import GridClientProxy
        from flwr.server.compat.legacy_context import LegacyContext
        from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD, Key
        requests, sent, constants = rounds._request(TRAIN, parts, job, state, rnd, layout,
                                                    sites)
        fit_ins = {}
        for nid, request in requests.items():
            config, arrays = dict(request.config), request.arrays
            config.update(arrays=json.dumps(list(arrays)),
                          secagg_max_weight=float(self.settings.secagg_max_weight),
                          secagg_clip=float(self.settings.secagg_clip))
            fit_ins[nid] = FitIns(ndarrays_to_parameters(list(arrays.values())), config)
        grid = _FastGrid(self.grid, rounds.link)
        manager = SimpleClientManager()
        run_id = getattr(getattr(self.grid, "run", None), "run_id", 0)
        for nid in fit_ins:
            manager.register(GridClientProxy(nid, grid, run_id))
        capture = _Capture(fit_ins)
        context = LegacyContext(Context(run_id, 0, {}, RecordDict(), {}), strategy=capture,
                                client_manager=manager)
        context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord(
            {Key.CURRENT_ROUND: int(rnd)})
        context.state.array_records[MAIN_PARAMS_RECORD] = ArrayRecord()
        self.workflow(rounds.round_timeout)(grid, context)
        names = {s.name for s in sites}
        for site in sites:   # the constants a site now holds: not sent to it again
            site.constants = capture.constants.get(site.node_id, site.constants)
        for failure in capture.failures:
            rounds.log(f"round {rnd}: secure aggregation: {' '.join(str(failure).split())}")
        if capture.mean is None or len(capture.sites) < rounds.min_nodes:
            raise TooFewSites(f"round {rnd}: secure aggregation summed "
                              f"{len(capture.sites)} site(s), the run needs "
                              f"min_nodes={rounds.min_nodes}")
        count = len(capture.sites)
        total = decode(capture.mean, count, float(self.settings.secagg_max_weight),
                       parts.accumulator_spec())
        new_state, metrics = parts.update(state, parts.report_sum(total))
        missing = sorted(names - set(capture.sites))
        received = count * sum(8 * np.asarray(v).size for v in capture.mean)
        return rounds._result(new_state, metrics, sorted(capture.sites), missing, {}, start,
                              sent, received)

