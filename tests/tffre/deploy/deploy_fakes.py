"""In-process stand-ins for a deployment's tests: a Flower grid without servers, a tiny task.

:class:`FakeGrid` delivers each message to a node's ClientApp in this process, after
a round trip through Flower's own serialization (``deflate``/``inflate`` of every
object of the message), and the reply back the same way; nodes can be killed
(they stop answering) and restarted (a new node id, the same site folder).
"""

import collections
import itertools
import types

from tiny import (INPUT_SPEC, NAMED_LOSS, NUM_CLASSES, tiny_context_model, tiny_model,
                  tiny_named_model)

from tffre.tasks.sites import SiteData, SiteDataError, SiteModel

SERVER_NODE_ID = 1


def roundtrip(message):
    """``message`` deflated to bytes and inflated again, as it would cross the wire."""
    from flwr.common.inflatable import get_all_nested_objects
    from flwr.common.inflatable_utils import inflate_object_from_contents
    message_id = message.metadata.message_id
    contents = {oid: obj.deflate() for oid, obj in get_all_nested_objects(message).items()}
    copy = inflate_object_from_contents(message.object_id, contents)
    copy.metadata.__dict__["_message_id"] = message_id
    return copy


class FakeGrid:
    """A Flower ``Grid`` whose nodes are ClientApps in this process (see the module docstring).

    Args:
      nodes: {site name: (client app, node config)}.
    """

    def __init__(self, nodes):
        from flwr.app import Context, RecordDict
        self._ids = itertools.count(100)
        self.run = types.SimpleNamespace(run_id=7)
        self.nodes = {}
        self._Context, self._RecordDict = Context, RecordDict
        for name, (app, config) in nodes.items():
            self.add(app, config)
        self._replies = {}
        self.received = []      # every reply the server pulled (what the server held)
        self.sent = []          # every message the server pushed
        self.before_group = {}  # group id -> callable run before its first message is delivered
        self.crash_on_pull = None   # group id whose replies the server dies pulling

    def add(self, app, config):
        """Connects a node; returns its id."""
        nid = next(self._ids)
        context = self._Context(run_id=self.run.run_id, node_id=nid, node_config=dict(config),
                                state=self._RecordDict(), run_config={})
        self.nodes[nid] = types.SimpleNamespace(app=app, context=context, alive=True)
        return nid

    def kill(self, nid):
        """The node stops answering (it stays listed, as a SuperLink lists a dead node until
        its heartbeats are overdue)."""
        self.nodes[nid].alive = False

    def node_of(self, site):
        return next(n for n, node in self.nodes.items()
                    if node.alive and node.context.node_config.get("site") == site)

    def get_node_ids(self):
        return list(self.nodes)

    def push_messages(self, messages):
        ids = []
        for message in messages:
            meta = message.metadata.__dict__
            meta["_run_id"] = self.run.run_id
            meta["_src_node_id"] = SERVER_NODE_ID
            meta["_message_id"] = message.object_id
            ids.append(message.metadata.message_id)
            self.sent.append(message)
            hook = self.before_group.pop(message.metadata.group_id, None)
            if hook is not None:
                hook()
            node = self.nodes.get(message.metadata.dst_node_id)
            if node is None or not node.alive:
                continue
            reply = node.app(message=roundtrip(message), context=node.context)
            reply.metadata.__dict__["_message_id"] = reply.object_id
            self._replies[message.metadata.message_id] = roundtrip(reply)
        return ids

    def pull_messages(self, message_ids):
        out = [self._replies.pop(i) for i in list(message_ids) if i in self._replies]
        if self.crash_on_pull is not None and any(
                m.metadata.group_id == self.crash_on_pull for m in out):
            raise KeyboardInterrupt("the server process was killed")
        self.received.extend(out)
        return out

    def send_and_receive(self, messages, *, timeout=None):
        return self.pull_messages(self.push_messages(list(messages)))


def tiny_frozen_model():
    """``tiny_model`` with its first layer frozen: constant weights, sent to a site once."""
    model = tiny_model()
    model.layers[0].trainable = False
    return model


class TinyTask:
    """A task of ``tiny``'s models over given arrays: {site: (x, y)} (held out: the first
    half of the site's examples again, as ``test``)."""

    #: As :class:`tffre.tasks.sites.Sites`: options naming local files stay out of the job.
    LOCAL_OPTIONS = ("data", "encoder", "server_data", "concept_file")

    def __init__(self, arrays, named=False, context=False, bad_sites=(), frozen=False):
        self.arrays = arrays
        self.named, self.context, self.frozen = named, context, frozen
        self.bad_sites = set(bad_sites)

    def model_fn(self):
        if self.context:
            return tiny_context_model
        if self.frozen:
            return tiny_frozen_model
        return tiny_named_model if self.named else tiny_model

    def loss(self):
        import tensorflow as tf
        return NAMED_LOSS if (self.named or self.context) else \
            tf.keras.losses.SparseCategoricalCrossentropy()

    def _site(self, site):
        name = site["site"]
        if name in self.bad_sites:
            raise SiteDataError(f"{name}/train.tsv line 3: label: 'maybe' is not one of 0, 1, 2")
        return self.arrays[name]

    def survey(self, job, site):
        x, _ = self._site(site)
        return {"labels": [str(i) for i in range(NUM_CLASSES)], "entity_types": [],
                "examples": len(x)}

    def model(self, job, site):
        return SiteModel(model_fn=self.model_fn(), loss=self.loss(), input_spec=INPUT_SPEC)

    def site_data(self, job, site):
        x, y = self._site(site)
        half = max(1, len(y) // 2)
        return SiteData(train=(x, y), held_out={"test": (x[:half], y[:half])})

    def server_data(self, job, side):
        """D_v at the server (FedED): x and y of the ``server-data`` .npz file."""
        import numpy as np
        from tffre.tasks.sites import site_path
        with np.load(site_path(side, "server-data")) as saved:
            return saved["x"], saved["y"]


def run_config(name, out, **extra):
    """A Flower run config for ``name`` on the tiny task (tffre run's names)."""
    config = {"algorithm": name, "dataset": "synthetic", "out": str(out), "num-rounds": 3,
              "learning-rate": 0.05, "num-epochs": 2, "num-iters": 5, "batch-size": 4,
              "seed": 0, "min-nodes": 2, "round-timeout": 5.0, "start-timeout": 5.0,
              "round-retries": 0, "poll": 0.01}
    config.update(extra)
    return collections.OrderedDict(config)


def final_state(out, name, task, rounds=None, hparams=None, sites=3):
    """The newest checkpoint of a run in ``out`` (and its round), read with the structure of
    ``name``'s server state on ``task``'s model (with ``hparams``)."""
    from tffre.definition import TaskContext
    from tffre.deploy.round_factory import make_round
    from tffre.runner.checkpoints import Checkpoints
    parts, _, _ = make_round(name, task.model_fn(), loss=task.loss(),
                             input_spec=INPUT_SPEC, hparams=hparams or {},
                             context=TaskContext(num_clients=sites, clients_per_round=sites))
    state, done = Checkpoints(str(out / "checkpoints" / name)).load_latest(parts.initialize())
    assert rounds is None or done == rounds, done
    return state
