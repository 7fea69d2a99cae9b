"""The runner's names: what a task prepares is a PreparedTask ("job" names only DeployJob)."""

import dataclasses

import pytest

from tffre import runner
from tffre.runner.run_settings import PreparedTask


def test_the_old_name_warns_and_is_the_same_class():
    with pytest.warns(DeprecationWarning, match="PreparedTask"):
        old = runner.Job
    assert old is PreparedTask is runner.PreparedTask


def test_a_prepared_task_holds_data_and_its_model():
    names = [f.name for f in dataclasses.fields(PreparedTask)]
    assert names[:2] == ["data", "model"]
    with pytest.raises(TypeError):
        PreparedTask()   # data and model have no default
