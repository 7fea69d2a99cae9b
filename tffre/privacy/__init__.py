"""Client-level differential privacy: DP-FedAvg aggregation and its (epsilon, delta) accounting.

:mod:`tffre.privacy.aggregator` clips, noises and averages the uploads;
:mod:`tffre.privacy.accounting` states the (epsilon, delta) and calibrates the noise.
`accounting` imports no TensorFlow.
"""
