"""The one registry of executors, loops and client workers (tffre.execution): the flags read it
(values and help as they were before it), and build_process dispatches on it, handing each
builder only the settings its row says it reads."""

import sys
import types

import pytest

from tffre import execution
from tffre.execution import Executor
from tffre.runner.run_settings import RunSettings

# The flags' help before the registry (tffre/runner/run_settings.py at f73ad5a), verbatim.
HELP_BEFORE = {
    "executor": "tff: TFF's runtime (CPU only); local: this process, GPU when present; auto: "
                "local when a GPU is visible",
    "client_workers": "local executor: parallel clients in threads of this process, or in "
                      "worker processes with a TensorFlow runtime each (faster for small "
                      "models on a CPU)",
    "loop": "local executor: one graph with a while loop (fastest), per-batch compiled steps, "
            "or dataset.reduce",
}


def test_the_flags_take_their_values_and_help_from_the_registry():
    fields = {f.name: f for f in RunSettings.declarations()}
    assert fields["executor"].declaration.parse.choices == ("auto", "tff", "local")
    assert fields["loop"].declaration.parse.choices == ("while", "steps", "reduce")
    assert fields["client_workers"].declaration.parse.choices == ("threads", "processes")
    assert (fields["executor"].default, fields["loop"].default,
            fields["client_workers"].default) == ("auto", "while", "threads")
    for name, text in HELP_BEFORE.items():
        assert fields[name].declaration.help == text


def test_the_vocabularies_are_declared_once():
    import pathlib
    root = pathlib.Path(execution.__file__).parents[1]
    literals = ('("auto", "tff", "local")', '("threads", "processes")',
                '("while", "steps", "reduce")')
    found = [(str(p.relative_to(root)), lit) for p in root.rglob("*.py")
             for lit in literals if lit in p.read_text(encoding="utf-8")]
    assert found == []


@pytest.fixture
def recording(monkeypatch):
    """Two registered executors whose builders record what they are given."""
    calls = []
    module = types.ModuleType("recording_builders")
    module.plain = lambda factory, **kw: calls.append(("plain", factory, kw)) or "plain process"
    module.parallel = lambda factory, **kw: calls.append(("parallel", factory, kw)) or "par"
    monkeypatch.setitem(sys.modules, "recording_builders", module)
    monkeypatch.setattr(execution, "EXECUTOR_REGISTRY", (
        Executor("plain", "recording_builders:plain", "no settings"),
        Executor("parallel", "recording_builders:parallel", "every setting",
                 loops=(("fast", "a fast loop"),), client_workers=(("threads", "threads"),),
                 parallel=True)))
    return calls


def test_build_process_hands_each_builder_the_settings_its_row_reads(recording):
    settings = dict(max_parallel_clients=3, loop="fast", client_workers="threads")
    assert execution.build_process("F", executor="plain", name="FedAvg", **settings) == \
        "plain process"
    assert execution.build_process("G", executor="parallel", name="FedAvg", **settings) == "par"
    assert recording == [("plain", "F", {"name": "FedAvg"}),
                         ("parallel", "G", dict(settings, name="FedAvg"))]
    with pytest.raises(ValueError, match="executor must be one of auto, plain, parallel, got "
                                         "'local'"):
        execution.build_process("F", executor="local")


def test_auto_resolves_through_the_registrys_choice(monkeypatch):
    import tensorflow as tf
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
    assert execution.resolve_executor("auto") == execution.AUTO_CHOICE["CPU"] == "tff"
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["GPU:0"] if kind == "GPU" else [])
    assert execution.resolve_executor("auto") == execution.AUTO_CHOICE["GPU"] == "local"
