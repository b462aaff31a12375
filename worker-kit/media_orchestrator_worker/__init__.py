"""media-orchestrator's worker kit: a RunPod handler's side of the worker contract (docs/provider.md).

    import runpod
    from media_orchestrator_worker import media_handler

    @media_handler
    def handler(job, media):
        text = media.inputs["transcript"].read_text()
        media.outputs["speech.wav"].write_bytes(synthesize(text))
        return {"words": len(text.split())}

    runpod.serverless.start({"handler": handler})
"""

from .errors import MediaContractError, MediaTransferError, UndeclaredMediaError
from .handler import media_handler
from .media import Declared, Media

__all__ = [
    "Declared",
    "Media",
    "MediaContractError",
    "MediaTransferError",
    "UndeclaredMediaError",
    "media_handler",
]
