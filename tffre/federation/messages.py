"""The messages between a deployment's server and its sites, whatever carries them.

Three kinds, each answered by one reply:

* :data:`HELLO`: config ``{"job"}`` (the job without what the sites tell)
  -> config ``{"site", "labels", "entity_types", "examples", "constants"}``, or
  ``{"site", "error"}`` when the site's data cannot be used.
* :data:`TRAIN`: config ``{"job", "round", "constants", "layout"}`` and the arrays of the
  round's broadcast (:meth:`tffre.federation.split_round.SplitRound.prepare`), without the
  constant weights when the site already holds them -> the arrays of the upload and config
  ``{"site", "round", "constants", "seconds"}`` (or ``"error"``).
* :data:`EVALUATE`: the same config and arrays as ``train`` -> arrays of summed evaluation
  counts per split (``loss/<split>``, ``count/<split>``, ``confusion/<split>``) and the same
  reply config.

``constants`` is the hash of the broadcast's constant weights (:func:`constants_hash`; frozen
embeddings, FedCB's classifier:
:meth:`tffre.federation.split_round.SplitRound.constant_paths`): the server sends them only to
a site whose replies do not name that hash, so they reach a site once, not every round.

A transport encodes a :class:`Request` for its wire and decodes what comes back as a
:class:`Reply` (Flower: :mod:`tffre.deploy.protocol` and :class:`tffre.deploy.link.GridLink`);
a reply the transport gives in a site's place (the site went away, its handler raised) is a
:class:`Reply` with ``error``, one whose arrays it cannot read a :class:`Reply` with
``malformed``: a transport never raises for what a site sent.
"""

import collections
import dataclasses
import hashlib

import numpy as np

HELLO, TRAIN, EVALUATE = "hello", "train", "evaluate"
KINDS = (HELLO, TRAIN, EVALUATE)


@dataclasses.dataclass(frozen=True)
class Request:
    """One message to a site: its kind (:data:`KINDS`), its config (JSON-like values) and its
    arrays (an ordered {path: numpy array}, or None)."""
    kind: str
    config: dict
    arrays: collections.OrderedDict = None


@dataclasses.dataclass(frozen=True)
class Reply:
    """A site's answer: its config and arrays; or ``error``, one line, when the transport
    answered in the site's place (then config and arrays are empty); or ``malformed``, one
    line, when the site answered and the transport could not read its arrays (a truncated or
    oversized packed record, an index that does not parse: then arrays is None and config is
    what could be read). The server leaves a malformed reply's site out of the round and
    names it with the reason (:class:`tffre.federation.round_driver.FederatedRounds`)."""
    config: dict = dataclasses.field(default_factory=dict)
    arrays: collections.OrderedDict = None
    error: str = ""
    malformed: str = ""


def contiguous(value):
    """``value`` as a C-contiguous numpy array (a scalar stays 0-d, which
    ``np.ascontiguousarray`` would make shape [1])."""
    value = np.asarray(value)
    return value if value.flags.c_contiguous else value.copy(order="C")


def payload_bytes(named):
    """Bytes of the arrays' values (what ``bytes_broadcast``/``bytes_uploaded`` count)."""
    return int(sum(np.asarray(v).nbytes for v in named.values()))


def constants_hash(named):
    """A hash of the constant arrays (names, dtypes, shapes and values); "" when none."""
    if not named:
        return ""
    digest = hashlib.sha256()
    for name, value in named.items():
        value = contiguous(value)
        digest.update(f"{name}:{value.dtype.str}:{value.shape};".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()[:32]
