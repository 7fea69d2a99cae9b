"""Fixtures for the tffre tests."""

import pytest
import tensorflow as tf


@pytest.fixture
def loss():
    return tf.keras.losses.SparseCategoricalCrossentropy()
