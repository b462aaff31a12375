"""A text-to-speech stand-in written with the worker kit: reads the job's `transcript` input and
writes its `speech.wav` output, one short tone per word (a real WAV file, made with the standard
library so the example needs no model). Run it as RunPod runs a worker, or locally:

    python handler.py --rp_serve_api --rp_api_port 8000
"""

import hashlib
import math
import struct
import wave

import runpod

from media_orchestrator_worker import media_handler

RATE = 16_000


def tone(word: str, seconds: float) -> bytes:
    """A sine tone whose pitch follows the word, 16-bit mono."""
    pitch = 220 + int.from_bytes(hashlib.sha256(word.encode()).digest()[:2], "big") % 440
    frames = int(RATE * seconds)
    return b"".join(
        struct.pack("<h", int(12_000 * math.sin(2 * math.pi * pitch * i / RATE))) for i in range(frames)
    )


@media_handler
def handler(job, media):
    text = media.inputs["transcript"].read_text(encoding="utf-8")
    words = text.split()
    seconds_per_word = float(job["input"].get("secondsPerWord", 0.05))
    with wave.open(str(media.outputs["speech.wav"]), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(RATE)
        for word in words:
            wav.writeframes(tone(word, seconds_per_word))
    return {"words": len(words), "seconds": round(len(words) * seconds_per_word, 3)}


if __name__ == "__main__":
    runpod.serverless.start({"handler": handler})
