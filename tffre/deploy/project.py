"""The Flower app folder ``flwr run`` submits: a pyproject.toml naming tffre's apps.

``flwr run APP FEDERATION`` zips the folder (the FAB) and sends it to the
SuperLink. tffre's ServerApp and ClientApp live in the installed package
(:data:`tffre.deploy.launch.SERVER_APP`, :data:`~tffre.deploy.launch.CLIENT_APP`),
so the folder holds only the pyproject.toml:

* ``[tool.flwr.app.components]``: the two apps;
* ``[tool.flwr.app.config]``: every run-config key (Flower accepts an override only
  for a key listed here): ``python -m tffre run``'s option names with dashes, ""
  meaning "not set", and the deployment's settings with their defaults
  (:class:`tffre.deploy.flower_config.DeploySettings`);
* ``[tool.flwr.federations.<name>]``: the SuperLink's Control API address and its CA
  certificate (or ``insecure = true``).

Write it outside the repository: ``flwr run`` adds a ``.credentials`` folder to it.
"""

import os

FEDERATION = "tffre"
README = """# tffre deployment app

`flwr run` submits this folder. tffre's ServerApp and ClientApp come from the installed
tffre package (`tffre.deploy`); the sites run only tffre's ClientApp, never code sent
with a run. See `python -m tffre deploy --help`.
"""


def run_config_defaults():
    """{key: default} of every run-config key (see the module docstring)."""
    from tffre import config as config_lib
    from tffre.deploy.flower_config import IGNORED, DeploySettings
    keys = {}
    for name in config_lib.vocabulary():
        if name not in IGNORED:
            keys[name.replace("_", "-")] = ""
    for field in DeploySettings.declarations():
        keys[field.name.replace("_", "-")] = "" if field.default is None else field.default
    return keys


def write_app(folder, *, address, ca=None, insecure=False, federation=FEDERATION):
    """Writes ``folder/pyproject.toml`` (see the module docstring); returns ``folder``.

    Args:
      address: the SuperLink's Control API, ``host:port`` (9093 by default).
      ca: the CA certificate that signed the SuperLink's (TLS); required unless ``insecure``.
      insecure: talk to the SuperLink without TLS.
    """
    import tomli_w
    from tffre import __version__
    from tffre.deploy.launch import CLIENT_APP, SERVER_APP
    if not insecure and not ca:
        raise ValueError("give the CA certificate (--ca) or --insecure")
    federation_config = {"address": address}
    if insecure:
        federation_config["insecure"] = True
    else:
        federation_config["root-certificates"] = os.path.abspath(ca)
    project = {
        "build-system": {"requires": ["hatchling"], "build-backend": "hatchling.build"},
        "project": {"name": "tffre-deploy", "version": __version__,
                    "description": "tffre's rounds across sites (tffre.deploy)",
                    "dependencies": [f"tffre=={__version__}"]},
        "tool": {"hatch": {"build": {"targets": {"wheel": {"packages": ["."]}}}},
                 "flwr": {"app": {"publisher": "tffre",
                                  "components": {"serverapp": SERVER_APP,
                                                 "clientapp": CLIENT_APP},
                                  "config": run_config_defaults()},
                          "federations": {"default": federation,
                                          federation: federation_config}}},
    }
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "pyproject.toml"), "wb") as f:
        tomli_w.dump(project, f)
    # A FAB needs one file besides pyproject.toml: Flower 1.23 cannot install one whose
    # content list is empty.
    with open(os.path.join(folder, "README.md"), "w", encoding="utf-8") as f:
        f.write(README)
    return folder
