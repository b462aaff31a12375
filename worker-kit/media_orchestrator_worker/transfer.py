"""Transfers through presigned URLs with the standard library alone: a plain GET for an input, one PUT
of the whole file for an output (no `x-amz-*` header: the store refuses a header the URL did not
sign). Bodies are streamed in 1 MiB blocks, so a file of any size takes constant memory.

A transfer that failed on the way (no connection, a reset, a timeout, a 5xx, 429) is tried again
with a growing delay; a 4xx is final (an expired or altered URL does not heal). Error messages name
the input or output and quote the store's S3 error code and message, scrubbed of anything that
looks like a URL or a signature, and never the URL itself.
"""

from __future__ import annotations

import hashlib
import http.client
import mimetypes
import random
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Optional, Tuple, TypeVar

from .errors import MediaTransferError

BLOCK = 1 << 20
_CODE = re.compile(r"<Code>([A-Za-z0-9.]{1,64})</Code>")
_MESSAGE = re.compile(r"<Message>([^<]{1,400})</Message>")
_URLISH = re.compile(r"(?i)\b(?:https?://\S+|x-amz-[a-z-]+=\S+|[?&]\S*=\S*)")

T = TypeVar("T")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def _scrub(text: str, url: str) -> str:
    """`text` without the URL, its query or anything shaped like a URL or a signed parameter."""
    text = text.replace(url, "<url>")
    query = url.partition("?")[2]
    if query:
        text = text.replace(query, "<query>")
    return _URLISH.sub("<redacted>", text).strip()[:200]


def _refusal(status: int, body: str, url: str, expires_at: Optional[str]) -> Tuple[Optional[str], str]:
    """The S3 error code of a refusal and words for it: `403 AccessDenied (Request has expired): ...`."""
    code_match = _CODE.search(body)
    code = code_match.group(1) if code_match else None
    message_match = _MESSAGE.search(body)
    message = _scrub(message_match.group(1), url).rstrip(".") if message_match else ""
    said = f"{status} {code}" if code else str(status)
    if message:
        said += f" ({message})"
    if status == 403 and "expired" in body.lower():
        until = f" at {expires_at}" if expires_at else ""
        said += f": the attempt's URLs stopped working{until}, its deadlines having passed"
    elif code == "SignatureDoesNotMatch":
        said += ": the URL was altered, or a header it did not sign was sent"
    return code, said


def _reason(err: BaseException, timeout: float) -> str:
    """Why a request got no answer, in words that cannot carry the URL (some exceptions quote it)."""
    if isinstance(err, urllib.error.URLError) and isinstance(err.reason, BaseException):
        err = err.reason
    if isinstance(err, (socket.timeout, TimeoutError)):
        return f"no answer within {timeout:g} s"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return type(err).__name__


def _retrying(
    op: Callable[[], T],
    *,
    direction: str,
    name: str,
    method: str,
    url: str,
    timeout: float,
    attempts: int,
    expires_at: Optional[str],
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    delay = 0.5
    for attempt in range(1, attempts + 1):
        last = attempt == attempts
        try:
            return op()
        except urllib.error.HTTPError as err:
            try:
                body = err.read(65536).decode("utf-8", "replace")
            except Exception:  # noqa: BLE001 - the body only adds detail to the message
                body = ""
            retryable = err.code >= 500 or err.code in (408, 429)
            if not retryable or last:
                code, said = _refusal(err.code, body, url, expires_at)
                tries = f" after {attempts} tries" if retryable else ""
                raise MediaTransferError(
                    f"{direction} {name}: {method} refused with {said}{tries}",
                    direction=direction,
                    name=name,
                    status=err.code,
                    code=code,
                    retryable=retryable,
                ) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
            if last:
                raise MediaTransferError(
                    f"{direction} {name}: {method} failed ({_reason(err, timeout)}) after {attempts} tries",
                    direction=direction,
                    name=name,
                    retryable=True,
                ) from None
        sleep(delay * (0.5 + random.random() / 2))
        delay *= 2
    raise AssertionError("unreachable")


def download(
    name: str,
    url: str,
    dest: Path,
    *,
    sha256: Optional[str],
    size: Optional[int],
    timeout: float,
    attempts: int,
    expires_at: Optional[str],
) -> Tuple[str, int]:
    """GETs `url` into `dest`, checked against `sha256` and `size` when given; returns (sha256, size)."""

    def once() -> Tuple[str, int]:
        h = hashlib.sha256()
        n = 0
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout) as res:
            with open(dest, "wb") as f:
                for block in iter(lambda: res.read(BLOCK), b""):
                    n += len(block)
                    if size is not None and n > size:
                        raise MediaTransferError(
                            f"input {name}: more than the {size} bytes the reference says",
                            direction="input",
                            name=name,
                        )
                    h.update(block)
                    f.write(block)
        return h.hexdigest(), n

    try:
        got_sha256, got_size = _retrying(
            once,
            direction="input",
            name=name,
            method="GET",
            url=url,
            timeout=timeout,
            attempts=attempts,
            expires_at=expires_at,
        )
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    if size is not None and got_size != size:
        dest.unlink(missing_ok=True)
        raise MediaTransferError(
            f"input {name}: {got_size} bytes, the reference says {size}", direction="input", name=name
        )
    if sha256 is not None and got_sha256 != sha256:
        dest.unlink(missing_ok=True)
        raise MediaTransferError(
            f"input {name}: its SHA-256 is {got_sha256}, the reference says {sha256}",
            direction="input",
            name=name,
        )
    return got_sha256, got_size


def upload(
    name: str,
    url: str,
    path: Path,
    *,
    timeout: float,
    attempts: int,
    expires_at: Optional[str],
) -> Tuple[str, int]:
    """PUTs the file at `path` to `url` in one request; returns its (sha256, size)."""
    size = path.stat().st_size
    digest = file_sha256(path)
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"

    def once() -> None:
        with open(path, "rb") as f:
            # Content-Length given, so urllib streams the file instead of chunking it (S3 refuses
            # a chunked PUT without a length); Content-Type given, or urllib would send a form's.
            req = urllib.request.Request(
                url,
                data=f,
                method="PUT",
                headers={"Content-Length": str(size), "Content-Type": content_type},
            )
            with urllib.request.urlopen(req, timeout=timeout) as res:
                res.read()

    _retrying(
        once,
        direction="output",
        name=name,
        method="PUT",
        url=url,
        timeout=timeout,
        attempts=attempts,
        expires_at=expires_at,
    )
    return digest, size
