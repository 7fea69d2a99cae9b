"""The documentation site builds with warnings as errors (a broken link or anchor, a nav entry
without its page, a docstring mkdocstrings cannot read), and its generated reference matches
the code: every option of every command's real parser is on the command-line page, every
registry name on the algorithms page, and a flag without help text fails the build."""

import argparse
import contextlib
import io
import os
import re
import subprocess
import sys

import pytest

import hook_loader

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HOOK = os.path.join(ROOT, "docs", "hooks", "reference.py")
BUILD_BUDGET = 300   # seconds: a bound against a hang (the build takes about 20 s)

# Every command of python -m tffre, as its words and the words that print its --help.
COMMANDS = [("run",), ("predict",), ("data", "check"), ("data", "prepare"), ("report",),
            ("deploy", "certs"),
            ("deploy", "app"), ("deploy", "superlink"), ("deploy", "register"),
            ("deploy", "supernode"), ("deploy", "run")]


def load_hook():
    return hook_loader.load_hook("reference.py")


@pytest.fixture(scope="module")
def hook():
    return load_hook()


def test_site_builds_with_warnings_as_errors(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")   # Material's banner about its successor
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                          os.path.join(ROOT, "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=BUILD_BUDGET)
    log = "\n".join(line for line in (run.stdout + run.stderr).splitlines()
                    if "WARNING" in line or "ERROR" in line or "Error" in line or "Aborted" in line)
    assert run.returncode == 0, log or (run.stdout + run.stderr)[-3000:]
    for page in ("index.html", "reference/cli/index.html", "reference/algorithms/index.html",
                 "reference/api/optimizers/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    # Nothing generated lands in docs/: the reference pages exist only in the built site.
    assert not os.path.exists(os.path.join(ROOT, "docs", "reference", "cli.md"))
    assert not os.path.exists(os.path.join(ROOT, "docs", "reference", "algorithms.md"))


def help_options(words):
    """The options ``python -m tffre WORDS --help`` prints, read from its output."""
    from tffre import cli
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = cli.main(list(words) + ["--help"])   # predict returns argparse's code
        except SystemExit as exit_:
            code = exit_.code
    assert code in (0, None), words
    # Option lines are indented by two spaces (descriptions, which may name other flags, more).
    invocations = [line.strip().split("  ")[0] for line in out.getvalue().splitlines()
                   if re.match(r"^ {2}-", line)]
    return {f for inv in invocations for f in re.findall(r"--[a-z0-9][a-z0-9-]*", inv)} - \
        {"--help"}


def page_sections(page):
    """{heading anchor: the section's Markdown} of a generated page's ``##`` sections."""
    parts = re.split(r"^## .*\{#([a-z0-9-]+)\}$", page, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_cli_page_lists_every_option_of_every_command(hook):
    from tffre import cli
    page = hook.cli_page()
    sections = page_sections(page)
    # The commands are the top parser's (data and deploy: their own commands).
    top = {a.dest for a in cli.build_parser()._subparsers._group_actions[0]._choices_actions}
    assert top == {"run", "predict", "data", "deploy", "report"}
    assert set(sections) == {"commands", "data", "deploy"} | {"-".join(w) for w in COMMANDS}
    for words in COMMANDS:
        listed = set(re.findall(r"`(--[a-z0-9-]+)`", sections["-".join(words)]))
        if words == ("deploy", "run"):   # its own, and run's (the page says so)
            listed |= set(re.findall(r"`(--[a-z0-9-]+)`", sections["run"]))
        missing = help_options(words) - listed
        assert not missing, (words, sorted(missing))
    # The run options are the declarations' (tffre.config.vocabulary), each with its anchor.
    from tffre import config
    for flag in config.vocabulary().values():
        assert f"{{#run--{flag.name.replace('_', '-')}}}" in sections["run"], flag.name


def test_algorithms_page_lists_every_registry_row(hook):
    from tffre import registry
    table = hook.algorithms_page().split("\n## ")[0]   # the registry's table, before "Why"
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([^`]+)`\{#[a-z0-9-]+\}.*$",
                                                        table, re.M)}
    assert list(rows) == registry.valid_algorithm_names()
    cells = {name: [c.strip() for c in row.split(" | ")] for name, row in rows.items()}
    # DP and SecAgg+ (columns 5 and 6), as tests/tffre/deploy/test_deploy_secagg.py and the
    # registry's refusals have them.
    assert cells["FedAvg"][4:6] == ["yes", "yes"]
    assert cells["FedAttS"][4:6] == ["[no](#why-fedatts)"] * 2
    assert cells["FedCMC"][5] == "[no](#why-fedcmc)"
    assert cells["FedCMC-random"][4:6] == ["yes", "yes"]


def test_a_flag_without_help_fails_the_build(hook, monkeypatch):
    parser = argparse.ArgumentParser(prog="python -m tffre example")
    parser.add_argument("--documented", help="has help")
    parser.add_argument("--undocumented")
    with pytest.raises(hook.MissingHelp, match="--undocumented has no help text"):
        hook.check_help(("example",), parser)
    # Through the page: a command's real parser given a flag without help (predict's), and a
    # run option declared with an empty help.
    from tffre import config, predict
    build = predict.build_parser

    def with_undocumented(prog=None):
        out = build(prog)
        out.add_argument("--undocumented")
        return out
    monkeypatch.setattr(predict, "build_parser", with_undocumented)
    with pytest.raises(hook.MissingHelp, match="python -m tffre predict: --undocumented"):
        hook.cli_page()
    monkeypatch.setattr(predict, "build_parser", build)
    vocabulary = config.vocabulary
    silent = config.Flag("silent_option", "run", " ")
    monkeypatch.setattr(config, "vocabulary", lambda: {**vocabulary(), "silent_option": silent})
    with pytest.raises(hook.MissingHelp, match="python -m tffre run: --silent-option"):
        hook.cli_page()
