"""Byte ranges of remote objects, checked against the version recorded at listing, and the
rules that tell a permanent failure from a transient one.

Versions: a number derived from an object's ETag (else its Last-Modified time), taken from
the listing or stat (`version_of(info)`). Every range read of an `s3://` or `http(s)://`
object compares the validators of its own response (ETag, else Last-Modified) with that
version: an object replaced after the listing (same size or not) raises `ObjectChanged`
naming it, instead of yielding other bytes under the listed name. An object listed without
any validator, or a response without one, cannot be compared (nothing to compare); other
protocols read through `fs.cat_file` unchecked.

Ranges: the answer to a range request must be those bytes of that object. A 206 must carry
a Content-Range (S3: `ContentRange`) that starts where the request did, ends no later, and
gives the object's listed size (or "*"); its body must hold what that range says. A 200 is
the whole object (a server ignoring Range): its body must be the listed size (the caller
takes the range out of it). Anything else raises `RangeMismatch` naming the URL and both
ranges: a server, proxy or CDN answering another range never has those bytes taken for the
ones asked. A shorter range at the right start is the caller's EOFError.

Sizes: a stat without a size (a server without Content-Length: chunked answers) asks for
the object's first byte, whose Content-Range gives the size (`sized`); a server giving none
is named.

Permanent failures are not retried: 4xx answers but 408/429 (404, NoSuchKey, NoSuchBucket,
403, AccessDenied, 412 precondition failed), missing files, a changed object, an answer
holding another range, and a refused connection (nothing listens at the endpoint).
Timeouts, 5xx/408/429, resets and other connection errors are transient.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

_VALIDATORS = ("ETag", "etag", "LastModified", "Last-Modified", "mtime", "last_modified",
               "created")  # memory:// objects have only their creation time
_BYTES = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)$")  # Content-Range of a 206
_TOTAL = re.compile(r"bytes\s+(?:\d+-\d+|\*)/(\d+)$")  # the object's size in it


class ObjectChanged(OSError):
    """A remote object no longer is the version its listing recorded."""

    def __init__(self, url: str, expected: int, found: str):
        self.url, self.status = url, 412
        super().__init__(f"{url}: the object changed since it was listed (its version "
                         f"{found} is not the listed one, {expected:x}); list it again")

    def __reduce__(self):
        return rebuilt, (type(self), str(self), self.__dict__)


class RangeMismatch(OSError):
    """A server answered other bytes than the range asked for, or did not say which."""

    def __init__(self, url: str, message: str):
        self.url, self.status = url, None
        super().__init__(f"{url}: {message}")

    def __reduce__(self):
        return rebuilt, (type(self), str(self), self.__dict__)


_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
              ConnectionRefusedError, RangeMismatch)


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


@dataclass(frozen=True)
class Answer:
    """What the body of an answer to a range request must hold: `length` bytes, said as
    `what` (the whole object, or the range its Content-Range names)."""

    url: str
    start: int
    end: int
    length: int
    what: str

    def holds(self, body: bytes) -> bytes:
        """`body`, when it holds the bytes the answer's headers announce (RangeMismatch)."""
        if len(body) != self.length:
            raise RangeMismatch(self.url, f"bytes {self.start}..{self.end} requested; the "
                                f"answer is {self.what}, but its body holds {len(body)} bytes")
        return body


def expect(url: str, status: int, content_range: str | None, start: int, end: int,
           total: int) -> Answer:
    """The answer with `status` and `content_range` to a request for bytes start..end (end
    exclusive) of an object listed with `total` bytes: a 200 is the whole object (the
    caller takes the range out of it); a 206 must name a range that starts at `start`,
    ends by `end` (a shorter one is an EOFError of the caller) and belongs to an object
    of `total` bytes ("*": unknown). RangeMismatch naming both ranges otherwise."""
    asked = f"bytes {start}..{end} requested of an object listed with {total} bytes"
    if status == 200:
        return Answer(url, start, end, total, f"the whole object (200) of {total} bytes")
    if status != 206:
        raise RangeMismatch(url, f"{asked}; the server answered status {status}")
    if not content_range:
        raise RangeMismatch(url, f"{asked}; the server answered 206 (partial content) "
                                 "without a Content-Range, so which bytes it sent is unknown")
    found = _BYTES.match(content_range.strip())
    if found is None:
        raise RangeMismatch(url, f"{asked}; the server answered Content-Range "
                                 f"{content_range!r}, which names no byte range")
    lo, hi, size = int(found[1]), int(found[2]) + 1, found[3]
    if lo != start or not lo < hi <= end or size not in ("*", str(total)):
        raise RangeMismatch(url, f"{asked}; the server answered bytes {lo}..{hi} of {size} "
                                 f"(Content-Range: {content_range})")
    return Answer(url, start, end, hi - lo, f"bytes {lo}..{hi} (Content-Range: "
                                           f"{content_range})")


def _check(url: str, expected: int, validators: Mapping) -> None:
    found = version_of(validators)
    if NO_VERSION not in (expected, found) and found != expected:
        tag = next(str(validators[k]) for k in _VALIDATORS if validators.get(k))
        raise ObjectChanged(url, expected, tag)


def get_range(fs, protocol: str, url: str, path: str, start: int, end: int,
              expected: int, total: int) -> bytes:
    """Bytes start..end (end exclusive) of the object listed with `total` bytes at version
    `expected`: ObjectChanged when the response's validators give another version,
    RangeMismatch when it holds other bytes (see the module doc). `fs` is a
    `BoundedFileSystem`: each request finishes, whole, within its timeout."""
    if end <= start:
        return b""
    if protocol in ("s3", "s3a"):
        return fs.run(_s3_get, fs, url, path, start, end, expected, total)
    if protocol in ("http", "https"):
        return fs.run(_http_get, fs, url, start, end, expected, total)
    return fs.cat_file(path, start=start, end=end)


async def _s3_get(fs, url: str, path: str, start: int, end: int, expected: int,
                  total: int) -> bytes:
    bucket, key, version_id = fs.split_path(path)
    extra = {"VersionId": version_id} if version_id else {}
    resp = await fs._call_s3("get_object", Bucket=bucket, Key=key,
                             Range=f"bytes={start}-{end - 1}", **extra)
    try:
        _check(url, expected, resp)
        code = resp["ResponseMetadata"]["HTTPStatusCode"]
        answer = expect(url, code, resp.get("ContentRange"), start, end, total)
        return answer.holds(await resp["Body"].read())
    finally:
        resp["Body"].close()


async def _http_get(fs, url: str, start: int, end: int, expected: int, total: int
                    ) -> bytes:
    async with await _ranged(fs, url, start, end - 1) as r:
        try:
            if r.status == 404:
                raise FileNotFoundError(url)
            r.raise_for_status()
            _check(url, expected, r.headers)
            answer = expect(url, r.status, r.headers.get("Content-Range"), start, end, total)
            return answer.holds(await r.read())
        except BaseException:
            r.close()  # past the timeout, or refused: the connection goes, unread
            raise


async def _ranged(fs, url: str, first: int, last: int):
    """fsspec's HTTP session's GET of bytes first..last (inclusive) of `url`."""
    kw = dict(fs.kwargs)
    headers = {**(kw.pop("headers", None) or {}), "Range": f"bytes={first}-{last}"}
    session = await fs.set_session()
    return session.get(fs.encode_url(url), headers=headers, **kw)


def sized(fs, protocol: str, url: str, info: dict) -> dict:
    """`info` (a stat) with the object's size: a server that sends no Content-Length
    (chunked answers) is asked for the object's first byte, whose Content-Range holds
    the size. ValueError when there is none."""
    if info.get("size") is None and protocol in ("http", "https"):
        info = {**info, **fs.run(_http_first_byte, fs, url)}
    if info.get("size") is None:
        raise ValueError("the server sends no size for it (no Content-Length, and no "
                         "Content-Range answering a request for its first byte); reads "
                         "need each object's size")
    return info


async def _http_first_byte(fs, url: str) -> dict:
    async with await _ranged(fs, url, 0, 0) as r:
        if r.status == 404:
            raise FileNotFoundError(url)
        if r.status != 416:  # an empty object: "bytes */0"
            r.raise_for_status()
        found = _TOTAL.match(r.headers.get("Content-Range", "").strip())
        out = {k: r.headers[k] for k in ("ETag", "Last-Modified") if r.headers.get(k)}
        r.close()  # the headers are all it takes
    return {**out, "size": int(found[1])} if found else out


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
