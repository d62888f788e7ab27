"""The entry ids a `runtime.jobs.queue.JobQueue` gives out, and the stream entries they name:
`<id>` for one of a shard's `jobs`, `v2:<id>` and `v3:<id>` for one of its streams of a later
contract version (`Shard.job_streams`), each behind `<shard>/` on a cluster."""

from __future__ import annotations

from runtime.db.keys import Keys


def version_mark(version: int) -> str:
    """Begins the entry id of a delivery from a shard's stream of contract `version` above 1
    (after its `<shard>/`): `v2:`, `v3:`."""
    return f"v{version}:"


def entry_of(keys: Keys, token: str) -> tuple[str, str]:
    """The stream and stream entry id of an entry id a `JobQueue` gave out."""
    shard_index, _, entry = token.rpartition("/")
    shard = keys.shard(int(shard_index or 0))
    for version, stream in enumerate(shard.job_streams[1:], start=2):
        if entry.startswith(mark := version_mark(version)):
            return stream, entry.removeprefix(mark)
    return shard.jobs, entry
