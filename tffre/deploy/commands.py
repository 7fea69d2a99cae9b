"""``python -m tffre deploy ...``: certificates, the app folder, the daemons and a run.

    python -m tffre deploy certs --out certs --sites a,b,c          # CA, server cert, site keys
    python -m tffre deploy app --out app --superlink HOST:9093 --ca certs/ca.crt
    python -m tffre deploy superlink --certs certs --state-dir superlink     # the server
    python -m tffre deploy register --app app --key certs/sites/a.pub       # allow site a
    python -m tffre deploy supernode --superlink HOST:9092 --ca certs/ca.crt \\
        --key certs/sites/a.key --site a --data /site/gad                    # at site a
    python -m tffre deploy run --app app --dataset gad --algorithm fedavgt \\
        --num-rounds 3 --min-nodes 3 --out results/gad-deployed             # a run

TLS is on unless ``--insecure`` is given (with a warning); a SuperLink with TLS
admits only registered sites (``--enable-supernode-auth``) unless ``--open``.
``run`` takes ``python -m tffre run``'s options (and the deployment's:
``--min-nodes``, ``--round-timeout``, ``--secagg``...). Argument errors answer in
one line.
"""

import argparse
import os
import signal
import sys
import tempfile
import time

from tffre.errors import OneLineParser

PROG = "python -m tffre deploy"
# A restarted site waits up to this long for the SuperLink to let its previous connection go
# (2 heartbeat intervals of 30 s in flwr 1.23, plus a margin), trying every few seconds.
REACTIVATION_WAIT = 120.0
REACTIVATION_RETRY = 5.0
INSECURE_WARNING = ("warning: --insecure: traffic between the SuperLink and the sites is not "
                    "encrypted and sites are not authenticated; use it only on a trusted "
                    "network or for a local test")


def build_parser(prog=PROG):
    """The parser of ``deploy`` and its commands."""
    parser = OneLineParser(prog=prog, description=__doc__.splitlines()[0],
                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    p = sub.add_parser("certs", help="write a demo CA, the SuperLink's certificate and site keys")
    p.add_argument("--out", required=True, help="folder for the files")
    p.add_argument("--host", action="append", default=[],
                   help="a name or address the SuperLink is reached at (repeatable; "
                        "localhost, 127.0.0.1 and ::1 are always in)")
    p.add_argument("--sites", default="", help="comma-separated site names: one key pair each")

    p = sub.add_parser("app", help="write the Flower app folder flwr run submits")
    p.add_argument("--out", required=True, help="the app folder (outside the repository)")
    p.add_argument("--superlink", default="127.0.0.1:9093",
                   help="the SuperLink's Control API, host:port (default 127.0.0.1:9093)")
    _tls(p)

    p = sub.add_parser("superlink", help="run the SuperLink (the server's daemon)")
    p.add_argument("--certs", help="folder with ca.crt, server.pem and server.key "
                                   "(python -m tffre deploy certs)")
    p.add_argument("--insecure", action="store_true", help="no TLS (not for real sites)")
    p.add_argument("--open", action="store_true",
                   help="admit any site (no --enable-supernode-auth)")
    p.add_argument("--state-dir", default=os.path.join("~", ".tffre", "superlink"),
                   help="its database (registered sites survive a restart)")
    p.add_argument("--host", default="0.0.0.0", help="address the Fleet and Control APIs bind")
    p.add_argument("--fleet-port", type=int, default=9092,
                   help="the Fleet API's port, which the sites connect to")
    p.add_argument("--control-port", type=int, default=9093,
                   help="the Control API's port, which flwr run and deploy register connect to")
    p.add_argument("--serverappio-port", type=int, default=9091,
                   help="the ServerApp's local API (bound to 127.0.0.1)")

    p = sub.add_parser("register", help="allow a site's public key at the SuperLink")
    _app_arguments(p)
    p.add_argument("--key", required=True, help="the site's public key (<site>.pub)")

    p = sub.add_parser("supernode", help="run a site's SuperNode and its ClientApp")
    p.add_argument("--superlink", default="127.0.0.1:9092",
                   help="the SuperLink's Fleet API, host:port (default 127.0.0.1:9092)")
    p.add_argument("--site", required=True, help="this site's name")
    p.add_argument("--data", required=True, help="this site's data: a file or a folder of "
                                                 "train/dev/test files of the dataset's format")
    p.add_argument("--encoder", help="this site's encoder folder (default the packaged "
                                     "all-MiniLM-L6-v2)")
    p.add_argument("--state-dir", help="this site's own folder (default ~/.tffre/nodes/SITE)")
    p.add_argument("--node-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a task's other node configuration, repeatable (--dataset text: "
                        "w2v=/site/vectors.txt, user-dict=FILE, site-value=A); a value that "
                        "names a file or folder is made absolute")
    p.add_argument("--deploy-task", default=None,
                   help="module:attribute, a task of this site's own (default: the run's "
                        "task, one of tffre's)")
    p.add_argument("--dataset", help="the data's format (gad, i2b2, ...): the site then checks "
                   "it as python -m tffre data check does before it starts (without, it "
                   "checks that --data holds a training split)")
    p.add_argument("--key", help="this site's private key (<site>.key): the SuperLink "
                                 "admits registered keys only")
    p.add_argument("--clientappio-port", type=int, default=0,
                   help="the node's local API port (default: a free one)")
    p.add_argument("--poll", type=float, default=None,
                   help="shorten Flower's fixed waits to this many seconds (default: "
                        "Flower's 3 s; tffre.deploy.flower_patches)")
    p.add_argument("--log", help="file for the flower-supernode daemon's output (default "
                   "supernode.log in --state-dir)")
    _tls(p, ca_help="the CA certificate that signed the SuperLink's")

    p = sub.add_parser("run", help="start a run: python -m tffre run's options and "
                                   "--min-nodes, --round-timeout, --secagg, ...",
                       add_help=False)
    _app_arguments(p)
    return parser


def _app_arguments(parser):
    """``--app`` and ``--federation``: the app folder a command submits to, or registers with."""
    parser.add_argument("--app", required=True, help="the app folder (deploy app)")
    parser.add_argument("--federation", default=None,
                        help="the federation of the app folder's pyproject.toml to use "
                             "(default: its default, tffre)")


def _tls(parser, ca_help="the CA certificate that signed the SuperLink's (TLS)"):
    parser.add_argument("--ca", help=ca_help)
    parser.add_argument("--insecure", action="store_true", help="no TLS (not for real sites)")


def _check_tls(args, prog):
    if args.insecure:
        print(INSECURE_WARNING, file=sys.stderr)
        return None
    if not args.ca:
        raise SystemExit(f"{prog}: error: give --ca (the CA certificate) or --insecure")
    if not os.path.isfile(args.ca):
        raise SystemExit(f"{prog}: error: --ca: no such file: {args.ca}")
    return os.path.abspath(args.ca)


def _exec(command):
    """Replaces this process with ``command`` (the daemon gets our signals and exit code)."""
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    bin_dir = os.path.dirname(sys.executable)   # flwr's own helpers (flower-superexec, ...)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)


def superlink_args(args):
    """flower-superlink's arguments for ``deploy superlink``'s ``args``."""
    state = os.path.abspath(os.path.expanduser(args.state_dir))
    os.makedirs(state, exist_ok=True)
    out = ["--fleet-api-address", f"{args.host}:{args.fleet_port}",
           "--control-api-address", f"{args.host}:{args.control_port}",
           "--serverappio-api-address", f"127.0.0.1:{args.serverappio_port}",
           "--database", os.path.join(state, "superlink.db"),
           "--storage-dir", os.path.join(state, "storage")]
    if args.insecure:
        return out + ["--insecure"]
    folder = os.path.abspath(args.certs)
    files = [os.path.join(folder, n) for n in ("ca.crt", "server.pem", "server.key")]
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise SystemExit(f"deploy superlink: error: --certs: no such file: {missing[0]} "
                         f"(make them with: deploy certs)")
    out += ["--ssl-ca-certfile", files[0], "--ssl-certfile", files[1],
            "--ssl-keyfile", files[2]]
    return out if args.open else out + ["--enable-supernode-auth"]


def site_state_dir(args):
    """``deploy supernode``'s own folder (``--state-dir``, default ~/.tffre/nodes/SITE)."""
    state = args.state_dir or os.path.join("~", ".tffre", "nodes", args.site)
    return os.path.abspath(os.path.expanduser(state))


def supernode_node_config(args):
    """The ``--node-config`` string of ``deploy supernode``'s ``args``."""
    def quoted(value):
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    data = os.path.abspath(args.data) if os.path.exists(args.data) else args.data
    items = {"site": args.site, "data": data, "state-dir": site_state_dir(args)}
    if args.deploy_task:
        items["task"] = args.deploy_task
    if args.encoder:
        items["encoder"] = os.path.abspath(args.encoder)
    items.update(node_options(args))
    return " ".join(f"{k}={quoted(v)}" for k, v in items.items())


#: Node options whose value is never a path, though a file of that name may exist in the
#: working folder (``fault=nan``, ``site-value=A``): kept as given.
VALUE_OPTIONS = ("fault", "site-value")


def node_options(args):
    """{key: value} of ``deploy supernode``'s ``--node-option KEY=VALUE`` (a value naming an
    existing path made absolute, but for :data:`VALUE_OPTIONS`); SystemExit with one line for
    one without ``=``."""
    out = {}
    for item in getattr(args, "node_option", None) or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SystemExit(f"--node-option: {item!r} is not KEY=VALUE")
        path = key not in VALUE_OPTIONS and os.path.exists(value)
        out[key] = os.path.abspath(value) if path else value
    return out


def check_data(args, prog):
    """A site's own data before it starts (:func:`tffre.tasks.sites.check_site_data`): prints
    one line on what it holds; SystemExit with one line when it has nothing to train on."""
    from tffre.deploy.tasks import load_task
    from tffre.tasks.sites import SiteDataError, check_any_site, check_site_data
    site = {"site": args.site, "data": args.data, **node_options(args)}
    if args.encoder:
        site["encoder"] = args.encoder
    try:
        if args.deploy_task or args.dataset:
            what = check_site_data(load_task(args.deploy_task, args.dataset), site,
                                   args.dataset)
        else:   # the format is known when a run names the dataset
            what = check_any_site(site)
    except SiteDataError as err:
        raise SystemExit(f"{prog}: error: site {args.site}: {' '.join(str(err).split())}; "
                         f"not starting") from None
    except ValueError as err:   # --task cannot be loaded, --dataset unknown
        raise SystemExit(f"{prog}: error: {' '.join(str(err).split())}") from None
    if what:
        print(f"site {args.site}: data {what}", flush=True)


def _task_environment(args):
    """The environment the site's task asks for (``Task.environment``: the image task turns
    oneDNN off, whose convolutions corrupt memory on a smaller last batch), set before the
    ClientApp imports TensorFlow, as ``python -m tffre run`` sets it. A site started without
    ``--dataset`` cannot know its task before a job arrives: start image sites with it."""
    from tffre import tasks
    if not args.dataset:
        return
    try:
        task = tasks.task_of(args.dataset)
    except ValueError:
        return   # check_data has refused an unknown dataset already
    for key, value in task.environment.items():
        os.environ.setdefault(key, value)


def run_supernode(args, prog):
    """``deploy supernode``: checks the site's data, then runs flower-supernode (``--isolation
    process``) as a child and, once the SuperLink admitted it, the site's ClientApp in this
    process (:func:`tffre.deploy.launch.serve_clientapp`)."""
    from tffre.deploy.launch import POLL_VARIABLE, Daemon, flower_command, free_port, \
        serve_clientapp, wait_for_port
    ca = _check_tls(args, prog)
    if not args.deploy_task and not os.path.exists(args.data):
        raise SystemExit(f"{prog}: error: --data: no such file or folder: {args.data}")
    if args.key and not os.path.isfile(args.key):
        raise SystemExit(f"{prog}: error: --key: no such file: {args.key}")
    _task_environment(args)   # before anything imports TensorFlow
    check_data(args, prog)
    port = args.clientappio_port or free_port()
    command = ["flower-supernode", "--superlink", args.superlink, "--isolation", "process",
               "--clientappio-api-address", f"127.0.0.1:{port}",
               "--node-config", supernode_node_config(args)]
    command += ["--insecure"] if ca is None else ["--root-certificates", ca]
    if args.key:
        command += ["--auth-supernode-private-key", os.path.abspath(args.key)]
    # The SuperNode keeps the run's FAB under FLWR_HOME (default ~/.flwr, shared by every
    # SuperNode of a user: two writing one FAB's .META at once make the other's read fail
    # with a JSON error). Each site gets its own, in its folder.
    env = {"FLWR_HOME": os.path.join(site_state_dir(args), "flwr")}
    # The daemon's log is read for the SuperLink's answer: it always goes to a file.
    args.log = args.log or os.path.join(site_state_dir(args), "supernode.log")
    os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
    if args.poll:
        env[POLL_VARIABLE] = str(args.poll)
    stop = []

    def on_signal(signum, frame):
        stop.append(signum)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    # A site restarted soon after it died is refused by the SuperLink ("could not be
    # activated") until its previous connection lapses: flwr 1.23 counts a node online
    # until its heartbeats (every 30 s, fixed) are 2 intervals overdue. Try again meanwhile.
    streak = RefusalStreak(REACTIVATION_WAIT)
    while True:
        offset = os.path.getsize(args.log) if os.path.isfile(args.log) else 0
        daemon = Daemon(flower_command(*command), log=args.log, env=env,
                        name="flower-supernode")
        node = None
        try:
            wait_for_port("127.0.0.1", port, 120, daemon)
            node = wait_for_admission(args, offset, daemon, lambda: bool(stop))
            if node is not None:
                print(f"site {args.site}: SuperNode {daemon.pid} admitted by the SuperLink "
                      f"(node {node}); ClientApp serving", flush=True)
                serve_clientapp(f"127.0.0.1:{port}", poll=min(args.poll or 0.2, 0.2),
                                should_stop=lambda: bool(stop) or not daemon.alive())
        except RuntimeError:   # it exited before its ClientAppIo port opened
            pass
        finally:
            daemon.stop()
        if stop:
            return 0
        why = _refusal(args.log, offset)
        if streak.retry(admitted=node is not None,
                        refused=bool(why and "could not be activated" in why)):
            print(f"site {args.site}: the SuperLink still counts this node's previous "
                  f"connection as online (until its heartbeats are 60 s overdue); trying "
                  f"again in {REACTIVATION_RETRY:g} s", flush=True)
            time.sleep(REACTIVATION_RETRY)
            continue
        print(f"{prog}: error: site {args.site}: "
              + (f"the SuperLink refused it: {why}" if why else
                 f"flower-supernode exited (code {daemon.process.returncode})")
              + f"; see {args.log}", file=sys.stderr)
        return 1


class RefusalStreak:
    """How long a site goes on asking a SuperLink that refuses it: ``wait`` seconds from the
    first refusal of a streak. An admission ends the streak, so a site refused after hours
    of serving (its SuperLink restarted) gets the whole wait again."""

    def __init__(self, wait, clock=time.monotonic):
        self.wait, self.clock, self.deadline = float(wait), clock, None

    def retry(self, *, admitted, refused):
        """Whether to start the SuperNode again, after one that was ``admitted`` (then
        exited) or not, and ``refused`` as a node still counted online, or not."""
        if admitted:
            self.deadline = None
        if not refused:
            return False
        if self.deadline is None:
            self.deadline = self.clock() + self.wait
        return self.clock() < self.deadline


#: Seconds a SuperNode may take to reach the SuperLink before the site says it is waiting.
CONNECT_NOTE_AFTER = 10.0


def wait_for_admission(args, offset, daemon, should_stop, poll=0.1):
    """The node id the SuperLink gave ``daemon`` (read from its log after byte ``offset``:
    :data:`tffre.deploy.flower_patches.ADMITTED`), or None when the daemon exited first (it
    was refused) or ``should_stop()``. Flower retries an unreachable SuperLink without end;
    after :data:`CONNECT_NOTE_AFTER` seconds the site says once that it is waiting."""
    import re
    from tffre.deploy.flower_patches import ADMITTED
    pattern = re.compile(re.escape(ADMITTED).replace(re.escape("{node_id}"), r"(\d+)"))
    noted, start = False, time.monotonic()
    while not should_stop():
        with open(args.log, "rb") as f:
            f.seek(offset)
            found = pattern.search(f.read().decode(errors="replace"))
        if found:
            return int(found.group(1))
        if not daemon.alive():
            return None
        if not noted and time.monotonic() - start > CONNECT_NOTE_AFTER:
            noted = True
            print(f"site {args.site}: waiting for the SuperLink at {args.superlink} (Flower "
                  f"tries again until it answers)", flush=True)
        time.sleep(poll)
    return None


def _refusal(log, offset=0):
    """Why the SuperLink refused a daemon, from its log after byte ``offset``: the line of
    :data:`tffre.deploy.flower_patches.REFUSED` (e.g. "No SuperNode found with the given
    public key. (FAILED_PRECONDITION)"), else the gRPC ``details`` of the last error, or
    None."""
    if not log or not os.path.isfile(log):
        return None
    import re
    from tffre.deploy.flower_patches import REFUSED
    with open(log, "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    marker = REFUSED.split("{")[0]
    lines = [line.split(marker, 1)[1].strip() for line in text.splitlines() if marker in line]
    if lines:
        return lines[-1]
    found = re.findall(r'details = "([^"]*)"', text)
    return found[-1] if found else None


def run_config_file(argv, prog):
    """The run-config TOML of ``deploy run``'s options (``python -m tffre run``'s names, and
    the deployment's), written to a temporary file; returns its path."""
    import tomli_w
    from tffre import config as config_lib
    from tffre.deploy.flower_config import DeploySettings
    parser = OneLineParser(prog=f"{prog} run", description="Start a deployed run.")
    _app_arguments(parser)
    config_lib.add_run_arguments(parser)
    for field in DeploySettings.declarations():
        flag = "--" + field.name.replace("_", "-")
        if field.declaration.flag:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS, help=field.declaration.help)
        else:
            # The default in the help, as run's options show theirs (the value is SUPPRESSed
            # so that only given flags reach the run config).
            shown = "" if field.default is None else f" (default {field.default})"
            parser.add_argument(flag, default=argparse.SUPPRESS,
                                help=field.declaration.help + shown)
    args = parser.parse_args(argv)
    values = {k: v for k, v in vars(args).items() if k not in ("app", "federation", "config")}
    if getattr(args, "config", None):
        values = {**config_lib.read_config_file(args.config), **values}
    for key in ("out", "encoder", "concept_file"):
        if values.get(key):
            values[key] = os.path.abspath(os.path.expanduser(str(values[key])))
    config = {k.replace("_", "-"): v if isinstance(v, (bool, int, float)) else str(v)
              for k, v in values.items() if v is not None}
    fd, path = tempfile.mkstemp(prefix="tffre-run-config-", suffix=".toml")
    with os.fdopen(fd, "wb") as f:
        tomli_w.dump(config, f)
    return args, path


def start_run(args, config_path, prog):
    """``flwr run --stream`` (its output passed through), then the run's final status from
    ``flwr ls``: ``flwr run`` exits 0 whatever becomes of the run. Returns the exit code."""
    import json
    import re
    import subprocess
    from tffre.deploy.launch import flower_command
    target = [os.path.abspath(args.app)] + ([args.federation] if args.federation else [])
    run_id = None
    with subprocess.Popen(flower_command("flwr", "run", *target, "--run-config", config_path,
                                         "--stream"), stdout=subprocess.PIPE, text=True,
                          errors="replace") as flwr_run:
        for line in flwr_run.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            found = re.search(r"Successfully started run (\d+)", line)
            run_id = run_id or (found and found.group(1))
    if flwr_run.returncode or run_id is None:
        return flwr_run.returncode or 1
    listed = subprocess.run(flower_command("flwr", "ls", *target, "--run-id", run_id,
                                           "--format", "json"),
                            capture_output=True, text=True, timeout=120)
    try:
        status = json.loads(listed.stdout)["runs"][0]["status"]
    except (ValueError, KeyError, IndexError):
        print(f"{prog} run: error: could not read run {run_id}'s status: "
              f"{' '.join((listed.stdout + listed.stderr).split())[-300:]}", file=sys.stderr)
        return 1
    if status != "finished:completed":
        print(f"{prog} run: error: run {run_id} ended {status} (see the log above)",
              file=sys.stderr)
        return 1
    return 0


def main(argv=None, prog=PROG):
    """Entry point of ``python -m tffre deploy``; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["run"]:
        args, path = run_config_file(argv[1:], prog)
        try:
            return start_run(args, path, prog)
        finally:
            os.remove(path)
    args = build_parser(prog).parse_args(argv)
    if args.command == "certs":
        from tffre.deploy.certs import make_certificates
        sites = [s.strip() for s in args.sites.split(",") if s.strip()]
        paths = make_certificates(args.out, hosts=args.host, sites=sites)
        print(f"wrote {len(paths)} files to {args.out}/ (CA: {paths['ca']}); keep the .key "
              f"files private")
        return 0
    if args.command == "app":
        from tffre.deploy.project import write_app
        ca = _check_tls(args, f"{prog} app")
        write_app(args.out, address=args.superlink, ca=ca, insecure=args.insecure)
        print(f"wrote {os.path.join(args.out, 'pyproject.toml')}")
        return 0
    if args.command == "superlink":
        if args.insecure:
            print(INSECURE_WARNING, file=sys.stderr)
        elif not args.certs:
            raise SystemExit(f"{prog} superlink: error: give --certs (deploy certs) or "
                             f"--insecure")
        from tffre.deploy.launch import flower_command
        _exec(flower_command("flower-superlink", *superlink_args(args)))
    if args.command == "register":
        from tffre.deploy.launch import flower_command
        federation = [args.federation] if args.federation else []
        _exec(flower_command("flwr", "supernode", "register", os.path.abspath(args.key),
                             os.path.abspath(args.app), *federation))
    if args.command == "supernode":
        return run_supernode(args, f"{prog} supernode")
    return 2


if __name__ == "__main__":
    sys.exit(main())
