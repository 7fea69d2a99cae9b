"""The deployment's files and commands: certificates and keys Flower accepts, the app folder,
the run config, one-line errors, and a site's malformed data named by file, record and field."""

import os
import subprocess
import sys

import numpy as np
import pytest

from tffre.deploy import commands as cli
from tffre.deploy.certs import make_certificates
from tffre.deploy.project import write_app
from tffre.deploy.flower_config import DeploySettings, resolve_run, split_run_config
from tffre.deploy.tasks import DeployJob
from tffre.tasks.recipe import RecipeSites
from tffre.tasks.relations import RECIPE as RELATIONS
from tffre.tasks.sites import SiteDataError


def test_certificates_are_what_flower_reads(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import (load_ssh_private_key,
                                                              load_ssh_public_key)
    from flwr.supercore.primitives.asymmetric import uses_nist_ec_curve
    paths = make_certificates(str(tmp_path), hosts=["hospital.example"], sites=["a"])
    ca = x509.load_pem_x509_certificate(open(paths["ca"], "rb").read())
    server = x509.load_pem_x509_certificate(open(paths["server"], "rb").read())
    assert server.issuer == ca.subject
    ca.public_key().verify(server.signature, server.tbs_certificate_bytes,
                           ec.ECDSA(server.signature_hash_algorithm))
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", "hospital.example"} <= set(names.get_values_for_type(x509.DNSName))
    assert "127.0.0.1" in {str(a) for a in names.get_values_for_type(x509.IPAddress)}
    # As flower-supernode (private) and `flwr supernode register` (public) load them.
    private = load_ssh_private_key(open(paths["a_key"], "rb").read(), None)
    public = load_ssh_public_key(open(paths["a_pub"], "rb").read())
    assert isinstance(private, ec.EllipticCurvePrivateKey) and uses_nist_ec_curve(public)
    assert private.public_key().public_numbers() == public.public_numbers()
    for key in ("ca_key", "server_key", "a_key"):
        assert os.stat(paths[key]).st_mode & 0o077 == 0


def test_app_folder_lists_every_run_config_key_and_the_federation(tmp_path):
    import tomli
    from flwr.common.config import get_fused_config_from_dir
    write_app(str(tmp_path), address="10.0.0.1:9093", ca=str(tmp_path / "ca.crt"))
    config = tomli.loads((tmp_path / "pyproject.toml").read_text())
    flwr = config["tool"]["flwr"]
    assert flwr["app"]["components"] == {"serverapp": "tffre.deploy.server_app:app",
                                         "clientapp": "tffre.deploy.client_app:app"}
    assert flwr["federations"]["tffre"] == {"address": "10.0.0.1:9093",
                                            "root-certificates": str(tmp_path / "ca.crt")}
    keys = flwr["app"]["config"]
    assert keys["learning-rate"] == "" and keys["min-nodes"] == 2 and keys["secagg"] is False
    # Flower accepts overrides of listed keys only: the run's own names pass.
    fused = get_fused_config_from_dir(tmp_path, {"learning-rate": 0.001, "algorithm": "fedavgt"})
    assert fused["learning-rate"] == 0.001
    with pytest.raises(ValueError, match="--ca"):
        write_app(str(tmp_path / "x"), address="h:1")


def test_run_config_takes_tffre_run_names_and_refuses_unknown_keys(tmp_path):
    options, deploy = split_run_config({"learning-rate": 0.01, "algorithm": "fedavg",
                                        "min-nodes": 3, "num-iters": "", "clients": 5})
    assert options == {"learning_rate": 0.01, "algorithm": "fedavg"}
    assert deploy == {"min_nodes": 3}
    with pytest.raises(ValueError, match="run config: unknown key 'lerning-rate'"):
        split_run_config({"lerning-rate": 0.01})
    cfg, settings = resolve_run({"dataset": "gad", "algorithm": "fedavgt", "out": str(tmp_path),
                                 "learning-rate": "0.001", "secagg": True})
    assert cfg.hparams["FedAvgT"].learning_rate == 0.001 and settings.secagg
    with pytest.raises(ValueError, match="one algorithm"):
        resolve_run({"algorithm": "fedavg,fedprox", "out": str(tmp_path)})
    with pytest.raises(ValueError, match="secagg needs min-nodes >= 2"):
        DeploySettings.resolve({"secagg": True, "min_nodes": 1})


def test_a_malformed_site_file_is_named_with_its_line_and_field(tmp_path):
    folder = tmp_path / "gad"
    folder.mkdir()
    (folder / "train.tsv").write_text("Variants of @GENE$ and @DISEASE$ risk.\t1\n"
                                      "No link of @GENE$ with @DISEASE$.\tmaybe\n")
    job = DeployJob(task="relations", dataset="gad", algorithm="FedAvgT", hparams={},
                    options={}, batch_size=8, seed=0)
    with pytest.raises(SiteDataError) as err:
        RecipeSites(RELATIONS).survey(job, {"site": "a", "data": str(folder)})
    message = str(err.value)
    assert "\n" not in message and "train.tsv line 2" in message and "label" in message
    with pytest.raises(SiteDataError, match="data is required"):
        RecipeSites(RELATIONS).survey(job, {"site": "a"})


def test_commands_answer_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit, match="give --ca"):
        cli.main(["app", "--out", str(tmp_path / "app")])
    with pytest.raises(SystemExit, match="give --certs"):
        cli.main(["superlink"])
    with pytest.raises(SystemExit):
        cli.main(["supernode", "--site", "a"])   # --data missing: argparse, one line
    assert capsys.readouterr().err.count("\n") == 1
    assert cli.main(["app", "--out", str(tmp_path / "app"), "--insecure"]) == 0
    assert "warning: --insecure" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["run", "--app", str(tmp_path / "app"), "--lerning-rate", "1"])
    assert "unrecognized arguments: --lerning-rate" in capsys.readouterr().err


def test_the_daemon_launcher_keeps_tensorflow_out():
    code = ("import runpy, sys; sys.argv = ['launch', 'flower-superlink', '--help'];"
            "from tffre.deploy import launch\n"
            "try:\n    launch.main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "assert sys.modules.get('tensorflow') is None, 'tensorflow imported'\n"
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, FLWR_TELEMETRY_ENABLED="0"))
    assert out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_the_servers_labelled_set_is_tokenized_as_a_sites_data(tmp_path):
    # FedED's D_v at the server (server-data) and the same file as a site's training data
    # give the same token ids; labels index the run's labels; a bad label is named with its file,
    # line and field.
    folder = tmp_path / "dv"
    folder.mkdir()
    (folder / "train.tsv").write_text("Variants of @GENE$ raise @DISEASE$ risk.\t1\n"
                                      "No link of @GENE$ with @DISEASE$ was found.\t0\n"
                                      "@GENE$ expression rises in @DISEASE$.\t1\n")
    job = DeployJob(task="relations", dataset="gad", algorithm="FedED", hparams={},
                    options={"max_len": 24}, batch_size=2, seed=0, labels=("0", "1"))
    task = RecipeSites(RELATIONS)
    x, y = task.server_data(job, {"server-data": str(folder)})
    site = task.site_data(job, {"site": "a", "data": str(folder)})
    np.testing.assert_array_equal(x, site.train[0])
    assert list(y) == [1, 0, 1]
    (tmp_path / "bad.tsv").write_text("@GENE$ and @DISEASE$.\t2\n")
    with pytest.raises(SiteDataError) as err:
        task.server_data(job, {"server-data": str(tmp_path / "bad.tsv")})
    message = str(err.value)
    assert "\n" not in message and "bad.tsv line 1" in message and "label" in message


def supernode(*args, timeout=120):
    """``deploy supernode`` in a process of its own (no SuperLink needed: it stops first)."""
    return subprocess.run([sys.executable, "-m", "tffre", "deploy", "supernode", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, FLWR_TELEMETRY_ENABLED="0"))


def test_a_site_without_training_data_refuses_to_start_in_one_line(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    common = ["--site", "a", "--state-dir", tmp_path / "state", "--superlink", "127.0.0.1:9"]
    out = supernode(*common, "--data", empty, "--insecure")
    assert out.returncode == 1
    # --insecure still warns; then one line says why the site does not start.
    assert out.stderr.splitlines() == [
        cli.INSECURE_WARNING,
        f"python -m tffre deploy supernode: error: site a: {empty}: no split files: nothing to "
        f"train on (a site needs a training split: a file or folder whose name holds 'train', "
        f"or i2b2's txt/); not starting"]
    assert "ClientApp serving" not in out.stdout
    assert not (tmp_path / "state" / "supernode.log").exists()   # no daemon was started
    # Held-out splits only: nothing to train on either.
    (empty / "test.tsv").write_text("@GENE$ and @DISEASE$.\t1\n")
    out = supernode(*common, "--data", empty, "--insecure")
    assert out.returncode == 1 and "only test.tsv: nothing to train on" in out.stderr
    # With --dataset, python -m tffre data check's check: the first problem, named.
    (empty / "train.tsv").write_text("Variants of @GENE$ and @DISEASE$ risk.\t1\n"
                                     "No link of @GENE$ with @DISEASE$.\tmaybe\n")
    out = supernode(*common, "--data", empty, "--dataset", "gad", "--insecure")
    assert out.returncode == 1 and len(out.stderr.splitlines()) == 2
    assert "train.tsv line 2" in out.stderr and "label" in out.stderr
    assert "python -m tffre data check --dataset gad" in out.stderr


def test_a_sites_data_check_says_what_it_holds():
    from tffre import resources
    from tffre.tasks.sites import check_site_data
    gad = resources.path("re_sample", "gad")
    site = {"site": "a", "data": gad}
    said = check_site_data(RecipeSites(RELATIONS), site)
    assert said.endswith("train.tsv, dev.tsv, test.tsv (their format is checked when a run "
                         "names the dataset)")
    assert check_site_data(RecipeSites(RELATIONS), site, "gad") == \
        f"{gad}: gad, train 400, dev 60, test 100 examples"
    # A task without a check of its own is asked for its survey.
    from deploy_fakes import TinyTask
    assert check_site_data(TinyTask({"a": (np.zeros((3, 6)), np.zeros(3))}), site) == \
        f"{gad}: 3 training examples"
    with pytest.raises(SiteDataError, match="line 3: label"):
        check_site_data(TinyTask({}, bad_sites={"a"}), site)


def test_a_text_sites_node_options_reach_its_node_config_and_its_check(tmp_path, capsys):
    """``--node-option KEY=VALUE`` carries a task's other keys (--dataset text's w2v and
    site-value) into the node configuration and the start-up check."""
    notes = tmp_path / "notes.csv"
    notes.write_text("text,label,site\n" + "".join(f"note {i},{'xy'[i % 2]},{'AB'[i % 2]}\n"
                                                   for i in range(10)), encoding="utf-8")
    vectors = tmp_path / "v.txt"
    vectors.write_text("1 2\nnote 0.1 0.2\n", encoding="utf-8")
    args = cli.build_parser().parse_args([
        "supernode", "--site", "a", "--data", str(notes), "--state-dir", str(tmp_path / "s"),
        "--node-option", f"w2v={vectors}", "--node-option", "site-value=A"])
    assert cli.supernode_node_config(args) == (
        f'site="a" data="{notes}" state-dir="{tmp_path / "s"}" w2v="{vectors}" '
        f'site-value="A"')
    args.dataset = "text"
    cli.check_data(args, "deploy supernode")
    # site A's 5 texts of the 10, after 2 test and 2 dev were held out of the whole file
    said = capsys.readouterr().out.strip()
    counts = [int(w.strip(",")) for w in said.split(": text, ")[1].split()[1::2]]
    assert said.startswith(f"site a: data {notes}: text, train ") and sum(counts) == 5
    args.node_option = ["no-equals"]
    with pytest.raises(SystemExit, match="--node-option: 'no-equals' is not KEY=VALUE"):
        cli.supernode_node_config(args)


def test_a_node_options_value_is_a_path_only_where_it_may_be_one(tmp_path, monkeypatch):
    """A file named like a value (``nan``, ``A``) in the working folder leaves ``fault`` and
    ``site-value`` as given; a key that may name a file gets its absolute path."""
    monkeypatch.chdir(tmp_path)
    for name in ("nan", "A", "dict.txt"):
        (tmp_path / name).write_text("x", encoding="utf-8")
    args = cli.build_parser().parse_args([
        "supernode", "--site", "a", "--data", "d", "--node-option", "fault=nan",
        "--node-option", "site-value=A", "--node-option", "user-dict=dict.txt"])
    assert cli.node_options(args) == {"fault": "nan", "site-value": "A",
                                      "user-dict": str(tmp_path / "dict.txt")}


def test_the_clientapps_local_channel_is_not_reported_as_insecure(capsys, caplog):
    import logging
    from tffre.deploy.launch import LOCAL_CHANNEL, open_local_channel
    caplog.set_level(logging.DEBUG, logger="flwr")
    channel = open_local_channel("127.0.0.1:9")
    channel.close()
    assert "insecure" not in caplog.text.lower()
    assert capsys.readouterr().out == LOCAL_CHANNEL.format(address="127.0.0.1:9") + "\n"
    # Flower still reports a channel without certificates anywhere else.
    from flwr.common.grpc import create_channel
    create_channel(server_address="127.0.0.1:9", insecure=True, root_certificates=None).close()
    assert "Opened insecure gRPC connection" in caplog.text
    with pytest.raises(ValueError, match="loopback"):
        open_local_channel("10.0.0.1:9094")


def test_deploy_superlink_finds_flowers_helpers_without_an_activated_venv(monkeypatch,
                                                                         tmp_path):
    # flower-superlink starts flower-superexec from PATH: deploy superlink puts its own
    # interpreter's folder (the venv's bin) first, activated or not.
    seen = {}

    def execv(path, command):
        seen.update(path=path, command=command, PATH=os.environ["PATH"])
        raise SystemExit(0)
    monkeypatch.setattr(os, "execv", execv)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    with pytest.raises(SystemExit):
        cli.main(["superlink", "--insecure", "--state-dir", str(tmp_path)])
    assert seen["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    assert seen["command"][:4] == [sys.executable, "-m", "tffre.deploy.launch",
                                   "flower-superlink"]


def test_deploy_run_help_shows_the_deployment_defaults(capsys):
    """``deploy run --help`` gives each deployment setting's default, as declared."""
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"], prog="tffre deploy")
    text = " ".join(capsys.readouterr().out.split())
    for field in DeploySettings.declarations():
        if field.default is not None and not field.declaration.flag:
            assert f"(default {field.default})" in text, field.name
    assert "the run stops (default 2)" in text and "(default 1800.0)" in text


def test_a_site_refused_after_serving_gets_the_whole_wait_again():
    """``deploy supernode`` asks a SuperLink that refuses it for ``wait`` seconds from the
    first refusal of each streak, not from the site's start (a SuperLink restarted hours in
    used to end the site at once)."""
    now = [0.0]
    streak = cli.RefusalStreak(120, clock=lambda: now[0])
    assert streak.retry(admitted=False, refused=True)        # streak 1 starts at 0
    now[0] = 119.0
    assert streak.retry(admitted=False, refused=True)
    now[0] = 121.0
    assert not streak.retry(admitted=False, refused=True)    # 120 s gone
    streak = cli.RefusalStreak(120, clock=lambda: now[0])
    now[0] = 0.0
    assert streak.retry(admitted=False, refused=True)
    now[0] = 3600.0                                         # admitted, served, refused
    assert streak.retry(admitted=True, refused=True)         # streak 2 starts at 3600
    now[0] = 3719.0
    assert streak.retry(admitted=False, refused=True)
    now[0] = 3721.0
    assert not streak.retry(admitted=False, refused=True)
    assert not cli.RefusalStreak(120).retry(admitted=True, refused=False)   # another error
