"""Real federation across sites: tffre's rounds on Flower's Deployment Engine (flwr 1.23).

One SuperLink (the server), one SuperNode per site, and ``flwr run`` with
tffre's Flower app. The ServerApp (:mod:`tffre.deploy.server_app`) holds the
server state, sends each round's broadcast, sums the sites' uploads in a fixed
order with the round's own accumulate/merge/report (or securely, with SecAgg+:
:mod:`tffre.deploy.secagg`) and applies ``update``; the ClientApp
(:mod:`tffre.deploy.client_app`) loads its site's data from its own node
configuration, trains and returns only its upload. Both build the same
:class:`tffre.mapreduce.Round` (:mod:`tffre.deploy.round_factory`), so a
deployed run gives the local executor's weights.

What the two sides do whatever carries the messages is the federation core's
(:mod:`tffre.federation`: the server's round driver, a site's runtime and seeding, the split
round); this package is Flower's. Modules: :mod:`~tffre.deploy.tasks` (the shared job, a
site's data), :mod:`~tffre.deploy.round_factory` (the round both sides build),
:mod:`~tffre.deploy.protocol` (the core's messages as Flower records),
:mod:`~tffre.deploy.link` (sending and waiting), :mod:`~tffre.deploy.server_app` and
:mod:`~tffre.deploy.client_app` (the apps), :mod:`~tffre.deploy.secagg` (SecAgg+),
:mod:`~tffre.deploy.flower_config`
(the run config), :mod:`~tffre.deploy.certs` (demo certificates and keys),
:mod:`~tffre.deploy.launch` (daemons and the long-lived ClientApp process),
:mod:`~tffre.deploy.flower_patches` (Flower 1.23: fixed waits, a race),
:mod:`~tffre.deploy.project` (the Flower app folder) and :mod:`~tffre.deploy.commands` (``python -m tffre deploy``).

Importing this package imports neither TensorFlow nor Flower.
"""
