"""tffre: federated learning for medical NLP on TensorFlow Federated.

The FLCMC algorithm family (FedAvg, FedProx, FedAtt, FedPA and their Adam
variants) is built from one registry by :func:`build_algorithm`.
"""

from tffre.algorithms import ALGORITHMS, build_algorithm, valid_algorithm_names

__version__ = "0.1.0"
__all__ = ["ALGORITHMS", "build_algorithm", "valid_algorithm_names"]
