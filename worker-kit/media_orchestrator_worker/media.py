"""One job's media: the `_mediaOrchestrator` object the controller put in the job's input, read
(docs/provider.md, "Worker contract"), its inputs downloaded into a scratch directory and its
declared outputs uploaded from there, and the output the contract asks a worker to return."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

from . import transfer
from .errors import MediaContractError, UndeclaredMediaError

KEY = "_mediaOrchestrator"
# The names the controller accepts (src/storage/keys.ts): also safe as file names.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
HEX_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class Declared(Mapping):
    """The declared inputs or outputs by name, each a local path; an undeclared name is a clear error."""

    def __init__(self, kind: str, paths: Dict[str, Path]) -> None:
        self._kind = kind
        self._paths = paths

    def __getitem__(self, name: str) -> Path:
        try:
            return self._paths[name]
        except KeyError:
            declared = ", ".join(sorted(self._paths)) or "none"
            raise UndeclaredMediaError(
                f"{self._kind} {name!r} is not declared by the job (declared: {declared})"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def __repr__(self) -> str:
        return f"Declared({self._kind}: {dict(self._paths)!r})"


def _table(io: Dict[str, Any], field: str) -> Dict[str, Dict[str, Any]]:
    value = io.get(field, {})
    if not isinstance(value, dict):
        raise MediaContractError(f"{KEY}.{field} must be an object")
    kind = field[:-1]
    for name, entry in value.items():
        if not NAME.match(name):
            raise MediaContractError(f"{kind} {name[:64]!r}: not a valid name")
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            raise MediaContractError(f"{kind} {name}: no url")
        sha256 = entry.get("sha256")
        if sha256 is not None and not (isinstance(sha256, str) and HEX_SHA256.match(sha256)):
            raise MediaContractError(f"{kind} {name}: sha256 must be 64 lowercase hex digits")
        size = entry.get("size")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            raise MediaContractError(f"{kind} {name}: size must be a whole number of bytes")
    return value


class Media:
    """The media of one job: `open()` downloads the inputs, `finish(result)` uploads the outputs.

    `inputs[name]` is the path of a downloaded input, `outputs[name]` the path the handler writes a
    declared output to. Used as a context manager, the scratch directory is removed on exit.
    A job input without `_mediaOrchestrator` (storage off, a local test) has neither, and `finish`
    returns the handler's result unchanged.
    """

    def __init__(
        self,
        job_input: Any,
        *,
        workdir: Optional[str] = None,
        timeout: float = 60.0,
        attempts: int = 4,
    ) -> None:
        io = job_input.get(KEY) if isinstance(job_input, dict) else None
        if io is not None and not isinstance(io, dict):
            raise MediaContractError(f"{KEY} must be an object")
        io = io or {}
        self._inputs = _table(io, "inputs")
        self._outputs = _table(io, "outputs")
        #: The submission's identity (jobUid, jobId, attempt, submissionId, dedupKey), when sent.
        self.identity: Dict[str, Any] = {
            k: v for k, v in io.items() if k not in ("inputs", "outputs", "expiresAt")
        }
        self.job_uid: Optional[str] = io.get("jobUid")
        self.attempt: Optional[int] = io.get("attempt")
        #: When every URL stops working (RFC 3339), when sent.
        self.expires_at: Optional[str] = io.get("expiresAt")
        self._workdir = workdir
        self._timeout = timeout
        self._attempts = attempts
        self._dir: Optional[Path] = None
        self.inputs = Declared("input", {})
        self.outputs = Declared("output", {})

    @property
    def declared(self) -> bool:
        """Whether the job carries any input or output."""
        return bool(self._inputs or self._outputs)

    def open(self) -> "Media":
        """Makes the scratch directory and downloads every input into it, each checked."""
        self._dir = Path(tempfile.mkdtemp(prefix="media-job-", dir=self._workdir))
        (self._dir / "inputs").mkdir()
        (self._dir / "outputs").mkdir()
        inputs: Dict[str, Path] = {}
        for name, ref in self._inputs.items():
            path = self._dir / "inputs" / name
            transfer.download(
                name,
                ref["url"],
                path,
                sha256=ref.get("sha256"),
                size=ref.get("size"),
                timeout=self._timeout,
                attempts=self._attempts,
                expires_at=self.expires_at,
            )
            inputs[name] = path
        self.inputs = Declared("input", inputs)
        self.outputs = Declared("output", {n: self._dir / "outputs" / n for n in self._outputs})
        return self

    def upload(self) -> Dict[str, Dict[str, Any]]:
        """PUTs every declared output; returns each one's sha256 and size. All must have been written."""
        missing = [n for n, p in self.outputs.items() if not p.is_file()]
        if missing:
            raise MediaContractError(
                "the handler wrote no file for the declared output(s) "
                + ", ".join(f"{n} (media.outputs[{n!r}])" for n in missing)
            )
        written: Dict[str, Dict[str, Any]] = {}
        for name, path in self.outputs.items():
            digest, size = transfer.upload(
                name,
                self._outputs[name]["url"],
                path,
                timeout=self._timeout,
                attempts=self._attempts,
                expires_at=self.expires_at,
            )
            written[name] = {"sha256": digest, "size": size}
        return written

    def finish(self, result: Any) -> Any:
        """The handler's result as the worker returns it: outputs uploaded and reported beside it.

        A result with a truthy `error` is returned as it is, nothing uploaded: RunPod fails the job.
        """
        if not self._outputs:
            return result
        if result is None:
            result = {}
        if not isinstance(result, dict):
            raise MediaContractError(
                f"a handler with declared outputs returns a dict or None, not {type(result).__name__}"
            )
        if result.get("error"):
            return result
        if KEY in result:
            raise MediaContractError(f"the handler's result may not carry {KEY}: the kit writes it")
        return {**result, KEY: {"outputs": self.upload()}}

    def close(self) -> None:
        """Removes the scratch directory and everything in it."""
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> "Media":
        try:
            return self.open()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()
