"""tffre's ClientApp: a site answers the ServerApp's messages with its own data and folder.

Every handler (``query``, ``train``, ``evaluate``) decodes its Flower message
(:mod:`tffre.deploy.protocol`) and hands the core's kind, config and arrays to one
:class:`NodeRuntime` (the federation core's :class:`tffre.federation.site_runtime.SiteRuntime`
with the deployment's task loader and round factory), which reads the site's node
configuration (data, encoder, state folder) and keeps the built round for the
life of the process; its reply is encoded back. Only the upload leaves the site. Under
secure aggregation the ``train`` messages pass through Flower's ``secaggplus_mod`` first
(:func:`tffre.deploy.secagg.optional_secaggplus_mod`): then the site's
contribution to the sum leaves it masked, never in the clear.
"""

from tffre.deploy import protocol, secagg
from tffre.federation.site_runtime import SiteBuilders, SiteRuntime


def _load_task(name=None, dataset=None):
    from tffre.deploy.tasks import load_task
    return load_task(name, dataset)


def _make_round(*args, **kwargs):
    from tffre.deploy.round_factory import make_round
    return make_round(*args, **kwargs)


def _task_context(job):
    from tffre.deploy.tasks import task_context
    return task_context(job)


#: What a deployed site builds a job's round with (imported when first used: the ClientApp
#: module loads without TensorFlow).
DEPLOY_BUILDERS = SiteBuilders(load_task=_load_task, make_round=_make_round,
                               task_context=_task_context)


class NodeRuntime(SiteRuntime):
    """A Flower site's runtime: :class:`tffre.federation.site_runtime.SiteRuntime` with the
    deployment's builders (:data:`DEPLOY_BUILDERS`).

    Args:
      task: a task object to use instead of the node configuration's ``task`` (tests).
    """

    def __init__(self, task=None):
        super().__init__(DEPLOY_BUILDERS, task=task)


def make_client_app(runtime=None):
    """A Flower ``ClientApp`` answering with ``runtime`` (a :class:`NodeRuntime`; a fresh one
    by default)."""
    from flwr.app import Message
    from flwr.clientapp import ClientApp

    runtime = runtime or NodeRuntime()
    app = ClientApp(mods=[secagg.optional_secaggplus_mod])

    def answer(msg, context):
        if secagg.is_fit_ins(msg.content):   # SecAgg+'s collect stage: FitIns in, FitRes out
            return secagg.client_reply(runtime, msg, context)
        try:
            config, arrays = protocol.read_content(msg.content)
        except protocol.ProtocolError as err:   # answered in one line, as a data error is
            site = str(dict(context.node_config).get("site") or "?")
            return Message(protocol.make_content({"site": site, "error": str(err)}),
                           reply_to=msg)
        reply, out = runtime.handle(protocol.KIND_OF[msg.metadata.message_type], config,
                                    arrays, context.node_config)
        return Message(protocol.make_content(reply, out), reply_to=msg)

    app.query()(answer)
    app.train()(answer)
    app.evaluate()(answer)
    app.runtime = runtime
    return app


app = make_client_app()
