"""A link without a transport, for the federation core's tests: each request goes straight to
a site's :class:`tffre.federation.site_runtime.SiteRuntime` in this process (its arrays
copied, as a wire would), and its answer comes back as a
:class:`tffre.federation.messages.Reply`. No Flower on the way."""

import collections

import numpy as np

from tffre.federation.messages import Reply


def copied(arrays):
    """An ordered copy of {path: array} (None stays None): what the other side receives."""
    if arrays is None:
        return None
    return collections.OrderedDict((name, np.array(value)) for name, value in arrays.items())


class DirectLink:
    """``node_ids()`` and ``exchange(requests, timeout, group)`` over site runtimes.

    Args:
      sites: {site name: (a SiteRuntime, its node configuration)}; node ids are given in the
        order of ``sites``.
    """

    def __init__(self, sites):
        self.nodes = {100 + i: site for i, site in enumerate(sites.values())}
        self.sent = []   # every request, in order: (node id, request)

    def node_ids(self):
        """The ids of the sites' nodes."""
        return sorted(self.nodes)

    def exchange(self, requests, timeout, group=""):
        """{node id: Reply} of each request, answered by its site's runtime."""
        replies = {}
        for nid, request in requests.items():
            self.sent.append((nid, request))
            runtime, node_config = self.nodes[nid]
            config, arrays = runtime.handle(request.kind, dict(request.config),
                                            copied(request.arrays), node_config)
            replies[nid] = Reply(dict(config), copied(arrays))
        return replies
