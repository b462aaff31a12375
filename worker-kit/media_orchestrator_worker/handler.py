"""`media_handler`: a RunPod handler written as `handler(job, media)` gets its inputs as local files
and has its outputs uploaded and reported when it returns (docs/provider.md, "Writing a worker with
the kit"). The wrapped function is an ordinary RunPod handler, `handler(job)`, for
`runpod.serverless.start({"handler": handler})`; the kit itself does not import runpod."""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any, Callable, Optional

from .media import Media


def media_handler(
    fn: Optional[Callable[..., Any]] = None,
    *,
    workdir: Optional[str] = None,
    timeout: float = 60.0,
    attempts: int = 4,
) -> Any:
    """Wraps `fn(job, media)` (sync or async) into a RunPod handler `handler(job)`.

    Before `fn` runs, every input is downloaded (and checked against its sha256 and size); after it
    returns, every declared output is uploaded and `_mediaOrchestrator.outputs` added to its result.
    A failed transfer raises MediaTransferError, which RunPod reports as the job's error. `workdir`
    is where the job's scratch directory goes (default: the system's temporary directory),
    `timeout` the seconds a transfer may wait for the store, `attempts` the tries per transfer.
    """

    def wrap(fn: Callable[..., Any]) -> Callable[[dict], Any]:
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise TypeError(
                "media_handler wraps a handler that returns its output; a generator streams partial "
                "outputs, which cannot carry the uploaded outputs' digests"
            )
        options = {"workdir": workdir, "timeout": timeout, "attempts": attempts}

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(job: dict) -> Any:
                media = Media(job.get("input"), **options)
                try:
                    # Transfers block: in a thread, so the worker's event loop (heartbeats) keeps going.
                    await asyncio.to_thread(media.open)
                    result = await fn(job, media)
                    return await asyncio.to_thread(media.finish, result)
                finally:
                    media.close()

            return run_async

        @functools.wraps(fn)
        def run(job: dict) -> Any:
            with Media(job.get("input"), **options) as media:
                return media.finish(fn(job, media))

        return run

    return wrap(fn) if fn is not None else wrap
