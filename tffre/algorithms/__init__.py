"""Federated algorithms: one module per algorithm that needs more than a registry row.

Each module holds a :class:`tffre.definition.Definition` subclass and its
hyperparameter declarations (e.g. :mod:`tffre.algorithms.fedproto`, the worked
example of ``docs/adding-an-algorithm.md``). The rows naming them are in
:mod:`tffre.registry`; :func:`tffre.builder.build_algorithm` builds them.
"""
