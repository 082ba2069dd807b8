"""The lab's one error: a lab command cannot go on. Its own module, importing nothing, so that every
part of the lab (the settings the daemon reads, the host checks, fio, the commands) can raise it
without importing another part: `system` checks the host with `native`, whose encoder reads
`settings`, so a `LabError` kept in `system` made the cycle settings → system → native → settings."""

from __future__ import annotations


class LabError(Exception):
    """A lab command cannot go on; the message says why and what to do."""
