"""Carried file sets for a machine reached through a size-limited transfer (the device tool's
64 MiB per call): `plan` cuts files into parts that fill sets, `write_sets` writes them,
`verify` checks every part's size and sha256 against the manifest and `assemble` joins them
(checking each whole file) under a root, refusing to lay anything down until every part is
there and intact. A `StageError` names the missing or corrupt file and the set to carry again.

Standard library only: the target machine runs this before anything is installed.
`bench/gpu_stage.py` is the command line and says what the GPU machine is given.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BLOCK = 8 << 20
Manifest = dict[str, Any]  # as in bench/gpu_stage_manifest.json


class StageError(Exception):
    """A missing or corrupt carried file (the message names it and what to do)."""


@dataclass(frozen=True)
class Source:
    dest: str  # path under the device root, e.g. "wheels/av-....whl"
    path: Path  # the file here


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


# --- building the sets (here) --------------------------------------------------------------------


def plan(sources: Sequence[Source], set_bytes: int, prefix: str = "s") -> Manifest:
    """The manifest: files in order, each cut into parts that fill sets of `set_bytes`
    (named prefix1, prefix2, ...)."""
    files: list[Manifest] = []
    sets: dict[str, int] = {}
    current, room = 1, set_bytes
    for i, source in enumerate(sources):
        size = source.path.stat().st_size
        parts: list[Manifest] = []
        offset = 0
        while offset < size or not parts:
            if room == 0:
                current, room = current + 1, set_bytes
            take = min(room, size - offset)
            name = f"{i:03d}-{Path(source.dest).name}.part{len(parts) + 1}"
            parts.append({"set": f"{prefix}{current}", "name": name, "offset": offset,
                          "size": take})
            sets[f"{prefix}{current}"] = sets.get(f"{prefix}{current}", 0) + take
            offset += take
            room -= take
            if size == 0:
                break
        files.append({"dest": source.dest, "size": size, "sha256": sha256_of(source.path),
                      "source": str(source.path), "parts": parts})
    return {"set_bytes": set_bytes, "sets": sets, "files": files}


def write_sets(manifest: Manifest, stage: Path) -> None:
    """Write every part (with its sha256 into the manifest) under stage/<set>/."""
    for name in manifest["sets"]:
        shutil.rmtree(stage / name, ignore_errors=True)
        (stage / name).mkdir(parents=True)
    for entry in files_of(manifest):
        with Path(str(entry["source"])).open("rb") as f:
            for part in entry["parts"]:
                f.seek(int(part["offset"]))
                data = f.read(int(part["size"]))
                (stage / part["set"] / part["name"]).write_bytes(data)
                part["sha256"] = hashlib.sha256(data).hexdigest()


def files_of(manifest: Manifest) -> list[Manifest]:
    files: list[Manifest] = manifest["files"]
    return files


def parse_ldd(text: str) -> dict[str, Path]:
    """The libraries `ldd` found (name -> path), from its output (`name => path (0x...)`);
    the vdso and the loader, which have no `=>` path, are left out."""
    found = {}
    for line in text.splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        path = rest.rsplit(" (", 1)[0].strip()
        if arrow and path.startswith("/"):
            found[name] = Path(path)
    return found


# --- checking and laying down (there; standard library only) ------------------------------------


def verify(manifest: Manifest, stage: Path, sets: Iterable[str] | None = None) -> int:
    """Check every part of `sets` (None: all) under `stage`; the bytes checked. Raises
    `StageError` at the first missing or corrupt part."""
    wanted = set(sets) if sets is not None else None
    checked = 0
    for entry in files_of(manifest):
        for k, part in enumerate(entry["parts"], 1):
            if wanted is not None and part["set"] not in wanted:
                continue
            path = stage / part["set"] / part["name"]
            what = (f"{path} (part {k}/{len(entry['parts'])} of {entry['dest']}, set "
                    f"{part['set']})")
            if not path.is_file():
                raise StageError(f"MISSING {what}: carry set {part['set']} again")
            if path.stat().st_size != part["size"]:
                raise StageError(f"CORRUPT {what}: {path.stat().st_size} bytes, expected "
                                 f"{part['size']}: carry set {part['set']} again")
            if sha256_of(path) != part["sha256"]:
                raise StageError(f"CORRUPT {what}: sha256 differs from the manifest: carry set "
                                 f"{part['set']} again")
            checked += int(part["size"])
    return checked


def assemble(manifest: Manifest, stage: Path, root: Path) -> list[Path]:
    """Verify every part, then join each file under `root` (checked whole); return the paths.
    A file already in place with the manifest's size and sha256 is kept."""
    verify(manifest, stage)
    out = []
    for entry in files_of(manifest):
        target = root / str(entry["dest"])
        out.append(target)
        if target.is_file() and target.stat().st_size == entry["size"] and (
                sha256_of(target) == entry["sha256"]):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        with tmp.open("wb") as sink:
            for part in entry["parts"]:
                sink.write((stage / part["set"] / part["name"]).read_bytes())
        if sha256_of(tmp) != entry["sha256"]:
            tmp.unlink()
            raise StageError(f"CORRUPT {entry['dest']}: joined parts differ from the manifest")
        os.replace(tmp, target)
    return out


def install_wheels(root: Path) -> None:
    """pip install the carried wheels into root/site (no index, no dependencies); skipped when
    the same wheels were installed there already (a marker lists them)."""
    wheels = sorted(str(p) for p in (root / "wheels").glob("*.whl"))
    if not wheels:
        raise StageError(f"no wheels under {root / 'wheels'}")
    marker = root / "site" / ".staged-wheels"
    listing = "\n".join(Path(w).name for w in wheels)
    if marker.is_file() and marker.read_text() == listing:
        return
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    "--no-compile", "--no-cache-dir", "--upgrade", "--target",
                    str(root / "site"), *wheels], check=True)
    marker.write_text(listing)


def run_check(command: str, stage: Path, manifest_path: Path, *, sets: str | None = None,
              root: Path = Path("/tmp/rtc"), install: bool = True) -> int:
    """`verify` (the parts of `sets`, comma-separated; None: all) or `assemble` (then install
    the wheels), as a command: 0, or 2 with the reason on stderr."""
    import json

    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as exc:
        print(f"stage: cannot read the manifest {manifest_path}: {exc}", file=sys.stderr)
        return 2
    try:
        if command == "verify":
            checked = verify(manifest, stage, sets.split(",") if sets else None)
            print(f"stage verify: {checked / 1e6:.1f} MB ok ({sets or 'all sets'})")
            return 0
        paths = assemble(manifest, stage, root)
        if install:
            install_wheels(root)
        print(f"stage assemble: {len(paths)} files ok under {root}; "
              f"export PYTHONPATH={root / 'site'} RTC_AVATAR_CACHE={root / 'cache'}")
        return 0
    except StageError as exc:
        print(f"stage: {exc}", file=sys.stderr)
        return 2
