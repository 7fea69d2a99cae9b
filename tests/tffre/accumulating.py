"""Drives an upload aggregator's client part by hand, as a round does: ``client`` on each
upload, ``zero``, ``accumulate`` (all in one accumulator, or two then ``merge``), ``report``.
Shared by the tests of the mergeable aggregators and of the robust rules' collecting one."""

import tensorflow as tf


def accumulate_all(agg, updates, weights, order=None, split=None):
    """``agg.report`` of ``updates`` (lists of arrays) with ``weights``, accumulated in
    ``order`` (default as given); with ``split``, the first ``split`` in one accumulator and
    the rest in another, then merged."""
    order = list(range(len(updates))) if order is None else order
    uploads = [agg.client([tf.constant(u) for u in updates[i]], tf.constant(float(weights[i])))
               for i in order]
    if split is None:
        acc = agg.zero()
        for up in uploads:
            acc = agg.accumulate(acc, up)
        return agg.report(acc)
    left, right = agg.zero(), agg.zero()
    for up in uploads[:split]:
        left = agg.accumulate(left, up)
    for up in uploads[split:]:
        right = agg.accumulate(right, up)
    return agg.report(agg.merge(left, right))
