"""What the kit raises. A RunPod handler's exception becomes the job's error (runpod-python reports
its type, message and traceback), so every message names the input or output and what went wrong,
and never a URL: a presigned URL opens its object to whoever holds it until it expires."""

from __future__ import annotations

from typing import Optional


class MediaContractError(ValueError):
    """The job's `_mediaOrchestrator` or the handler's use of it does not follow the worker contract."""


class UndeclaredMediaError(MediaContractError, KeyError):
    """A handler asked for an input or output the job does not declare."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class MediaTransferError(RuntimeError):
    """A download or upload failed, was refused, or brought bytes other than the reference says.

    `direction` is "input" or "output", `name` the declared name, `status` and `code` the store's
    HTTP status and S3 error code when it answered, `retryable` whether another attempt may succeed.
    """

    def __init__(
        self,
        message: str,
        *,
        direction: str,
        name: str,
        status: Optional[int] = None,
        code: Optional[str] = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.direction = direction
        self.name = name
        self.status = status
        self.code = code
        self.retryable = retryable
