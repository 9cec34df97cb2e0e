"""`python -m media.avatar render`: text (+ portrait) -> talking-head mp4, end to end."""

from __future__ import annotations

import io
from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image
from skimage import data

from engines.portrait import detect_portrait_landmarks
from media.avatar.__main__ import main
from media.avatar.renderer import frame_portrait


@pytest.mark.slow
def test_render_writes_a_talking_video(tmp_path: Path) -> None:
    out = tmp_path / "talk.mp4"
    code = main(["render", "--text", "Hello! Nice to meet you.", "--tts", "espeak",
                 "--size", "256", "-o", str(out), "--log-level", "WARNING"])
    assert code == 0 and out.stat().st_size > 10_000
    with av.open(str(out)) as container:
        video, audio = container.streams.video[0], container.streams.audio[0]
        assert (video.codec_context.width, video.codec_context.height) == (256, 256)
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video)]
        assert audio.duration is not None and audio.time_base is not None
        seconds = float(audio.duration * audio.time_base)
    assert abs(len(frames) / 25 - seconds) < 0.1  # picture and sound end together
    # The mouth moves: mouth-region pixels change far more than the eyes-to-brows region does.
    image = np.ascontiguousarray(data.astronaut())
    _, lm = frame_portrait(image, detect_portrait_landmarks(image), 256, 256)
    x0, y0 = np.floor(lm[48:68].min(axis=0)).astype(int)
    x1, y1 = np.ceil(lm[48:68].max(axis=0)).astype(int)
    mouth = [f[y0:y1 + 4, x0:x1].astype(int) for f in frames]
    assert max(float(np.abs(m - mouth[0]).mean()) for m in mouth) > 8


def test_render_refuses_a_bad_portrait(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blank = tmp_path / "blank.png"
    buf = io.BytesIO()
    Image.fromarray(np.full((300, 300, 3), 128, np.uint8)).save(buf, format="PNG")
    blank.write_bytes(buf.getvalue())
    code = main(["render", "--text", "Hi.", "--portrait", str(blank), "-o",
                 str(tmp_path / "x.mp4"), "--log-level", "ERROR"])
    assert code == 2
    assert "no face" in capsys.readouterr().err
