"""The one flag vocabulary: precedence, config files, and one-line argument errors, fast."""

import json
import os
import subprocess
import sys

import pytest

from tffre import config, registry

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"}   # TF would log at this level if imported


def resolve(tmp_path, preset=None, config_path=None, **given):
    given.setdefault("out", str(tmp_path / "out"))
    return config.resolve(given, preset=preset, config_path=config_path)


def test_precedence_defaults_preset_file_flags(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"num-rounds": 7, "mu": 0.2, "stepsize": 3}))
    cfg = resolve(tmp_path, preset={"num_rounds": 5, "mu": 0.1, "learning_rate": 0.01,
                                    "algorithm": "fedpa"},
                  config_path=str(path), stepsize=9.0)
    hp = cfg.hparams["FedPA"]
    assert cfg.run.num_rounds == 7      # file over preset
    assert hp.prox_mu == 0.2            # file over preset (mu: FedPA's proximal coefficient)
    assert hp.stepsize == 9.0           # flag over file
    assert hp.learning_rate == 0.01     # preset over default
    assert cfg.run.clients == 30 and cfg.model == "logistic"   # synthetic defaults
    imcs = resolve(tmp_path, dataset="imcs")
    assert imcs.run.clients == 20 and imcs.model == "lstm" and imcs.options.data == config.SAMPLE


def test_yaml_config_with_the_same_names(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("dataset: imcs\nalgorithm: [fedavgs, FEDPAP]\nnum_iters: none\n"
                    "keep-optimizer-state: true\n")
    cfg = resolve(tmp_path, config_path=str(path))
    assert cfg.algorithms == ("FedAvgS", "FedPAP")
    for hp in cfg.hparams.values():
        assert hp.num_iters is None and hp.keep_optimizer_state is True


@pytest.mark.parametrize("text,want", [("0", None), ("none", None), ("None", None), ("12", 12)])
def test_num_iters_zero_or_none_means_no_cap(text, want):
    assert config.num_iters(text) == want


def test_no_cap_reaches_the_algorithm(tmp_path):
    cfg = resolve(tmp_path, num_iters="none", algorithm="FedAvg")
    assert cfg.hparams["FedAvg"].num_iters is None
    assert cfg.values["hparams"]["FedAvg"]["num_iters"] is None   # saved as it is
    assert registry.resolve_hparams("FedAvg").num_iters == 20     # the declared default


@pytest.mark.parametrize("given,message", [
    ({"clients": 5, "clients_per_round": 6}, "--clients-per-round 6 is larger than --clients 5"),
    ({"task": "symptom"}, "--task applies to --dataset imcs, not synthetic"),
    ({"dataset": "imcs", "model": "logistic"}, "--model logistic does not apply to --dataset imcs"),
    ({"resume": True, "overwrite": True}, "give --resume or --overwrite, not both"),
    ({"dataset": "imcs", "w2v": "/no/such.bin"}, "--w2v: no such file: /no/such.bin"),
    ({"dataset": "imcs", "data": "/no/such/folder"}, "--data: no such file or folder"),
    ({"algorithm": "FedAvg", "out": "/dev/null"}, "exists and is not a folder"),
    ({"algorithm": "FedAvg", "out": "/proc/tffre-out"}, "cannot create folders in /proc"),
])
def test_cross_checks(tmp_path, given, message):
    with pytest.raises(config.ConfigError, match=message.replace("(", r"\(")):
        resolve(tmp_path, **given)


def test_config_file_errors_name_file_and_key(tmp_path):
    bad_key = tmp_path / "a.json"
    bad_key.write_text(json.dumps({"lr": 0.1}))
    with pytest.raises(config.ConfigError, match=r"a.json: unknown option 'lr'"):
        resolve(tmp_path, config_path=str(bad_key))
    bad_value = tmp_path / "b.yaml"
    bad_value.write_text("mu: -1\n")
    with pytest.raises(config.ConfigError, match=r"b.yaml: mu: expected a finite number >= 0"):
        resolve(tmp_path, config_path=str(bad_value))
    broken = tmp_path / "c.json"
    broken.write_text("{not json")
    with pytest.raises(config.ConfigError, match=r"c.json: not valid JSON"):
        resolve(tmp_path, config_path=str(broken))


def test_out_with_results_needs_resume_or_overwrite(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(config.ConfigError, match="holds no run to resume"):
        resolve(tmp_path, resume=True)
    out.mkdir()
    (out / "metrics.csv").write_text("algorithm,round\n")
    with pytest.raises(config.ConfigError, match="already holds results; add --resume"):
        resolve(tmp_path)
    assert resolve(tmp_path, resume=True).run.resume
    assert resolve(tmp_path, overwrite=True).run.overwrite


@pytest.mark.parametrize("value,message", [
    ("inf", "expected a finite number >= 0, got inf"), ("nan", "expected a finite number"),
    ("-0.5", "got -0.5"), ("x", "expected a number, got 'x'")])
def test_learning_rate_must_be_finite(value, message):
    with pytest.raises(ValueError, match=message):
        config.non_negative_float(value)


def test_seed_range():
    with pytest.raises(ValueError, match=">= 0, got -1"):
        config.seed("-1")
    with pytest.raises(ValueError, match="<= 4294967295"):
        config.seed(str(2 ** 32))


# Runs `python -m tffre ARGS` and records, at exit, which heavy modules it imported: "fast"
# is checked as "did not import TensorFlow" (the cost of --help is TF's import, 5-20 s),
# because wall-clock bounds depend on the machine and its load.
_DRIVER = """
import atexit, runpy, sys
marker = sys.argv.pop(1)
def record():
    heavy = sorted(m for m in ("tensorflow", "tensorflow_federated", "transformers")
                   if m in sys.modules)
    with open(marker, "w") as f:
        f.write(",".join(heavy))
atexit.register(record)
sys.argv[0] = "tffre"
runpy.run_module("tffre", run_name="__main__", alter_sys=True)
"""


def cli(*args):
    """Returns (process, heavy modules it imported)."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "imported")
        proc = subprocess.run([sys.executable, "-c", _DRIVER, path, *args], capture_output=True,
                              text=True, env=ENV, timeout=120)
        with open(path) as f:
            heavy = [m for m in f.read().split(",") if m]
    return proc, heavy


def test_help_is_fast_and_quiet():
    for args in (["--help"], ["run", "--help"], ["deploy", "--help"]):
        proc, heavy = cli(*args)
        assert proc.returncode == 0 and "usage:" in proc.stdout
        assert proc.stderr == ""            # no TensorFlow log lines
        assert heavy == [], f"{args} imported {heavy}"
        if args == ["--help"]:
            assert "deploy" in proc.stdout  # the subcommand is listed
        if args == ["deploy", "--help"]:    # dispatched to tffre.deploy.commands
            assert "supernode" in proc.stdout and "python -m tffre deploy" in proc.stdout
    assert "--learning-rate" in cli("run", "--help")[0].stdout


@pytest.mark.parametrize("args,message", [
    (["--algorithm", "fedfoo"], "unknown algorithm 'fedfoo'"),
    (["--num-rounds", "0"], "--num-rounds: expected a number >= 1"),
    (["--mu", "abc"], "--mu: expected a number"),
    (["--learning-rate", "inf"], "--learning-rate: expected a finite number"),
    (["--seed", "-1"], "--seed: expected a number >= 0"),
    (["--clients", "4", "--clients-per-round", "5"], "larger than --clients 4"),
    (["--dataset", "imcs", "--alpha", "0"], "--alpha must be > 0"),
])
def test_argument_errors_are_one_fast_line(tmp_path, args, message):
    proc, heavy = cli("run", *args, "--out", str(tmp_path / "x"))
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert heavy == []                      # checked before TensorFlow is imported
    assert not (tmp_path / "x").exists()    # nothing created before the checks pass


def test_a_flag_a_preset_switches_on_can_be_switched_off(tmp_path):
    import argparse
    parser = argparse.ArgumentParser()
    config.add_run_arguments(parser)
    given = vars(parser.parse_args(["--dataset", "i2b2", "--no-freeze-embedding"]))
    given.pop("config")
    cfg = resolve(tmp_path, preset={"freeze_embedding": True, "centralised": True}, **given)
    assert cfg.options.freeze_embedding is False and cfg.run.centralised is True
    assert "freeze_embedding" not in vars(parser.parse_args([]))   # unset: the preset decides


def test_feded_needs_a_server_set(tmp_path):
    with pytest.raises(config.ConfigError, match="give --server-fraction"):
        resolve(tmp_path, dataset="i2b2", algorithm="fedavgt,feded")
    with pytest.raises(config.ConfigError, match="not both"):
        resolve(tmp_path, dataset="i2b2", algorithm="feded", server_fraction=0.2,
                server_data=str(tmp_path))
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        config.vocabulary()["server_fraction"].parse("1")
    cfg = resolve(tmp_path, dataset="i2b2", algorithm="feded", server_fraction=0.2)
    assert cfg.options.server_fraction == 0.2


def test_a_task_sets_its_own_learning_rate_per_optimizer_family(tmp_path, monkeypatch):
    """A task's learning_rates replace the optimizer's default (by family); a given rate, or
    a task without rates, keeps today's."""
    import dataclasses
    from tffre import registry, tasks as tasks_lib
    from tffre.tasks import synthetic
    task = dataclasses.replace(synthetic.TASK, learning_rates={"adam": 2e-4})
    monkeypatch.setattr(synthetic, "TASK", task)
    cfg = config.resolve({"dataset": "synthetic", "algorithm": "fedavgt,fedavg,fedproxp",
                          "out": str(tmp_path / "o")})
    assert cfg.hparams["FedAvgT"].learning_rate == 2e-4
    assert cfg.hparams["FedProxP"].learning_rate == 2e-4
    assert cfg.hparams["FedAvg"].learning_rate == 0.01          # SGD: the task says nothing
    given = config.resolve({"dataset": "synthetic", "algorithm": "fedavgt",
                            "learning_rate": 0.005, "out": str(tmp_path / "o")})
    assert given.hparams["FedAvgT"].learning_rate == 0.005
    assert registry.resolve_hparams("FedAvgT").learning_rate == 0.001
    del tasks_lib


def test_encoder_part_options_are_checked_before_any_work(tmp_path):
    base = {"dataset": "gad", "out": str(tmp_path / "o")}
    # K at least the depth is full fine-tuning: no error (the task's default 2 on a cut encoder).
    assert config.resolve(dict(base, trainable_layers=3, encoder_layers=2)).options.partial() \
        .first_top_layer(2) == 0
    with pytest.raises(config.ConfigError, match="--prefix-cache applies with"):
        config.resolve(dict(base, trainable_layers=None, prefix_cache=str(tmp_path)))
    with pytest.raises(config.ConfigError, match="--lora-alpha applies with --lora-rank"):
        config.resolve(dict(base, lora_alpha=16, trainable_layers=None))
    with pytest.raises(config.ConfigError, match="--lora-targets: expected distinct"):
        config.resolve(dict(base, lora_rank=4, lora_targets="query,keys"))
    cfg = config.resolve(dict(base, lora_rank=4, lora_targets="query,key,value"))
    assert cfg.options.lora_targets == ("query", "key", "value")
    assert cfg.options.partial().lora_rank == 4


def test_resume_compares_a_tuple_option_as_config_json_holds_it(tmp_path):
    # config.json holds --lora-targets as a list; the resolved option is a tuple. A resumed run
    # with the same flags must be accepted (it was refused: ['query', 'value'] -> ('query', ...)).
    from tffre.jsonio import write_json
    out = tmp_path / "o"
    base = {"dataset": "gad", "out": str(out), "lora_rank": 4}
    cfg = config.resolve(dict(base))
    out.mkdir()
    write_json(str(out / "config.json"), cfg.values)
    (out / "metrics.csv").write_text("algorithm,round\n")
    config.check_resume(config.resolve(dict(base, resume=True)))
    with pytest.raises(config.ConfigError, match=r"--lora-targets \['query', 'value'\] -> "
                                                 r"\['query', 'key'\]"):
        config.check_resume(config.resolve(dict(base, resume=True, lora_targets="query,key")))


def test_resume_reads_an_option_the_saved_run_predates_as_its_default(tmp_path):
    # A run saved before --faulty-clients and the rows' server optimizer and robust settings
    # existed ran as their defaults; it resumes, and a record of it matches the same flags
    # (it was refused: "--faulty-clients None -> 0").
    from tffre.jsonio import write_json
    out = tmp_path / "o"
    base = {"dataset": "imcs", "algorithm": "fedavg,fedadam", "out": str(out)}
    values = dict(config.resolve(dict(base)).values)
    for key in ("faulty_clients", "fault"):
        del values[key]
    for hp in values["hparams"].values():
        for key in ("server_optimizer", "robust", "robust_trim_rounding"):
            del hp[key]
    out.mkdir()
    write_json(str(out / "config.json"), values)
    (out / "metrics.csv").write_text("algorithm,round\n")
    config.check_resume(config.resolve(dict(base, resume=True)))
    base["out"] = str(tmp_path / "elsewhere")
    assert config.differences(values, config.resolve(dict(base))) == []
    # FedAdam's default is adam: a saved sgd is a difference, as is a fault now asked for.
    values["hparams"]["FedAdam"]["server_optimizer"] = "sgd"
    assert config.differences(values, config.resolve(dict(base))) == [
        "FedAdam server_optimizer 'sgd' -> 'adam'"]
    assert config.differences(values, config.resolve(dict(
        base, faulty_clients=1, fault="nan"))) == ["--faulty-clients 0 -> 1",
                                                   "--fault None -> 'nan'"]
