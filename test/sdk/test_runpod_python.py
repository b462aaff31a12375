"""RunPod's official Python SDK (PyPI `runpod`) against the simulator.

Run by test/sdk/python-sdk.test.ts, which starts the simulator and passes its URL, key and endpoint
ids in the environment. The SDK is used exactly as RunPod documents it; only its base URLs point at
the simulator (RUNPOD_API_BASE_URL for GraphQL, runpod.endpoint_url_base for the job API).
"""

import json
import os
import urllib.request

import pytest
import runpod
from runpod import error

SIM_URL = os.environ["SIM_URL"]
ASR = os.environ["SIM_ASR_ENDPOINT"]
IDLE = os.environ["SIM_IDLE_ENDPOINT"]

runpod.api_key = os.environ["RUNPOD_API_KEY"]
runpod.endpoint_url_base = f"{SIM_URL}/v2"

# Every field runpod-python's own queries select (runpod/api/queries/endpoints.py).
ENDPOINT_FIELDS = {
    "aiKey", "gpuIds", "id", "idleTimeout", "name", "networkVolumeId", "locations",
    "scalerType", "scalerValue", "templateId", "type", "userId", "version", "workersMax",
    "workersMin", "workersStandby", "gpuCount", "env", "createdAt", "networkVolume",
}


def set_faults(faults):
    req = urllib.request.Request(
        f"{SIM_URL}/_sim/faults",
        data=json.dumps(faults).encode(),
        method="PUT",
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req) as res:
        assert res.status == 200


@pytest.fixture(autouse=True)
def no_faults():
    set_faults({})
    yield
    set_faults({})


def test_get_user_answers_every_field_the_sdk_asks_for():
    user = runpod.get_user()
    assert user["id"].startswith("user_")
    assert isinstance(user["pubKey"], str)
    assert isinstance(user["networkVolumes"], list)


def test_get_endpoints_answers_every_field_the_sdk_asks_for():
    endpoints = runpod.get_endpoints()
    by_id = {e["id"]: e for e in endpoints}
    assert ASR in by_id
    asr = by_id[ASR]
    assert set(asr) == ENDPOINT_FIELDS
    assert asr["name"] == "media-asr-sdk"
    assert asr["workersMax"] == 2
    assert asr["userId"].startswith("user_")
    assert isinstance(asr["env"], list)


def test_create_endpoint_then_it_is_listed():
    created = runpod.create_endpoint(
        name="media-tts-sdk", template_id="tpl-sdk", gpu_ids="AMPERE_24", workers_max=2, flashboot=True
    )
    assert created["name"] == "media-tts-sdk"
    assert created["flashBootType"] == "FLASHBOOT"
    assert created["id"] in {e["id"] for e in runpod.get_endpoints()}


def test_a_wrong_key_is_an_authentication_error():
    with pytest.raises(error.AuthenticationError):
        runpod.get_user(api_key="not-a-key")


def test_a_retired_graphql_api_is_a_query_error_naming_rest_v2():
    set_faults({"graphqlRetired": True})
    with pytest.raises(error.QueryError, match="REST API v2"):
        runpod.get_endpoints()


def test_run_then_status_and_output():
    endpoint = runpod.Endpoint(ASR)
    job = endpoint.run({"audio_url": "s3://media/in.wav"})
    assert job.status() in {"IN_QUEUE", "IN_PROGRESS", "COMPLETED"}
    output = job.output(timeout=60)
    assert output is not None
    assert job.status() == "COMPLETED"


def test_health_has_the_documented_counters():
    health = runpod.Endpoint(ASR).health()
    assert set(health["jobs"]) >= {"completed", "failed", "inProgress", "inQueue", "retried"}
    assert set(health["workers"]) >= {"idle", "running"}


def test_cancel_a_queued_job():
    job = runpod.Endpoint(IDLE).run({"text": "never runs: no workers"})
    assert job.status() == "IN_QUEUE"
    cancelled = job.cancel()
    assert cancelled["id"] == job.job_id
    assert cancelled["status"] == "CANCELLED"


def test_run_sync_returns_the_output():
    output = runpod.Endpoint(ASR).run_sync({"audio_url": "s3://media/sync.wav"}, timeout=60)
    assert output is not None
    assert "transcript" in output


def test_purge_queue_removes_queued_jobs():
    endpoint = runpod.Endpoint(IDLE)
    endpoint.run({"text": "queued 1"})
    endpoint.run({"text": "queued 2"})
    purged = endpoint.purge_queue()
    assert purged["status"] == "completed"
    assert purged["removed"] >= 2
    assert endpoint.health()["jobs"]["inQueue"] == 0
