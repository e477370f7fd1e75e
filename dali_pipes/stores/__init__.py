"""Stores: how a source's bytes are read (local files, byte ranges of local tar shards).

A store answers `stat(path) -> (size, mtime_ns)` and `read_range(path, offset, size) ->
uint8 array`; sources keep their listings in numpy arrays and ask a store for bytes by
(shard, offset, size), so the plan keeps addressing samples by index on every store.
"""
