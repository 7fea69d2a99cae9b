"""What a deployment does, whatever carries its messages: the server's round driver, a site's
runtime, a site's seeding and a round split into its functions.

* :mod:`~tffre.federation.messages`: the messages' vocabulary (hello, train, evaluate; a
  request, a reply) and what is counted or hashed of their arrays;
* :mod:`~tffre.federation.round_driver`: :class:`FederatedRounds`, the server's side of a
  round across sites (who takes part, what they get, how their uploads are summed);
* :mod:`~tffre.federation.site_runtime`: :class:`SiteRuntime`, a site's side (its data, its
  round, its own folder), and :mod:`~tffre.federation.site_evaluation` its evaluation counts;
* :mod:`~tffre.federation.seeding`: a site's randomness per job, round and site;
* :mod:`~tffre.federation.split_round`: :class:`SplitRound`, the local executor's round
  callable one function at a time on numpy values, and its structures as named arrays.

A transport (:mod:`tffre.deploy`: Flower) supplies a link with ``node_ids()`` and
``exchange(requests, timeout, group)`` of :class:`~tffre.federation.messages.Request` and
:class:`~tffre.federation.messages.Reply`, encodes them for its wire, and gives a site runtime
the task loader and round factory it builds with. Nothing here imports a transport.

Importing this package imports neither TensorFlow nor Flower.
"""
