"""The worker kit's own behaviour (worker-kit/media_orchestrator_worker), against a small store on
127.0.0.1 that answers as scripted: what is retried and what is not, what a handler must have
written, what it returns, and that no message carries a URL. Run by test/sdk/worker-kit.test.ts
(each case one vitest test); the kit under RunPod's runtime against a real S3 server is tested there.
"""

import asyncio
import hashlib
import http.server
import threading
from pathlib import Path

import pytest

from media_orchestrator_worker import (
    MediaContractError,
    MediaTransferError,
    UndeclaredMediaError,
    media_handler,
)
from media_orchestrator_worker import transfer

SIGNATURE = "5ec2e7a11ce5ec2e7a11ce5ec2e7a11ce5ec2e7a11ce5ec2e7a11ce5ec2e7a11"


class Store(http.server.ThreadingHTTPServer):
    """Answers each path from its script (status, body), in turn; the last answer repeats."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script = {}
        self.requests = []
        self.objects = {}

    def url(self, path):
        return f"http://127.0.0.1:{self.server_address[1]}{path}?X-Amz-Expires=60&X-Amz-Signature={SIGNATURE}"


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _answer(self, body_in):
        path = self.path.partition("?")[0]
        self.server.requests.append((self.command, path, dict(self.headers), body_in))
        answers = self.server.script.get(path, [(200, b"")])
        status, body = answers.pop(0) if len(answers) > 1 else answers[0]
        if status == 200 and self.command == "PUT":
            self.server.objects[path] = body_in
        if status == 200 and self.command == "GET" and path in self.server.objects:
            body = self.server.objects[path]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._answer(None)

    def do_PUT(self):
        self._answer(self.rfile.read(int(self.headers["Content-Length"])))


@pytest.fixture
def store():
    s = Store()
    thread = threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield s
    s.shutdown()
    s.server_close()


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    monkeypatch.setattr(transfer.time, "sleep", lambda seconds: None)


def s3_error(code, message):
    return f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>{message}</Message></Error>".encode()


def job(inputs=None, outputs=None, **params):
    io = {"jobUid": "u-1", "attempt": 1, "expiresAt": "2026-11-28T12:16:00.000Z"}
    io["inputs"] = inputs or {}
    io["outputs"] = outputs or {}
    return {"id": "job-1", "input": {**params, "_mediaOrchestrator": io}}


def assert_no_url(text):
    assert SIGNATURE not in text
    assert "http://" not in text and "X-Amz" not in text


def test_a_handler_gets_its_inputs_as_files_and_returns_its_outputs_digests(store):
    store.objects["/b/in.txt"] = b"hello"
    seen = {}

    @media_handler
    def handler(job, media):
        seen["dir"] = media.inputs["text"].parent.parent
        media.outputs["out.bin"].write_bytes(media.inputs["text"].read_bytes()[::-1])
        return {"ok": True}

    out = handler(
        job(
            inputs={"text": {"url": store.url("/b/in.txt"), "sha256": hashlib.sha256(b"hello").hexdigest(), "size": 5}},
            outputs={"out.bin": {"url": store.url("/b/out.bin"), "method": "PUT"}},
        )
    )
    assert out == {
        "ok": True,
        "_mediaOrchestrator": {"outputs": {"out.bin": {"sha256": hashlib.sha256(b"olleh").hexdigest(), "size": 5}}},
    }
    assert store.objects["/b/out.bin"] == b"olleh"
    assert not seen["dir"].exists(), "the scratch directory outlived the job"


def test_a_put_carries_its_length_and_type_and_no_amz_header(store):
    @media_handler
    def handler(job, media):
        media.outputs["speech.wav"].write_bytes(b"RIFF")

    handler(job(outputs={"speech.wav": {"url": store.url("/b/speech.wav"), "method": "PUT"}}))
    [(method, _, headers, body)] = store.requests
    assert method == "PUT" and body == b"RIFF"
    assert headers["Content-Length"] == "4"
    assert headers["Content-Type"] == "audio/x-wav"
    assert "Transfer-Encoding" not in headers
    assert not [h for h in headers if h.lower().startswith("x-amz-")]


def test_a_5xx_or_a_slow_down_is_tried_again(store):
    store.script["/b/in"] = [(503, s3_error("SlowDown", "Please reduce your request rate.")), (500, b""), (200, b"x")]
    store.objects["/b/in"] = b"x"

    @media_handler
    def handler(job, media):
        return {"read": media.inputs["a"].read_bytes().decode()}

    assert handler(job(inputs={"a": {"url": store.url("/b/in")}})) == {"read": "x"}
    assert len(store.requests) == 3


def test_a_refusal_is_final_and_names_the_output_and_s3_code(store):
    store.script["/b/out"] = [(403, s3_error("AccessDenied", "Request has expired"))]

    @media_handler
    def handler(job, media):
        media.outputs["out"].write_bytes(b"x")

    with pytest.raises(MediaTransferError) as err:
        handler(job(outputs={"out": {"url": store.url("/b/out"), "method": "PUT"}}))
    assert str(err.value) == (
        "output out: PUT refused with 403 AccessDenied (Request has expired): the attempt's URLs stopped "
        "working at 2026-11-28T12:16:00.000Z, its deadlines having passed"
    )
    assert (err.value.direction, err.value.name, err.value.status, err.value.code) == ("output", "out", 403, "AccessDenied")
    assert len(store.requests) == 1


def test_an_s3_message_that_echoes_the_url_is_scrubbed(store):
    store.script["/b/in"] = [(400, s3_error("InvalidArgument", f"bad query X-Amz-Signature={SIGNATURE} in {store.url('/b/in')}"))]

    @media_handler
    def handler(job, media):
        pass

    with pytest.raises(MediaTransferError) as err:
        handler(job(inputs={"a": {"url": store.url("/b/in")}}))
    assert str(err.value).startswith("input a: GET refused with 400 InvalidArgument (bad query")
    assert_no_url(str(err.value))


def test_an_unreachable_store_fails_after_the_tries_without_the_url(store):
    url = store.url("/b/in")
    store.shutdown()
    store.server_close()

    @media_handler(attempts=3)
    def handler(job, media):
        pass

    with pytest.raises(MediaTransferError) as err:
        handler(job(inputs={"a": {"url": url}}))
    assert str(err.value) == "input a: GET failed (Connection refused) after 3 tries"
    assert err.value.retryable
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_an_input_longer_than_its_size_stops_at_the_size(store):
    store.objects["/b/in"] = b"x" * 10

    @media_handler
    def handler(job, media):
        pass

    with pytest.raises(MediaTransferError, match=r"^input a: more than the 4 bytes the reference says$"):
        handler(job(inputs={"a": {"url": store.url("/b/in"), "size": 4}}))


def test_a_declared_output_left_unwritten_fails_before_any_upload(store):
    @media_handler
    def handler(job, media):
        media.outputs["a.json"].write_text("{}")

    with pytest.raises(MediaContractError, match=r"no file for the declared output\(s\) b\.wav"):
        handler(
            job(outputs={n: {"url": store.url(f"/b/{n}"), "method": "PUT"} for n in ("a.json", "b.wav")})
        )
    assert store.requests == []


def test_an_undeclared_name_is_a_clear_error():
    @media_handler
    def handler(job, media):
        return media.outputs["video.mp4"]

    with pytest.raises(UndeclaredMediaError) as err:
        handler(job())
    assert str(err.value) == "output 'video.mp4' is not declared by the job (declared: none)"
    assert isinstance(err.value, KeyError)


def test_a_result_with_an_error_uploads_nothing_and_passes_through(store):
    @media_handler
    def handler(job, media):
        media.outputs["out"].write_bytes(b"half")
        return {"error": "the model ran out of memory"}

    assert handler(job(outputs={"out": {"url": store.url("/b/out"), "method": "PUT"}})) == {
        "error": "the model ran out of memory"
    }
    assert store.requests == []


def test_the_kit_alone_writes_media_orchestrator_in_the_result(store):
    @media_handler
    def handler(job, media):
        media.outputs["out"].write_bytes(b"x")
        return {"_mediaOrchestrator": {"outputs": {"out": {"sha256": "0" * 64, "size": 1}}}}

    with pytest.raises(MediaContractError, match="may not carry _mediaOrchestrator"):
        handler(job(outputs={"out": {"url": store.url("/b/out"), "method": "PUT"}}))


def test_a_job_without_media_runs_the_handler_unchanged():
    @media_handler
    def handler(job, media):
        assert not media.declared and len(media.inputs) == 0
        return "plain"

    assert handler({"id": "j", "input": {"prompt": "hi"}}) == "plain"


def test_a_malformed_reference_is_refused_before_any_transfer(store):
    @media_handler
    def handler(job, media):
        pass

    with pytest.raises(MediaContractError, match=r"^input a: sha256 must be 64 lowercase hex digits$"):
        handler(job(inputs={"a": {"url": store.url("/b/in"), "sha256": "ABC"}}))
    with pytest.raises(MediaContractError, match=r"^input '\.\./etc': not a valid name$"):
        handler(job(inputs={"../etc": {"url": store.url("/b/in")}}))
    assert store.requests == []


def test_an_async_handler_is_wrapped_as_one(store):
    store.objects["/b/in"] = b"abc"

    @media_handler
    async def handler(job, media):
        await asyncio.sleep(0)
        media.outputs["n.txt"].write_text(str(len(media.inputs["a"].read_bytes())))
        return {}

    out = asyncio.run(
        handler(job(inputs={"a": {"url": store.url("/b/in")}}, outputs={"n.txt": {"url": store.url("/b/n"), "method": "PUT"}}))
    )
    assert out["_mediaOrchestrator"]["outputs"]["n.txt"]["size"] == 1
    assert store.objects["/b/n"] == b"3"


def test_a_generator_handler_is_refused():
    with pytest.raises(TypeError, match="generator"):

        @media_handler
        def handler(job, media):
            yield 1


def test_the_scratch_directory_goes_where_asked_and_is_removed_after_a_failure(tmp_path: Path):
    @media_handler(workdir=str(tmp_path))
    def handler(job, media):
        assert media.outputs["x"].parent.parent.parent == tmp_path
        raise RuntimeError("model failed")

    with pytest.raises(RuntimeError, match="model failed"):
        handler(job(outputs={"x": {"url": "http://127.0.0.1:9/b/x", "method": "PUT"}}))
    assert list(tmp_path.iterdir()) == []
