"""tffre's ClientApp: a site answers the ServerApp's messages with its own data and folder.

Every handler (``query``, ``train``, ``evaluate``) goes to one
:class:`tffre.deploy.node.NodeRuntime`, which reads the site's node
configuration (data, encoder, state folder) and keeps the built round for the
life of the process. Only the upload leaves the site. Under secure aggregation
the ``train`` messages pass through Flower's ``secaggplus_mod`` first
(:func:`tffre.deploy.secagg.optional_secaggplus_mod`): then the site's
contribution to the sum leaves it masked, never in the clear.
"""

from tffre.deploy import protocol, secagg
from tffre.deploy.node import NodeRuntime


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
        config, arrays = protocol.read_content(msg.content)
        reply, out = runtime.handle(msg.metadata.message_type, config, arrays,
                                    context.node_config)
        return Message(protocol.make_content(reply, out), reply_to=msg)

    app.query()(answer)
    app.train()(answer)
    app.evaluate()(answer)
    app.runtime = runtime
    return app


app = make_client_app()
