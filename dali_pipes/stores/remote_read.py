"""Byte ranges of remote objects, checked against the version recorded at listing, and the
rules that tell a permanent failure from a transient one.

Versions: a number derived from an object's ETag (else its Last-Modified time), taken from
the listing or stat (`version_of(info)`). Every range read of an `s3://` or `http(s)://`
object compares the validators of its own response (ETag, else Last-Modified) with that
version: an object replaced after the listing (same size or not) raises `ObjectChanged`
naming it, instead of yielding other bytes under the listed name. An object listed without
any validator, or a response without one, cannot be compared (nothing to compare); other
protocols read through `fs.cat_file` unchecked.

Permanent failures are not retried: 4xx answers but 408/429 (404, NoSuchKey, NoSuchBucket,
403, AccessDenied, 412 precondition failed), missing files, a changed object, and a refused
connection (nothing listens at the endpoint). Timeouts, 5xx/408/429, resets and other
connection errors are transient.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping

_VALIDATORS = ("ETag", "etag", "LastModified", "Last-Modified", "mtime", "last_modified")
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
              ConnectionRefusedError)


class ObjectChanged(OSError):
    """A remote object no longer is the version its listing recorded."""

    def __init__(self, url: str, expected: int, found: str):
        self.url, self.status = url, 412
        super().__init__(f"{url}: the object changed since it was listed (its version "
                         f"{found} is not the listed one, {expected:x}); list it again")

    def __reduce__(self):
        return rebuilt, (type(self), str(self), self.__dict__)


def rebuilt(cls: type[OSError], message: str, state: dict) -> OSError:
    """An error of `cls` with `message` and attributes `state`, as it was pickled (errors
    with their own constructor arguments cross process boundaries through this)."""
    err = OSError.__new__(cls)
    OSError.__init__(err, message)
    err.__dict__.update(state)
    return err


def version_of(info: Mapping) -> int:
    """A number that changes when the object does: from its ETag, else its modification
    time (`NO_VERSION` when it has neither)."""
    tag = next((str(info[k]) for k in _VALIDATORS if info.get(k)), "")
    tag = tag.strip().removeprefix("W/").strip('"')  # listings and answers quote alike? not all
    return int(hashlib.sha256(tag.encode()).hexdigest()[:15], 16)


NO_VERSION = version_of({})


def _check(url: str, expected: int, validators: Mapping) -> None:
    found = version_of(validators)
    if NO_VERSION not in (expected, found) and found != expected:
        tag = next(str(validators[k]) for k in _VALIDATORS if validators.get(k))
        raise ObjectChanged(url, expected, tag)


def get_range(fs, protocol: str, url: str, path: str, start: int, end: int,
              expected: int) -> bytes:
    """Bytes start..end (end exclusive) of the object, whose response validators must
    give the version `expected` (ObjectChanged names the URL when they do not)."""
    if end <= start:
        return b""
    if protocol in ("s3", "s3a"):
        from fsspec.asyn import sync
        return sync(fs.loop, _s3_get, fs, url, path, start, end, expected)
    if protocol in ("http", "https"):
        from fsspec.asyn import sync
        return sync(fs.loop, _http_get, fs, url, start, end, expected)
    return fs.cat_file(path, start=start, end=end)


async def _s3_get(fs, url: str, path: str, start: int, end: int, expected: int) -> bytes:
    bucket, key, version_id = fs.split_path(path)
    extra = {"VersionId": version_id} if version_id else {}
    resp = await fs._call_s3("get_object", Bucket=bucket, Key=key,
                             Range=f"bytes={start}-{end - 1}", **extra)
    try:
        _check(url, expected, resp)
        return await resp["Body"].read()
    finally:
        resp["Body"].close()


async def _http_get(fs, url: str, start: int, end: int, expected: int) -> bytes:
    kw = dict(fs.kwargs)
    headers = {**(kw.pop("headers", None) or {}), "Range": f"bytes={start}-{end - 1}"}
    session = await fs.set_session()
    async with session.get(fs.encode_url(url), headers=headers, **kw) as r:
        if r.status == 404:
            raise FileNotFoundError(url)
        r.raise_for_status()
        _check(url, expected, r.headers)
        return await r.read()


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the errors it wraps (causes, botocore's `error`, aiohttp's `os_error`)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        kwargs = getattr(e, "kwargs", None)
        todo += [e.__cause__, e.__context__, getattr(e, "os_error", None),
                 kwargs.get("error") if isinstance(kwargs, dict) else None]


def cause(exc: BaseException) -> BaseException:
    """fsspec's HTTP file system turns every failure of `info` into FileNotFoundError (and
    s3fs a missing bucket): the error it came from tells a refused connection from a 404."""
    while type(exc) is FileNotFoundError and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def status(exc: BaseException) -> int | None:
    """The HTTP status of a failure (None for a failure without one)."""
    for e in _chain(exc):
        response = getattr(e, "response", None)
        if isinstance(response, dict):  # botocore's ClientError
            code = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if isinstance(code, int):
                return code
        for attr in ("status", "code"):
            value = getattr(e, attr, None)
            if isinstance(value, int) and 100 <= value < 600:
                return value
    first = cause(exc)
    if isinstance(first, PermissionError):
        return 403
    if isinstance(first, FileNotFoundError):
        return 404
    return None


def transient(exc: BaseException) -> bool:
    """Whether trying again may succeed (see the module doc)."""
    code = status(exc)
    if code is not None:
        return code >= 500 or code in (408, 429)
    if any(isinstance(e, _PERMANENT) for e in _chain(exc)):
        return False
    first = cause(exc)
    return isinstance(first, (OSError, TimeoutError, ConnectionError)) or \
        type(first).__module__.startswith(("aiohttp", "botocore", "asyncio"))
