"""The ServerApp's line to the sites: messages out, replies in, a deadline.

:class:`GridLink` is the federation core's link over Flower
(:class:`tffre.federation.round_driver.FederatedRounds` talks to the sites through it): it
encodes the core's requests as Flower messages (:mod:`tffre.deploy.protocol`), sends them
through a Flower ``Grid`` (``push_messages`` and ``pull_messages``), polls for replies every
``poll`` seconds until all have come or the deadline passes, and decodes the replies.
(``Grid.send_and_receive`` waits 3 s between pulls, which a round of a small model would
mostly spend waiting.) A reply that never comes is simply absent: the round goes on with
the others.
"""

import time

from tffre.deploy import protocol


class GridLink:
    """Exchanges messages with the sites through a Flower ``Grid``.

    Args:
      grid: the ServerApp's ``flwr.serverapp.Grid`` (or a stand-in with ``get_node_ids``,
        ``push_messages`` and ``pull_messages``).
      poll: seconds between pulls while replies are missing.
    """

    def __init__(self, grid, poll=0.1):
        self.grid = grid
        self.poll = float(poll)
        self.timing = {}   # the last exchange: seconds to push, and until the last reply

    def node_ids(self):
        """The ids of the nodes connected now."""
        return sorted(int(n) for n in self.grid.get_node_ids())

    def exchange(self, requests, timeout, group=""):
        """Sends ``requests`` ({node id: :class:`tffre.federation.messages.Request`}) and
        returns {node id: :class:`tffre.federation.messages.Reply`} of the replies in by
        ``timeout`` seconds."""
        if not requests:
            return {}
        start = time.perf_counter()
        pending = self._push(requests, group)
        self.timing = {"push": time.perf_counter() - start}
        replies, resent = {}, set()
        deadline = time.monotonic() + float(timeout)
        while pending:
            lost = {}
            for reply in self.grid.pull_messages(list(pending)):
                nid = pending.pop(reply.metadata.reply_to_message_id, None)
                if nid is None:
                    continue
                if _lost(reply) and nid not in resent:
                    lost[nid] = requests[nid]
                else:
                    replies[nid] = protocol.reply_of(reply)
            if lost:   # the SuperLink dropped the reply (see flower_patches): ask once more
                resent.update(lost)
                pending.update(self._push(lost, group))
            if not pending or time.monotonic() >= deadline:
                break
            time.sleep(self.poll)
        self.timing["replies"] = time.perf_counter() - start
        return replies

    def _push(self, requests, group):
        from flwr.app import Message
        messages = [Message(protocol.request_content(request), dst_node_id=int(nid),
                            message_type=protocol.MESSAGE_TYPES[request.kind], group_id=group)
                    for nid, request in requests.items()]
        ids = list(self.grid.push_messages(messages))
        return {mid: nid for mid, nid in zip(ids, requests) if mid}


def _lost(reply):
    """True for the SuperLink's "Message Unavailable" answer: the instruction is gone."""
    from flwr.common.constant import ErrorCode
    return reply.has_error() and reply.error.code == ErrorCode.MESSAGE_UNAVAILABLE
