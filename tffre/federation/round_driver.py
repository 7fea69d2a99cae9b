"""The server's side of a round across sites: who takes part, what they get, how their uploads
are summed.

:class:`FederatedRounds` talks to the sites through a link (any object with ``node_ids()``
and ``exchange(requests, timeout, group)`` of :mod:`tffre.federation.messages`' requests and
replies; Flower's is :class:`tffre.deploy.link.GridLink`), and computes with the round's own
functions (:class:`tffre.federation.split_round.SplitRound`):

* **Sites.** A node says hello once (and again after it missed a round or
  failed): its site name, its data's labels and entity types, or a one-line data
  error, which is logged (site, node, file, record, field) and keeps the site
  out until it says hello again. Two nodes with one site name (a site that
  restarted before the SuperLink noticed the old connection was gone): the
  newer one counts.
* **A round.** Every usable site gets the broadcast (``prepare``); the constant
  weights go only to a site that does not hold them yet. Replies are awaited up
  to ``round_timeout``; a site that does not answer is named in the round's
  ``missing_clients``, with the reason in ``missing_reasons``: so is a site that takes no
  part (its data refused at hello, a transport error in its place, not connected). A
  broken site's reply is excluded from the round, logged and named the same way, with one
  line naming the part and what is wrong: arrays the transport could not read (a truncated
  or oversized packed record, an index that does not parse: ``Reply.malformed``), a reply
  to another round, an upload whose names, shapes or dtypes differ from the round's
  (:func:`tffre.federation.split_round.from_arrays`), or one with NaN/Inf (which a positive
  weight would spread over the mean; counted excluded too, as the simulation excludes a
  non-finite update). The round goes on with the others. The uploads are accumulated **in
  site-name order**, so the sum does not depend on the order replies arrive in, and a round
  equals the local executor's on the same clients in that order. With fewer than
  ``min_nodes`` uploads the round is not applied (:class:`TooFewSites`).
* **Secure aggregation** (``secure``): the uploads are summed by an object with
  ``round(...)`` (Flower's SecAgg+: :class:`tffre.deploy.secagg.SecureSum`); the server gets
  only the sum.
* **Evaluation**: each site evaluates the new global model on its held-out
  splits and returns summed counts; the server adds them up.
"""

import collections
import dataclasses
import time

import numpy as np

from tffre.federation.messages import (EVALUATE, HELLO, TRAIN, Request, constants_hash,
                                       payload_bytes)
from tffre.federation.split_round import MessageError, all_finite, from_arrays, to_arrays


class TooFewSites(RuntimeError):
    """Fewer sites answered than the run needs (``min_nodes``)."""


@dataclasses.dataclass
class Site:
    """What the server knows of a connected node."""
    node_id: int
    name: str
    facts: dict = dataclasses.field(default_factory=dict)
    constants: str = ""
    error: str = ""
    hello_at: float = 0.0
    suspect: bool = False   # missed a round: ask it again before the next


@dataclasses.dataclass
class RoundResult:
    """One applied round: the new state, the process-style metrics (``metrics["round"]`` as
    the simulation's), the sites whose uploads were summed, those that were missing (sorted)
    and why ({site: one line})."""
    state: object
    metrics: dict
    clients: list
    missing: list
    failed: dict
    reasons: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Scoring:
    """How the server scores the sites' summed evaluation counts (:func:`evaluation_columns`):
    the task's evaluation ``kind`` (:attr:`tffre.tasks.sites.SiteModel.evaluation`; None
    reads it off the counts), the relation F1's ``negative_label`` and ``macro_f1``."""
    kind: str = None
    negative_label: int = None
    macro_f1: bool = False


def log_line(message):
    """The server log: one line per event, on stdout (``flwr run --stream`` shows it)."""
    print(message, flush=True)


class FederatedRounds:
    """Rounds across the sites of a link (see the module docstring).

    Args:
      link: an object with ``node_ids()`` and ``exchange(requests, timeout, group)``
        ({node id: :class:`~tffre.federation.messages.Request`} -> {node id:
        :class:`~tffre.federation.messages.Reply`}; Flower's: :class:`tffre.deploy.link.GridLink`).
      min_nodes: uploads needed to apply a round.
      round_timeout: seconds to wait for the sites' replies to one message.
      secure: an object whose ``round(rounds, parts, job, state, rnd, layout, sites, start)``
        sums the uploads securely (:class:`tffre.deploy.secagg.SecureSum`), or None.
      log: callable(str) for the server's one-line events.
      hello_timeout: seconds to wait for a hello (default ``min(round_timeout, 60)``).
      quiet_period: seconds before a node that did not answer its hello is asked again (a
        SuperLink lists a dead node until its heartbeats are overdue, about a minute).
    """

    def __init__(self, link, *, min_nodes=1, round_timeout=600.0, secure=None, log=log_line,
                 hello_timeout=None, quiet_period=60.0):
        self.link = link
        self.min_nodes = int(min_nodes)
        self.round_timeout = float(round_timeout)
        self.hello_timeout = float(hello_timeout if hello_timeout is not None
                                   else min(self.round_timeout, 60.0))
        self.quiet_period = float(quiet_period)
        self.secure = secure
        self.log = log
        self.sites = {}
        self.silent = {}   # node id -> when it last failed to answer a hello
        self.members = set()   # the names of the sites that ever said hello with usable data
        # Sites that said hello and take no part: {site name (or "node N" when Flower
        # answered in its place): why}. Named missing in every round until they take part.
        self.refused = {}
        # Once the run's job is agreed: callable(job, hello facts) -> why a site that says hello
        # differs from it (its labels, its vocabulary), or None (Sites.disagreement).
        self.check = None

    # --- sites ---

    def refresh(self, job):
        """Says hello to the nodes not yet known (or that missed a round or failed) and forgets
        the ones gone; returns the usable sites."""
        ids = set(self.link.node_ids())
        for nid in [n for n in self.sites if n not in ids]:
            del self.sites[nid]
            self.refused.pop(f"node {nid}", None)   # unnamed: nothing to name once it is gone
        # A node the SuperLink no longer lists is forgotten, its quiet period too: a site
        # that restarts keeps its node id (registered keys), and is asked at once when back.
        for nid in [n for n in self.silent if n not in ids]:
            del self.silent[nid]
        now = time.monotonic()
        ask = [n for n in ids if (n not in self.sites or self.sites[n].suspect
                                  or self.sites[n].error)
               and now - self.silent.get(n, -self.quiet_period) >= self.quiet_period]
        if ask:
            hello = Request(HELLO, {"job": job.to_json()})
            replies = self.link.exchange({n: hello for n in ask}, self.hello_timeout,
                                         group="hello")
            for nid in ask:
                self._hello(nid, replies.get(nid), job)
        return self.usable()

    def _hello(self, nid, reply, job=None):
        if reply is None:   # not answering (dead, or busy): asked again after a quiet period
            self.sites.pop(nid, None)
            self.silent[nid] = time.monotonic()
            return
        self.silent.pop(nid, None)
        if reply.error:
            self.sites[nid] = Site(nid, f"node {nid}", error=reply.error,
                                   hello_at=time.monotonic())
            self.refused[f"node {nid}"] = reply.error
            self.log(f"node {nid}: {reply.error}; it takes no part")
            return
        config = reply.config
        name = str(config.get("site", f"node {nid}"))
        site = Site(nid, name, facts=config, constants=str(config.get("constants", "")),
                    error=str(config.get("error", "")), hello_at=time.monotonic())
        if not site.error and self.check is not None and job is not None:
            site.error = self.check(job, config) or ""
        old = self.sites.get(nid)
        if site.error and (old is None or old.error != site.error):
            self.log(f"site {name} (node {nid}): {site.error}; it takes no part")
        if site.error:
            self.leave_out(name, site.error)
        else:
            self.members.add(name)
            self.refused.pop(name, None)
        self.sites[nid] = site

    def leave_out(self, name, why):
        """Site ``name`` takes no part (its data, or its facts against the run's): it is named
        missing with ``why`` in every round until it says hello with what the run needs."""
        self.refused[name] = why
        self.members.discard(name)

    def usable(self):
        """The sites that can train, in site-name order (one node per name: the newest)."""
        newest = {}
        for site in self.sites.values():
            if site.error:
                continue
            if site.name not in newest or site.hello_at > newest[site.name].hello_at:
                newest[site.name] = site
        return [newest[name] for name in sorted(newest)]

    def wait_for_sites(self, job, count, timeout, poll=1.0):
        """Refreshes until ``count`` sites are usable or ``timeout`` seconds pass; returns them."""
        deadline = time.monotonic() + float(timeout)
        while True:
            sites = self.refresh(job)
            if len(sites) >= count or time.monotonic() >= deadline:
                return sites
            time.sleep(poll)

    # --- a round ---

    def _request(self, kind, parts, job, state, rnd, layout, sites):
        """{node id: :class:`~tffre.federation.messages.Request`} of the round's broadcast,
        constants only where missing; the payload bytes sent; the constants' hash."""
        named = to_arrays(parts.prepare(state))
        constant_names = parts.constant_paths()
        constants = constants_hash(
            collections.OrderedDict((n, named[n]) for n in constant_names))
        config = {"job": job.to_json(), "round": int(rnd), "constants": constants,
                  "layout": layout}
        varying = collections.OrderedDict((n, v) for n, v in named.items()
                                          if n not in constant_names)
        requests, sent = {}, 0
        for site in sites:
            arrays = named if site.constants != constants else varying
            requests[site.node_id] = Request(kind, config, arrays)
            sent += payload_bytes(arrays)
        return requests, sent, constants

    def train(self, parts, job, state, rnd, layout):
        """Runs round ``rnd`` from server ``state``; returns a :class:`RoundResult` or raises
        :class:`TooFewSites` (the state is then unchanged)."""
        start = time.perf_counter()
        sites = self.refresh(job)
        refreshed = time.perf_counter()
        absent = sorted(self.members - {site.name for site in sites})
        if absent:
            self.log(f"round {rnd}: site(s) {', '.join(absent)} not connected; going on "
                     f"without them")
        if len(sites) < self.min_nodes:
            raise TooFewSites(f"round {rnd}: {len(sites)} usable site(s), the run needs "
                              f"min_nodes={self.min_nodes}")
        if self.secure is not None:
            return self.secure.round(self, parts, job, state, rnd, layout, sites, start)
        requests, sent, constants = self._request(TRAIN, parts, job, state, rnd, layout,
                                                  sites)
        prepared = time.perf_counter()
        replies = self.link.exchange(requests, self.round_timeout, group=str(rnd))
        timing = {"sites": refreshed - start, "prepare": prepared - refreshed,
                  **getattr(self.link, "timing", {})}
        uploads, clients, missing, silent, failed, received = [], [], [], [], {}, 0
        reasons = {}
        spec = parts.upload_spec()
        for site in sites:   # site-name order: the sum does not depend on arrival
            reply = replies.get(site.node_id)
            outcome = self._reply(site, reply, rnd, constants)
            if outcome is None or isinstance(outcome, Undelivered):
                missing.append(site.name)
                if outcome is None:
                    silent.append(site.name)
                    reasons[site.name] = f"no reply within {self.round_timeout:g} s"
                else:
                    reasons[site.name] = str(outcome)
                continue
            if isinstance(outcome, str):   # its data refused, or its reply unreadable
                failed[site.name] = outcome
                continue
            received += payload_bytes(outcome)
            upload, why = self._upload(site, outcome, spec)
            if upload is None:
                failed[site.name] = why
                self.log(f"round {rnd}: site {site.name}: {why}; excluded")
                continue
            uploads.append(upload)
            clients.append(site.name)
        if silent:
            self.log(f"round {rnd}: no reply from site(s) {', '.join(silent)} within "
                     f"{self.round_timeout:g} s; going on without them")
        if len(uploads) < self.min_nodes:
            raise TooFewSites(f"round {rnd}: {len(uploads)} upload(s), the run needs "
                              f"min_nodes={self.min_nodes} (missing: {', '.join(missing) or '-'};"
                              f" failed: {', '.join(failed) or '-'})")
        summed = time.perf_counter()
        new_state, metrics = parts.update(state, parts.aggregate(uploads))
        timing["sum_update"] = time.perf_counter() - summed
        return self._result(new_state, metrics, clients, missing, failed, start, sent, received,
                            timing, reasons)

    def _result(self, state, metrics, clients, missing, failed, start, sent, received,
                timing=None, reasons=None):
        metrics = collections.OrderedDict(metrics)
        reasons = dict(reasons or {})
        for name in missing:
            reasons.setdefault(name, "no upload this round (see the log)")
        # Missing: the sites that did not answer, those that took part before and are not
        # connected now (a site that stopped, or one restarting), those whose upload was
        # refused for what they said (their data, their model) or excluded (a reply that does
        # not read, answers another round, does not fit the round, has NaN/Inf: a NaN upload
        # is also counted excluded, as in simulation) and those that said hello and take no
        # part (their data refused, Flower answering in their place).
        for name in sorted(self.members - set(clients) - set(failed) - set(missing)):
            reasons[name] = "not connected"
        for name, why in failed.items():   # refused or excluded: named with the reason
            reasons[name] = why
        for name, why in self.refused.items():
            if name not in clients:
                reasons.setdefault(name, f"takes no part: {why}")
        reasons = {name: " ".join(str(why).split()) for name, why in reasons.items()}
        missing = sorted(reasons)
        # Uploads the server refused count as excluded, as a non-finite update does.
        work = metrics["client_work"]
        work["num_excluded_clients"] = int(work["num_excluded_clients"]) + sum(
            "NaN/Inf" in reason for reason in failed.values())
        metrics["round"] = collections.OrderedDict(
            wall_seconds=time.perf_counter() - start, num_clients=len(clients),
            bytes_broadcast=int(sent), bytes_uploaded=int(received))
        # Where the round's time went (server log only): pushing the broadcast, until the
        # last reply, summing and updating.
        metrics["round"].update({f"{k}_seconds": v for k, v in (timing or {}).items()})
        return RoundResult(state, metrics, list(clients), missing, failed,
                           {name: reasons[name] for name in missing})

    def _upload(self, site, arrays, spec):
        """(the upload's structure, None) of a site's upload ``arrays`` that fit the round's
        ``spec`` and are finite; else (None, one line naming the part and what is wrong). A
        NaN or Inf with a positive weight would make the mean NaN: such an upload is excluded
        (and counted excluded, as the simulation's client work excludes a non-finite update)."""
        try:
            upload = from_arrays(arrays, spec, "its upload")
        except MessageError as err:
            return None, str(err)
        bad = all_finite(arrays)
        if bad is not None:
            return None, f"its upload has NaN/Inf ({bad})"
        return upload, None

    def _reply(self, site, reply, rnd, constants):
        """The upload arrays of a site's reply; a str saying why the site's upload is refused
        (its data; its reply, which does not read or answers another round);
        :class:`Undelivered` when the transport answered for it (the node went away, its
        handler raised); None when nothing came. In the last two cases the site is missing
        from the round and asked hello again before the next."""
        if reply is None:
            site.suspect = True
            return None
        if reply.error:
            site.suspect = True
            self.log(f"round {rnd}: site {site.name} (node {site.node_id}): {reply.error}; "
                     f"going on without it")
            return Undelivered(reply.error)
        config, arrays = reply.config, reply.arrays
        if config.get("error"):
            site.error = str(config["error"])
            self.log(f"round {rnd}: site {site.name} (node {site.node_id}): {site.error}; "
                     f"it takes no part until it says hello again")
            return site.error
        answered = config.get("round")
        why = None
        if reply.malformed:
            why = f"its reply does not read: {reply.malformed}"
        elif str(answered) != str(int(rnd)):
            why = f"its reply is to round {answered}, not round {rnd}" if answered is not None \
                else f"its reply names no round (round {rnd} was asked)"
        if why is not None:
            self.log(f"round {rnd}: site {site.name} (node {site.node_id}): {why}; excluded")
            return why
        site.constants = str(config.get("constants", site.constants))
        return arrays or collections.OrderedDict()

    # --- evaluation ---

    def evaluate(self, parts, job, state, rnd, layout, scoring=None, names=None,
                 per_site=None):
        """The evaluation columns of ``state``'s model: the summed counts of each usable site
        (of ``names``, when given: the sites that trained the round) over its held-out splits
        (``test``, ``dev``) and its training split (``train_loss``), scored as ``scoring``
        (a :class:`Scoring`; default: the kind read off the sites' counts).

        ``per_site``, a dict, receives {site name: that site's own columns, scored from its
        counts alone} (each hospital's figures: :mod:`tffre.runner.per_site`)."""
        scoring = scoring or Scoring()
        sites = [s for s in self.usable() if names is None or s.name in names]
        requests, _, constants = self._request(EVALUATE, parts, job, state, rnd, layout,
                                               sites)
        replies = self.link.exchange(requests, self.round_timeout, group=f"eval-{rnd}")
        totals = {}
        for site in sites:
            arrays = self._reply(site, replies.get(site.node_id), rnd, constants)
            if not isinstance(arrays, dict):
                continue
            clash = next((name for name, value in arrays.items() if name in totals
                          and np.shape(value) != totals[name].shape), None)
            if clash is not None:   # counts of another model (its classes): not added
                self.log(f"evaluation {rnd}: site {site.name}: its {clash} is "
                         f"{list(np.shape(arrays[clash]))}, the others' "
                         f"{list(totals[clash].shape)}; left out")
                continue
            for name, value in arrays.items():
                totals[name] = totals[name] + value if name in totals else np.asarray(value)
            if per_site is not None:
                own = {k: np.asarray(v) for k, v in arrays.items()}
                per_site[site.name] = evaluation_columns(
                    own, scoring.negative_label, macro_f1=scoring.macro_f1, kind=scoring.kind)
                per_site[site.name]["num_test"] = int(own.get("count/test", 0))
        return evaluation_columns(totals, scoring.negative_label, macro_f1=scoring.macro_f1,
                                  kind=scoring.kind)


class Undelivered(str):
    """Why a site's reply carries no upload when the transport answered in its place (Flower's
    error reply: "Node Unavailable", a ClientApp exception): the site counts as missing."""


def evaluation_columns(totals, negative_label=None, macro_f1=False, kind=None):
    """``train_loss`` and each held-out split's scores from summed site counts
    (:class:`tffre.federation.site_evaluation.SiteEvaluator`), as the simulation's evaluator
    of ``kind`` computes them on pooled data:

    * "classification" (:class:`tffre.evaluation.GlobalModelEvaluator`): ``<split>_accuracy``
      and ``<split>_f1``: the relation F1 with ``negative_label``, the macro-F1 over all
      classes with ``macro_f1``;
    * "docre" (:class:`tffre.evaluation.DocREEvaluator`): ``<split>_f1``, ``_precision``,
      ``_recall``, ``_accuracy`` and, where the sites counted them, ``_intra_f1`` and
      ``_inter_f1`` (:func:`tffre.metrics.docre_columns` of the summed counts); no Ign F1.

    ``kind`` None: "docre" when the sites sent document-level counts (``docre/...``), else
    "classification"; ``train_loss`` is the summed loss over the summed count (examples, or
    the valid pairs of "docre") either way."""
    from tffre.metrics import relation_f1
    from tffre.metrics import macro_f1 as macro
    if kind is None:
        kind = "docre" if any(k.startswith("docre/") for k in totals) else "classification"
    out = {}
    for key, count in totals.items():
        if not key.startswith("count/"):
            continue
        split = key[len("count/"):]
        n = int(count)
        if split == "train":
            out["train_loss"] = float(totals[f"loss/{split}"]) / n if n else float("nan")
            continue
        if kind == "docre":
            from tffre.evaluation import DOCRE_THRESHOLD
            out.update(_docre_columns(totals, split))
            out["threshold"] = DOCRE_THRESHOLD   # the sites' fixed one (no pooled dev to tune)
            continue
        confusion = np.asarray(totals[f"confusion/{split}"])
        out[f"{split}_accuracy"] = float(np.trace(confusion)) / n if n else float("nan")
        true, pred = np.nonzero(confusion)
        reps = confusion[true, pred]
        true, pred = np.repeat(true, reps), np.repeat(pred, reps)
        if negative_label is not None and n:
            out[f"{split}_f1"] = relation_f1(true, pred, negative_label,
                                             labels=list(range(confusion.shape[0])))["f1"]
        elif macro_f1 and n:
            out[f"{split}_f1"] = macro(true, pred, confusion.shape[0])
    return out


def _docre_columns(totals, split):
    """``<split>_<score>`` of document-level RE from the summed ``docre/<name>/<split>``
    counts (TP/FP/FN sums: P, R and F1 of the pooled split, FedLCC Sect. 5.1)."""
    from tffre.metrics import docre_columns
    suffix = f"/{split}"
    counts = {key[len("docre/"):-len(suffix)]: value for key, value in totals.items()
              if key.startswith("docre/") and key.endswith(suffix)}
    if not counts:
        return {}
    return {f"{split}_{name}": value for name, value in docre_columns(counts).items()}

