"""The README is an entrance that works as written: at most 150 lines, its links and image
resolve, its Python block runs (FedAtt's step checked against a numpy transcription of FLCMC
Eq. 11-14), and its command lines are accepted by the real parsers."""

import os
import re

import numpy as np
import pytest

from doc_blocks import commands as block_commands

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
README = os.path.join(ROOT, "README.md")


def text():
    with open(README, encoding="utf-8") as f:
        return f.read()


def blocks(language):
    """The README's fenced blocks of ``language``."""
    return re.findall(rf"```{language}\n(.*?)```", text(), re.S)


def commands(program):
    """Every ``.venv/bin/python -m tffre <program> ...`` command of the bash blocks, as its
    arguments after the program (:func:`doc_blocks.commands`)."""
    prefix = [".venv/bin/python", "-m", "tffre", *program.split()]
    return [words[len(prefix):] for block in blocks("bash") for words in block_commands(block)
            if words[:len(prefix)] == prefix]


def test_at_most_150_lines():
    assert len(text().splitlines()) <= 150


def test_the_registry_count_is_the_registrys():
    from tffre import registry
    said = re.search(r"(\d+) registry rows", text())
    assert said and int(said.group(1)) == len(registry.ALGORITHMS)


def test_links_and_image_resolve():
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text())
    local = [t for t in targets if "://" not in t]
    assert any(t.startswith("docs/papers/") for t in local)
    missing = [t for t in local if not os.path.exists(os.path.join(ROOT, t))]
    assert not missing, missing


def test_python_block_is_fedatt_step():
    """The block's ``new_w`` equals Eq. 11-14 in numpy: per layer, s_k = ||theta_t - theta_k||
    (Frobenius), alpha = softmax(s), theta_t+1 = theta_t - lambda sum_k alpha_k (theta_t -
    theta_k)."""
    namespace = {}
    exec(compile(blocks("python")[0], "README.md", "exec"), namespace)  # noqa: S102
    w = namespace["w"]
    clients = [[x + 0.1 for x in w], [x - 0.2 for x in w]]
    for layer, got in enumerate(namespace["new_w"]):
        deltas = [w[layer] - c[layer] for c in clients]
        s = np.array([np.sqrt((d ** 2).sum()) for d in deltas])
        alpha = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
        expected = w[layer] - 1.0 * sum(a * d for a, d in zip(alpha, deltas))
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-6)


def test_run_commands_resolve(tmp_path):
    """Each ``run`` line, its DIR the embedded GAD sample, passes every check the command
    makes before training (flags, values, the dataset's options)."""
    from tffre import cli, config, tasks
    lines = commands("run")
    assert lines
    sample = tasks.task_of("gad").samples["gad"]
    for argv in lines:
        argv = [sample if a == "DIR" else a for a in argv]
        if "--help" in argv:
            continue
        args = vars(cli.build_run_parser().parse_args(argv))
        given = {k: v for k, v in args.items() if k != "config"}
        given["out"] = str(tmp_path / "out")
        cfg = config.resolve(given)
        assert cfg.task.name == "relations"


def test_data_check_command_runs(capsys):
    """The ``data check`` line, its DIR the embedded GAD sample, reads it without a problem."""
    from tffre import cli, tasks
    (argv,) = commands("data check")
    sample = tasks.task_of("gad").samples["gad"]
    code = cli.data_check_main([sample if a == "DIR" else a for a in argv])
    assert code == 0, capsys.readouterr()


@pytest.mark.parametrize("program", ["run", "predict"])
def test_help_lines_exist(program):
    """``--help`` of each program the README names answers (argparse exits 0)."""
    from tffre import cli
    try:
        code = cli.main([program, "--help"])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 0
