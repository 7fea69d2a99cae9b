"""Checkpoints and resume: the server state (and the clients' kept states) by round.

Each algorithm's state is saved every ``checkpoint_every`` rounds and at the
last round with ``tff.program.FileProgramStateManager`` in
``checkpoints/<algorithm>/``. A resumed run loads the newest readable one and
recomputes the rounds after it: round r is the same computation whether or
not the run stopped before it (clients and batches are drawn from (seed, r)).
"""

import asyncio
import collections
import os

from tffre.runner.outputs import warn


def checkpoint_folder(out, name):
    """Where a run in ``out`` keeps algorithm ``name``'s checkpoints (and its DP seed)."""
    return os.path.join(out, "checkpoints", name)


class Checkpoints:
    """The server state of one algorithm, saved by round with TFF's ``FileProgramStateManager``."""

    def __init__(self, root_dir):
        import tensorflow_federated as tff
        self.manager = tff.program.FileProgramStateManager(root_dir, prefix="round_",
                                                           keep_total=2, keep_first=False)

    def rounds(self):
        """The rounds of the kept checkpoints, oldest first, read from their names alone (no
        state is loaded, so nothing needs to be built first)."""
        return sorted(asyncio.run(self.manager.get_versions()) or [])

    def save(self, state, round_num):
        """Saves ``state`` as version ``round_num``."""
        asyncio.run(self.manager.save(state, round_num))

    def load_latest(self, structure):
        """(state, round) of the newest readable checkpoint, or (None, 0).

        A checkpoint cut short by a kill cannot be read. The one before it is used
        then, and saved again in a folder of its own (the unreadable ones removed), so
        that the rounds after it can be saved anew.
        """
        versions = asyncio.run(self.manager.get_versions()) or []
        unreadable = False
        for version in sorted(versions, reverse=True):
            try:
                state = asyncio.run(self.manager.load(version, structure))
            except Exception as err:  # a partial SavedModel raises several types
                warn(f"checkpoint round {version} is unreadable ({type(err).__name__}); "
                     f"trying the one before")
                unreadable = True
                continue
            if unreadable:
                asyncio.run(self.manager.remove_all())
                self.save(state, version)
            return state, version
        if unreadable:
            asyncio.run(self.manager.remove_all())
        return None, 0


def saved_state(process, state, client_ids):
    """What a checkpoint holds: the server state, and for a stateful algorithm every client's
    kept state too (the initial one for clients not trained yet), so a resumed run goes on
    with the same client states."""
    if not process.stateful:
        return state
    clients = collections.OrderedDict(
        (c, process.client_states[c] if c in process.client_states
         else process.initial_client_state()) for c in client_ids)
    return collections.OrderedDict(server=state, clients=clients)


def restore_state(process, loaded):
    """The server state of a loaded checkpoint; a stateful process gets its client states back."""
    if not process.stateful:
        return loaded
    process.client_states = dict(loaded["clients"])
    return loaded["server"]
