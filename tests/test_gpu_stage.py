"""testkit/staging.py (bench/gpu_stage.py's checks): the carried sets are checked by size and
sha256 before anything starts on the GPU machine; a missing or corrupt part stops it (exit 2)
naming the file and the set to carry again; the joined files are the originals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testkit.staging import (
    Source,
    StageError,
    assemble,
    parse_ldd,
    plan,
    run_check,
    verify,
    write_sets,
)


@pytest.fixture
def staged(tmp_path: Path) -> tuple[dict, Path, dict[str, bytes]]:
    originals = {"wheels/a.whl": bytes(range(256)) * 9, "cache/asr/m/model.bin": b"x" * 5000,
                 "tokenizer/empty.json": b"", "site/p/q.py": b"print(1)\n"}
    sources = []
    for i, (dest, data) in enumerate(originals.items()):
        path = tmp_path / "src" / f"{i}.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        sources.append(Source(dest, path))
    manifest = plan(sources, 2048)  # small sets: the larger files are cut across them
    stage = tmp_path / "stage"
    write_sets(manifest, stage)
    return manifest, stage, originals


def test_parts_fill_sets_and_join_back(staged: tuple[dict, Path, dict[str, bytes]],
                                       tmp_path: Path) -> None:
    manifest, stage, originals = staged
    assert max(manifest["sets"].values()) <= 2048 and len(manifest["sets"]) >= 4
    assert sum(len(f["parts"]) for f in manifest["files"]) > len(originals)
    assert verify(manifest, stage) == sum(len(d) for d in originals.values())
    root = tmp_path / "root"
    assemble(manifest, stage, root)
    for dest, data in originals.items():
        assert (root / dest).read_bytes() == data
    assemble(manifest, stage, root)  # in place already: kept


def test_a_missing_part_is_named_with_its_set(staged: tuple[dict, Path, dict[str, bytes]],
                                              tmp_path: Path) -> None:
    manifest, stage, _ = staged
    part = manifest["files"][1]["parts"][-1]
    (stage / part["set"] / part["name"]).unlink()
    with pytest.raises(StageError, match=rf"MISSING .*{part['name']}.*model\.bin.*carry set "
                                         rf"{part['set']} again"):
        verify(manifest, stage)
    others = [s for s in manifest["sets"] if s != part["set"]]
    verify(manifest, stage, others)  # a partial check of the sets that did arrive passes
    with pytest.raises(StageError, match="MISSING"):
        assemble(manifest, stage, tmp_path / "root")
    assert not (tmp_path / "root").exists()  # nothing laid down before the whole check


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_corrupt_part_is_found(staged: tuple[dict, Path, dict[str, bytes]],
                                 damage: str) -> None:
    manifest, stage, _ = staged
    part = manifest["files"][0]["parts"][0]
    path = stage / part["set"] / part["name"]
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[7] ^= 1
    else:
        data = data[:-1]
    path.write_bytes(bytes(data))
    with pytest.raises(StageError, match=rf"CORRUPT .*{part['name']}.*a\.whl"):
        verify(manifest, stage)


def test_the_command_line_stops_with_exit_2_and_a_message(
        staged: tuple[dict, Path, dict[str, bytes]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    manifest, stage, _ = staged
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    assert run_check("verify", stage, path) == 0
    part = manifest["files"][0]["parts"][0]
    (stage / part["set"] / part["name"]).unlink()
    assert run_check("assemble", stage, path, root=tmp_path / "r", install=False) == 2
    assert "MISSING" in capsys.readouterr().err
    assert run_check("verify", stage, tmp_path / "no") == 2


def test_ldd_output_names_each_library_path() -> None:
    """The redis extra (bench/gpu_stage.py) carries the libraries ldd resolved."""
    text = """\tlinux-vdso.so.1 (0x00007f052bf25000)
\tlibatomic.so.1 => /lib/x86_64-linux-gnu/libatomic.so.1 (0x00007f052bf09000)
\tlibjemalloc.so.2 => /lib/x86_64-linux-gnu/libjemalloc.so.2 (0x00007f052b800000)
\tlibgone.so.9 => not found
\t/lib64/ld-linux-x86-64.so.2 (0x00007f052bf27000)
"""
    assert parse_ldd(text) == {
        "libatomic.so.1": Path("/lib/x86_64-linux-gnu/libatomic.so.1"),
        "libjemalloc.so.2": Path("/lib/x86_64-linux-gnu/libjemalloc.so.2"),
    }


def test_the_committed_extras_fit_a_call_and_their_wheels_install() -> None:
    """Each committed extra's manifest: every set within the 54 MiB a device call leaves
    beside the tree, each file's parts cover it exactly, and the qwen extra's wheel (gguf) lies
    under wheels/ (gpu_device.sh lays extras down first, so the install takes it)."""
    bench = Path(__file__).resolve().parents[1] / "bench"
    for path in sorted(bench.glob("gpu_stage_*.json")):
        manifest = json.loads(path.read_text())
        assert all(size <= 54 << 20 for size in manifest["sets"].values()), path.name
        for entry in manifest["files"]:
            assert sum(p["size"] for p in entry["parts"]) == entry["size"], entry["dest"]
            offsets = [p["offset"] for p in entry["parts"]]
            assert offsets == sorted(offsets) and offsets[0] == 0, entry["dest"]
    qwen = json.loads((bench / "gpu_stage_qwen.json").read_text())
    (wheel,) = [f for f in qwen["files"] if f["dest"].startswith("wheels/")]
    assert wheel["dest"].startswith("wheels/gguf-") and wheel["dest"].endswith(".whl")
