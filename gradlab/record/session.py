"""Recording in this process: the pytest plugin's `--gradlab-record DIR`.

The recorder wraps this process's calls at once (torch imported now), and the environment
gets what `gradlab record` gives a command, so the subprocesses a test starts are recorded
into the same folder.  `finish` writes the spec folder once the session's tests are done.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gradlab.record import command

#: What this process's environment gets (and loses again at finish).
ENV_KEYS = ("PYTHONPATH", "GRADLAB_RECORD_DIR", "GRADLAB_RECORD_LIB",
            "GRADLAB_RECORD_MAX_SIGNATURES", "GRADLAB_RECORD_MAX_BYTES")


class InProcess:
    """A record of this process (and the Python processes it starts) into `folder`."""

    def __init__(self, folder: Path, max_signatures: int = command.MAX_SIGNATURES,
                 max_bytes: int = command.MAX_BYTES) -> None:
        self.folder, self.max_signatures, self.max_bytes = folder, max_signatures, max_bytes
        self.recorder: Any = None
        self.saved: dict[str, str | None] = {}

    def start(self) -> None:
        from gradlab.record.hook import Recorder
        from gradlab.record.wrap import install, installed

        env = command.recorder_env(self.folder, self.max_signatures, self.max_bytes)
        self.saved = {k: os.environ.get(k) for k in ENV_KEYS}
        os.environ.update({k: env[k] for k in ENV_KEYS})
        rec = Recorder(env["GRADLAB_RECORD_DIR"], self.max_signatures, self.max_bytes)
        # a process started by `gradlab record` has its recorder already: that one records
        self.recorder = rec if install(rec) else installed()

    def finish(self, what: str, status: int) -> command.Recorded:
        """The folder written; the recorder stopped; the environment given back."""
        if self.recorder is not None and self.recorder.pid == os.getpid():
            self.recorder.flush()
            self.recorder.stopped = True
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return command.finish(self.folder, what, status, self.max_signatures)
