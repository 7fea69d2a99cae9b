"""Faulty sites, simulated: ``--faulty-clients N --fault KIND`` (issue 69, item 4).

A federation of hospitals has broken sites: a label-mapping bug, a corrupted or scaled update,
a site that sends an old update. N clients misbehave, the same clients every round, chosen
from the run's seed (:func:`choose_faulty`); the others are honest. The kinds:

* ``flip-labels``: the site's labels go through a permutation of the classes without fixed
  points (a label-mapping bug; two classes swap). Its data is wrong, its code is not: it trains
  and uploads as an honest site does, on every executor.
* ``scale:S``: the site's model delta times S (``scale:-5`` pushes the mean the other way).
* ``noise:SIGMA``: Gaussian noise N(0, SIGMA^2) in place of the delta.
* ``nan``: a delta of NaN, uploaded with the site's weight (a broken site does not exclude
  itself, as an honest one's client work does).
* ``stale:R``: the upload the site computed R of its rounds ago (its first one until it has
  taken part R times; with every client in every round, R rounds ago). In simulation the
  past uploads are saved beside each checkpoint (:meth:`UploadFaults.save`), so a resumed
  run sends what the uninterrupted one does.

The last four change what the site *sends* (a Byzantine upload), after its training: the
local executor applies them to the upload between the client's work and the server's
aggregation (:meth:`UploadFaults.apply`), a deployment's site before it sends. TFF's runtime
runs every client's work inside one computation, so it takes ``flip-labels`` only; the
others need ``--executor local`` (refused in one line otherwise).

The faulty clients are named in ``summary.json`` (``faults``). No TensorFlow at import: the
command line reads :func:`parse_fault` for its flag.
"""

import dataclasses
from typing import Optional

import numpy as np

#: The fault kinds (``--fault``); the last four take a number after a colon.
KINDS = ("flip-labels", "scale", "noise", "nan", "stale")
#: The kinds that change the upload (not the data): local executor and deployment only.
UPLOAD_KINDS = ("scale", "noise", "nan", "stale")


@dataclasses.dataclass(frozen=True)
class Fault:
    """One kind of misbehaviour (see the module docstring).

    Attributes:
      kind: one of :data:`KINDS`.
      value: S of ``scale:S``, SIGMA of ``noise:SIGMA``, R of ``stale:R``; None otherwise.
    """
    kind: str
    value: Optional[float] = None
    json_as_text = True   # config.json and summary.json hold it as --fault's text

    def __str__(self):
        if self.value is None:
            return self.kind
        value = int(self.value) if self.kind == "stale" else self.value
        return f"{self.kind}:{value:g}" if isinstance(value, float) else f"{self.kind}:{value}"

    @property
    def changes_upload(self):
        """True for the kinds applied to the upload (not the data)."""
        return self.kind in UPLOAD_KINDS


def parse_fault(text):
    """``flip-labels``, ``scale:S``, ``noise:SIGMA`` (SIGMA >= 0), ``nan`` or ``stale:R``
    (R >= 1) as a :class:`Fault`; a ValueError naming the forms otherwise."""
    if isinstance(text, Fault):
        return text
    forms = "flip-labels, scale:S, noise:SIGMA, nan or stale:R"
    kind, _, number = str(text).strip().partition(":")
    if kind not in KINDS:
        raise ValueError(f"expected {forms}, got {text!r}")
    if kind in ("flip-labels", "nan"):
        if number:
            raise ValueError(f"{kind} takes no value, got {text!r}")
        return Fault(kind)
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"{kind} needs a number ({kind}:...), got {text!r}") from None
    if not np.isfinite(value):
        raise ValueError(f"{kind} needs a finite number, got {text!r}")
    if kind == "noise" and value < 0:
        raise ValueError(f"noise:SIGMA needs SIGMA >= 0, got {text!r}")
    if kind == "stale":
        if value != int(value) or value < 1:
            raise ValueError(f"stale:R needs a whole number of rounds R >= 1, got {text!r}")
        value = int(value)
    return Fault(kind, value)


parse_fault.__name__ = "flip-labels/scale:S/noise:SIGMA/nan/stale:R"


def choose_faulty(client_ids, n, seed):
    """The ``n`` faulty clients, drawn without replacement from ``seed`` alone (the same
    clients every round and on resume), in ``client_ids``' order."""
    client_ids = list(client_ids)
    if not 0 <= n <= len(client_ids):
        raise ValueError(f"--faulty-clients must be between 0 and the {len(client_ids)} "
                         f"clients, got {n}")
    rng = np.random.RandomState([int(seed) & 0xFFFFFFFF, 69])   # not the sampling's stream
    picked = set(rng.choice(len(client_ids), n, replace=False).tolist())
    return [c for i, c in enumerate(client_ids) if i in picked]


def label_permutation(num_classes, seed):
    """A permutation of the classes without fixed points (every label changes), from
    ``seed``: a random cyclic shift of a random order, so that no class maps to itself."""
    if num_classes < 2:
        raise ValueError("flip-labels needs at least two classes")
    rng = np.random.RandomState([int(seed) & 0xFFFFFFFF, 70])
    order = rng.permutation(num_classes)
    shift = 1 + rng.randint(num_classes - 1)
    perm = np.empty(num_classes, np.int64)
    perm[order] = order[(np.arange(num_classes) + shift) % num_classes]
    return perm


class UploadFaults:
    """The upload faults of a run's faulty clients (:data:`UPLOAD_KINDS`), on numpy uploads.

    An upload is the round's structure (:mod:`tffre.mapreduce`): ``upload["model"]["update"]``
    (``["record"]`` under differential privacy) is the model delta the fault changes; the weight and the rest stay as the site's work
    made them (``stale`` sends the whole old upload).

    Args:
      fault: the :class:`Fault`.
      clients: the faulty clients' ids.
      seed: the noise's seed (with the round and the client, so a resumed run draws the same).
    """

    def __init__(self, fault, clients, seed=0):
        if not fault.changes_upload:
            raise ValueError(f"{fault} changes the data, not the upload")
        self.fault, self.clients, self.seed = fault, list(clients), int(seed)
        self.history = {c: [] for c in self.clients}   # stale: each client's past uploads

    #: A checkpoint's past uploads (stale:R), beside the state: ``stale_uploads_<round>.pkl``.
    SAVED = "stale_uploads_{rnd}.pkl"

    def save(self, folder, rnd, keep=2):
        """Writes stale:R's past uploads as of round ``rnd`` into ``folder`` (a checkpoint's),
        keeping the newest ``keep`` rounds' as the checkpoints do; nothing for other kinds."""
        if self.fault.kind != "stale":
            return
        import glob
        import os
        import pickle
        path = os.path.join(folder, self.SAVED.format(rnd=int(rnd)))
        with open(path + ".part", "wb") as f:   # a kill mid-write leaves the last one whole
            pickle.dump(self.history, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(path + ".part", path)
        saved = sorted(glob.glob(os.path.join(folder, self.SAVED.format(rnd="*"))),
                       key=lambda p: int(os.path.basename(p).split("_")[-1].split(".")[0]))
        for old in saved[:-keep]:
            os.remove(old)

    def load(self, folder, rnd):
        """Reads what :meth:`save` wrote for round ``rnd``; False where stale:R's file is
        missing (a checkpoint older than it), True otherwise."""
        if self.fault.kind != "stale":
            return True
        import os
        import pickle
        path = os.path.join(folder, self.SAVED.format(rnd=int(rnd)))
        if not os.path.isfile(path):
            return False
        with open(path, "rb") as f:   # the run's own file, written by save above
            history = pickle.load(f)
        self.history = {c: list(history.get(c, [])) for c in self.clients}
        return True

    def affects(self, client):
        """True for a faulty client."""
        return client in self.history

    def apply(self, client, upload, rnd):
        """``upload`` as faulty ``client`` sends it in round ``rnd`` (unchanged for an honest
        client)."""
        if client not in self.history:
            return upload
        kind, value = self.fault.kind, self.fault.value
        if kind == "stale":
            past = self.history[client]
            past.append(upload)
            del past[:-(int(value) + 1)]   # keep the last R + 1
            return past[0]
        model = upload.get("model") if hasattr(upload, "get") else None
        # The delta as the aggregator's client part holds it: "update" (the mean, attention,
        # the robust rules) or "record" (differential privacy's clipped record, which a
        # broken site's bad record replaces: its clip is the site's own code).
        key = next((k for k in ("update", "record") if model is not None and k in model), None)
        if key is None:
            raise ValueError(f"--fault {self.fault}: this algorithm uploads no model delta")
        update = [np.asarray(u, np.float32) for u in model[key]]
        if kind == "scale":
            update = [np.float32(value) * u for u in update]
        elif kind == "nan":
            update = [np.full_like(u, np.nan) for u in update]
        else:   # noise
            index = self.clients.index(client)
            rng = np.random.RandomState([self.seed & 0xFFFFFFFF, int(rnd), index, 71])
            update = [rng.normal(0.0, value, u.shape).astype(np.float32) for u in update]
        new_model = type(model)(model)
        new_model[key] = update
        new = type(upload)(upload)
        new["model"] = new_model
        return new
