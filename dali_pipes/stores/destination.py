"""Where the pack tool writes: a local folder, or a folder behind an fsspec URL (`s3://`,
`gs://`, ...). Stores (`dali_pipes.stores.Store`) only read; a destination writes the
objects of one folder, by name, and never shows a partial object under its final name:

- local folder: each file is written as `<name>.<host>_<pid>.tmp` beside it, then renamed
  (atomic on POSIX file systems); `create` links a complete temporary file to the name,
  which fails when the name exists (one of two writers wins).
- S3 (`s3://`, `s3a://`): each object is written under its final name in one PUT, or, past
  s3fs's block size, as a multipart upload, which S3 makes visible only when completed; a
  failed write aborts the upload, and a killed writer's upload stays incomplete, never
  listed nor read (`abort_uploads` removes those of given names; a bucket lifecycle rule
  `AbortIncompleteMultipartUpload` removes any). `create` is a PUT with
  `If-None-Match: *` and `replace` / `delete` carry `If-Match: <ETag>`: conditional
  requests that S3 (and moto) decide atomically.
- any other fsspec protocol: written under the temporary name, then moved (a copy and a
  delete on object stores); `create`, `replace` and `delete` check the object first and
  then write: not atomic (two writers at the same moment may both succeed).

A destination pickles (to pack workers and Ray tasks) and opens its file system in each
process on first use.
"""
from __future__ import annotations

import hashlib
import os
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dali_pipes.stores.remote import is_url
from dali_pipes.stores.remote_read import version_of

# This host, as temporary names carry it (word characters only).
HOST = re.sub(r"\W", "_", socket.gethostname()) or "host"
# Protocols whose uploads are atomic: written under the final name directly.
ATOMIC_UPLOADS = ("s3", "s3a")


def temp_name(path: str | os.PathLike) -> str:
    """`path`'s temporary name for this process: `<path>.<host>_<pid>.tmp`, so no two
    writers (here, or on another host sharing the folder) ever write the same one."""
    return f"{os.fspath(path)}.{HOST}_{os.getpid()}.tmp"


def open_destination(dst, storage_options: dict | None = None) -> Destination:
    """The destination of `dst`: a URL's folder through fsspec (with `storage_options`),
    else a local folder (ValueError for storage options beside a local path)."""
    if is_url(os.fspath(dst)):
        return FsspecDestination(os.fspath(dst), storage_options)
    if storage_options:
        raise ValueError(f"storage_options apply to URLs; DST is a local folder: {dst}")
    return LocalDestination(dst)


class Destination:
    """A folder's objects by name (see the module doc). `local` is the folder as a Path
    for a local destination, else None; `str()` is the folder's path or URL."""

    local: Path | None = None

    def path(self, name: str) -> str:
        """The full path or URL of `name` (for messages)."""
        raise NotImplementedError

    def make(self) -> None:
        """Create the folder (a no-op on object storage)."""

    def names(self) -> dict[str, tuple[int, int]]:
        """{name: (size, version)} of the objects directly in the folder."""
        raise NotImplementedError

    def read(self, name: str) -> bytes:
        """The object's bytes (FileNotFoundError naming it when there is none)."""
        raise NotImplementedError

    def stat(self, name: str) -> tuple[int, int]:
        """(size, version) of `name`."""
        raise NotImplementedError

    @contextmanager
    def writer(self, name: str) -> Iterator[Any]:
        """A binary file to write `name` into: the object appears complete when the block
        ends, and not at all when it raises."""
        raise NotImplementedError
        yield

    def write(self, name: str, data: bytes) -> None:
        with self.writer(name) as f:
            f.write(data)

    def create(self, name: str, data: bytes) -> str | None:
        """Write `name` only if there is none: its tag (for `replace` / `delete`), or None
        when it exists."""
        raise NotImplementedError

    def read_tagged(self, name: str) -> tuple[bytes, str] | None:
        """(bytes, tag) of `name`, or None when there is none."""
        raise NotImplementedError

    def replace(self, name: str, data: bytes, tag: str) -> str | None:
        """Write `name` if it still has `tag`: the new tag, or None (changed or gone)."""
        raise NotImplementedError

    def delete(self, name: str, tag: str | None = None) -> bool:
        """Delete `name` (only while it has `tag`, when given); whether it was."""
        raise NotImplementedError

    def sha256(self, name: str) -> str:
        digest = hashlib.sha256()
        with self._open_read(name) as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()

    def _open_read(self, name: str):
        raise NotImplementedError

    def abort_uploads(self, names: list[str]) -> list[str]:
        """Abort incomplete uploads of `names` (killed writers'); the names aborted."""
        return []


class LocalDestination(Destination):
    """A local folder (created by `make`)."""

    def __init__(self, folder):
        self.local = Path(folder)

    def __repr__(self) -> str:
        return f"LocalDestination({str(self.local)!r})"

    def __str__(self) -> str:
        return str(self.local)

    def path(self, name: str) -> str:
        return str(self._at(name))

    def _at(self, name: str) -> Path:
        assert self.local is not None
        return self.local / name

    def make(self) -> None:
        assert self.local is not None
        self.local.mkdir(parents=True, exist_ok=True)

    def names(self) -> dict[str, tuple[int, int]]:
        assert self.local is not None
        out = {}
        for entry in os.scandir(self.local):
            try:
                if entry.is_file():
                    st = entry.stat()
                    out[entry.name] = (st.st_size, st.st_mtime_ns)
            except OSError:  # gone while listed
                continue
        return out

    def read(self, name: str) -> bytes:
        return self._at(name).read_bytes()

    def stat(self, name: str) -> tuple[int, int]:
        st = os.stat(self._at(name))
        return st.st_size, st.st_mtime_ns

    @contextmanager
    def writer(self, name: str) -> Iterator[Any]:
        path = self._at(name)
        tmp = temp_name(path)
        try:
            with open(tmp, "wb") as f:
                yield f
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def create(self, name: str, data: bytes) -> str | None:
        path = self._at(name)
        tmp = temp_name(path)
        Path(tmp).write_bytes(data)
        try:
            os.link(tmp, path)  # atomic: fails when the name exists
        except FileExistsError:
            return None
        finally:
            os.unlink(tmp)
        return str(self.stat(name)[1])

    def read_tagged(self, name: str) -> tuple[bytes, str] | None:
        try:
            return self.read(name), str(self.stat(name)[1])
        except FileNotFoundError:
            return None

    def replace(self, name: str, data: bytes, tag: str) -> str | None:
        found = self.read_tagged(name)
        if found is None or found[1] != tag:
            return None
        self.write(name, data)
        return str(self.stat(name)[1])

    def delete(self, name: str, tag: str | None = None) -> bool:
        if tag is not None and (self.read_tagged(name) or (b"", None))[1] != tag:
            return False
        try:
            self._at(name).unlink()
        except FileNotFoundError:
            return False
        return True

    def _open_read(self, name: str):
        return open(self._at(name), "rb")


class FsspecDestination(Destination):
    """A folder behind an fsspec URL; `storage_options` go to the file system."""

    def __init__(self, url: str, storage_options: dict | None = None):
        self.url = url.rstrip("/")
        self.protocol = self.url.split("://", 1)[0]
        self.storage_options = dict(storage_options or {})
        self._fs: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"FsspecDestination({self.url!r})"

    def __str__(self) -> str:
        return self.url

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_fs": {}}

    @property
    def fs(self):
        if self._fs.get("pid") != os.getpid():  # a new process: its own clients
            import fsspec
            options = {"use_listings_cache": False, **self.storage_options}
            self._fs = {"pid": os.getpid(),
                        "fs": fsspec.filesystem(self.protocol, **options)}
        return self._fs["fs"]

    def path(self, name: str) -> str:
        return f"{self.url}/{name}"

    def _key(self, name: str) -> str:
        return self.fs._strip_protocol(self.path(name))

    def names(self) -> dict[str, tuple[int, int]]:
        root = self.fs._strip_protocol(self.url).rstrip("/")
        try:
            found = self.fs.find(root, maxdepth=1, detail=True)
        except FileNotFoundError:
            return {}
        return {path[len(root) + 1:]: (int(info["size"]), version_of(info))
                for path, info in found.items()
                if info.get("type", "file") == "file" and path.startswith(root + "/")}

    def read(self, name: str) -> bytes:
        return self.fs.cat_file(self._key(name))

    def stat(self, name: str) -> tuple[int, int]:
        info = self.fs.info(self._key(name))
        return int(info["size"]), version_of(info)

    @contextmanager
    def writer(self, name: str) -> Iterator[Any]:
        final = self._key(name)
        target = final if self.protocol in ATOMIC_UPLOADS else temp_name(final)
        f = self.fs.open(target, "wb")
        try:
            yield f
        except BaseException:
            _discard(f)
            if target != final:
                _quietly(self.fs.rm_file, target)
            raise
        f.close()
        if target != final:
            self.fs.mv(target, final)

    def _s3(self, method: str, name: str, **kwargs) -> dict:
        """One S3 request on `name` (a GET's body read); FileExistsError for a failed
        condition (412 PreconditionFailed, 409 ConditionalRequestConflict)."""
        from fsspec.asyn import sync
        bucket, key, _ = self.fs.split_path(self._key(name))

        async def call() -> dict:
            answer = await self.fs._call_s3(method, Bucket=bucket, Key=key, **kwargs)
            if "Body" in answer:
                answer["Body"] = await answer["Body"].read()
            return answer
        try:
            return sync(self.fs.loop, call)
        except OSError as exc:
            if _failed_condition(exc):
                raise FileExistsError(f"{self.path(name)}: {exc}") from exc
            raise

    def create(self, name: str, data: bytes) -> str | None:
        if self.protocol in ATOMIC_UPLOADS:
            try:
                return self.fs.pipe_file(self._key(name), data, mode="create")["ETag"]
            except FileExistsError:  # 412: If-None-Match failed
                return None
        if self.fs.exists(self._key(name)):
            return None
        self.write(name, data)
        return self._tag(name)

    def _tag(self, name: str) -> str:
        info = self.fs.info(self._key(name))
        return str(info.get("ETag") or info.get("mtime") or info.get("LastModified") or "")

    def read_tagged(self, name: str) -> tuple[bytes, str] | None:
        try:
            if self.protocol in ATOMIC_UPLOADS:
                answer = self._s3("get_object", name)
                return answer["Body"], answer["ETag"]
            return self.read(name), self._tag(name)
        except FileNotFoundError:
            return None

    def replace(self, name: str, data: bytes, tag: str) -> str | None:
        try:
            if self.protocol in ATOMIC_UPLOADS:
                return self._s3("put_object", name, Body=data, IfMatch=tag)["ETag"]
            if self._tag(name) != tag:
                return None
        except (FileNotFoundError, FileExistsError):  # gone, or 412: If-Match failed
            return None
        self.write(name, data)
        return self._tag(name)

    def delete(self, name: str, tag: str | None = None) -> bool:
        try:
            if self.protocol in ATOMIC_UPLOADS and tag is not None:
                self._s3("delete_object", name, IfMatch=tag)
                return True
            if tag is not None and self._tag(name) != tag:
                return False
            self.fs.rm_file(self._key(name))
        except (FileNotFoundError, FileExistsError):  # gone, or 412: If-Match failed
            return False
        return True

    def _open_read(self, name: str):
        return self.fs.open(self._key(name), "rb")

    def abort_uploads(self, names: list[str]) -> list[str]:
        if self.protocol not in ATOMIC_UPLOADS or not names:
            return []
        bucket, folder, _ = self.fs.split_path(self.fs._strip_protocol(self.url))
        prefix = f"{folder}/" if folder else ""
        wanted = {f"{prefix}{n}" for n in names}
        listed = self.fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix)
        aborted = []
        for upload in listed.get("Uploads", []):
            if upload["Key"] in wanted:
                self.fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=upload["Key"],
                                UploadId=upload["UploadId"])
                aborted.append(upload["Key"][len(prefix):])
        return aborted


def _failed_condition(exc: BaseException) -> bool:
    """Whether an S3 error (or one it was raised from) is a conditional request refused."""
    while exc is not None:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code")
        if code in ("PreconditionFailed", "ConditionalRequestConflict"):
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


def _discard(f) -> None:
    """Drop a half-written fsspec file without committing it (an open S3 multipart upload
    is aborted)."""
    discard = getattr(f, "discard", None)
    if discard is None:  # a file committed on close (memory://): to its temporary name
        _quietly(f.close)
        return
    _quietly(discard)
    try:
        f.closed = True  # AbstractBufferedFile.close (and __del__) would commit it
    except AttributeError:
        _quietly(f.close)


def _quietly(call, *args) -> None:
    try:
        call(*args)
    except Exception:  # noqa: BLE001 (cleaning up after a failure that is reported)
        pass

