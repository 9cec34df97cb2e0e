"""The import rules of CONTRIBUTING ("Layers"), checked on every module of the tree.

Each module's imports (at module level, inside functions, under `TYPE_CHECKING`) are read with
`ast` and checked against the table below, which is CONTRIBUTING's list, rule for rule. A new
module is checked as soon as it exists; a rule that is changed here must change there too.
The same imports, as a graph between our modules, must have no circles.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("common", "engines", "media", "signaling", "rtc_server", "web_client")
HARNESS = ("testkit", "bench", "tests")

# Which of our packages each package may import (itself always).
MAY_IMPORT: dict[str, frozenset[str]] = {
    "common": frozenset(),
    "engines": frozenset({"common"}),
    "media": frozenset({"common"}),
    "signaling": frozenset({"common"}),
    "web_client": frozenset(),
    "rtc_server": frozenset({"common", "engines", "media", "signaling", "web_client"}),
    "testkit": frozenset(PRODUCT),
    "bench": frozenset({*PRODUCT, "testkit"}),
    "tests": frozenset({*PRODUCT, "testkit"}),
}
# Composition roots outside rtc_server: they wire engines to the renderer (a CLI).
ROOTS: dict[str, frozenset[str]] = {"media/avatar/__main__.py": frozenset({"engines"})}
# Packages that load or run a model: never in media, signaling or common.
MODEL_PACKAGES = frozenset({
    "onnxruntime", "torch", "transformers", "llama_cpp", "ctranslate2", "faster_whisper",
    "funasr", "piper", "tensorrt", "dlib", "face_recognition_models", "webrtcvad", "silero_vad",
})
# rtc_server's modules that serve HTTP (the single process's app and page, the cluster's
# gateway and worker); the others raise rtc_server's domain errors.
HTTP_MODULES = ("rtc_server/app.py", "rtc_server/page.py", "rtc_server/cluster/")
# The models' training (the face model, the text-end probe): what a server loads never
# reaches it.
TRAINING = ("engines.face.training", "engines.turn.training")
TRAINING_DIR = ("engines/face/training/", "engines/turn/training/")
# The packages whose modules never import in a circle (the product and the shared harness).
ACYCLIC = (*PRODUCT, "testkit")


@dataclass(frozen=True)
class Import:
    module: str  # the importing file, relative to the root ("engines/llm/llama.py")
    name: str  # the imported module ("engines.llm.stops", "aiohttp")
    line: int

    @property
    def top(self) -> str:
        return self.name.split(".")[0]


def imports_of(module: str, source: str) -> list[Import]:
    """Every import in `source` (the file `module`), with `from a import b` read as `a.b`
    when `a/b` is a module of ours, so `from signaling import errors` counts as
    `signaling.errors`."""
    package = module.rsplit("/", 1)[0].replace("/", ".")
    found: list[Import] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing package
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                is_module = (ROOT / (sub.replace(".", "/") + ".py")).exists() or (
                    ROOT / sub.replace(".", "/") / "__init__.py").exists()
                found.append(Import(module, sub if is_module else base, node.lineno))
    return list(dict.fromkeys(found))  # one entry per module named on a line


def violations(imp: Import) -> list[str]:
    """What `imp` breaks of the rules (empty: allowed)."""
    package = imp.module.split("/")[0]
    where = f"{imp.module}:{imp.line} imports {imp.name}"
    broken = []
    ours = imp.top in PRODUCT or imp.top in HARNESS
    allowed = MAY_IMPORT[package] | ROOTS.get(imp.module, frozenset()) | {package}
    if ours and imp.top not in allowed:
        broken.append(f"{where}: {package} may import only {sorted(allowed)} of ours")
    if imp.top == "aiortc" and package in PRODUCT and not (
        package == "rtc_server" or imp.module == "media/tracks.py"
    ):
        broken.append(f"{where}: aiortc only in rtc_server/ and media/tracks.py")
    if imp.top == "aiohttp" and package in ("engines", "media", "common") and (
        imp.module != "engines/llm/openai_http.py"
    ):
        broken.append(f"{where}: aiohttp only in the network-client engine (llm/openai_http)")
    if imp.top == "asyncio" and package == "engines" and not imp.module.startswith("engines/llm/"):
        broken.append(f"{where}: CPU-bound engines are synchronous (asyncio only in engines/llm)")
    if imp.name.startswith(TRAINING) and not (
        imp.module.startswith(TRAINING_DIR) or package in HARNESS
    ):
        broken.append(f"{where}: training code is imported only by itself and the harness")
    if imp.top in MODEL_PACKAGES and package in ("media", "signaling", "common"):
        broken.append(f"{where}: {package} never loads a model")
    if (
        package == "rtc_server" and imp.name in ("signaling.http", "signaling.errors")
        and not imp.module.startswith(HTTP_MODULES)
    ):
        broken.append(f"{where}: only rtc_server's HTTP modules use signaling's HTTP errors")
    return broken


def tree_imports() -> list[Import]:
    found = []
    for package in MAY_IMPORT:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            found += imports_of(module, path.read_text(encoding="utf-8"))
    return found


def test_every_module_keeps_to_its_layer() -> None:
    found = tree_imports()
    broken = [v for imp in found for v in violations(imp)]
    assert not broken, "\n".join(broken)
    # The walk saw the tree (a rule that matches nothing would pass vacuously).
    seen = {(i.module, i.name) for i in found} | {(i.module, i.top) for i in found}
    assert ("media/tracks.py", "aiortc") in seen
    assert ("media/avatar/__main__.py", "engines.voicing") in seen
    assert ("engines/llm/openai_http.py", "aiohttp") in seen
    assert ("rtc_server/app.py", "signaling.errors") in seen
    assert ("engines/face/training/data.py", "engines.face.training.visemes") in seen
    assert {i.module.split("/")[0] for i in found} == set(MAY_IMPORT)


def module_name(path: str) -> str:
    """`engines/asr/whisper.py` -> `engines.asr.whisper`; a package's `__init__.py` is the
    package."""
    return path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def import_graph(imports: Iterable[Import], modules: set[str]) -> dict[str, dict[str, int]]:
    """Which of `modules` each module imports, with the line of the first such import. Every
    import is an edge: one inside a function or under `TYPE_CHECKING` still ties the two
    modules (it only hides the circle until that code runs, or from the type checker)."""
    graph: dict[str, dict[str, int]] = {module: {} for module in modules}
    for imp in imports:
        if imp.name in modules:
            graph[module_name(imp.module)].setdefault(imp.name, imp.line)
    return graph


def reachable(graph: dict[str, dict[str, int]], start: str) -> set[str]:
    """The modules `start` imports, directly or through others (itself only in a circle)."""
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph[module]
    return seen


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components that are circles: the modules that each reach every
    other, sorted (the tree is a few hundred modules, so the reach of each is cheap)."""
    reach = {module: reachable(graph, module) for module in graph}
    found = {
        frozenset(other for other in reach[module] if module in reach[other])
        for module in graph if module in reach[module]
    }
    return sorted(sorted(circle) for circle in found)


def test_no_module_imports_in_a_circle() -> None:
    """Two modules that need each other share a lower module instead: imports go one way."""
    found = [i for i in tree_imports() if i.module.split("/")[0] in ACYCLIC]
    paths = [
        path.relative_to(ROOT).as_posix()
        for package in ACYCLIC for path in (ROOT / package).rglob("*.py")
    ]
    graph = import_graph(found, {module_name(path) for path in paths})
    report = [
        "circle: " + ", ".join(
            f"{a} -> {b} (line {graph[a][b]})" for a in circle for b in circle if b in graph[a]
        )
        for circle in circles(graph)
    ]
    assert not report, "\n".join(report)
    assert "engines.asr.whisper" in graph["engines.asr.streaming"]  # the graph saw the tree


def test_a_circle_is_found_wherever_its_imports_stand() -> None:
    """The checker itself: a lazy or type-only import that closes a circle is a circle."""
    sources = {
        "engines/x/a.py": "from engines.x.b import B",
        "engines/x/b.py": "def f():\n    import engines.x.c",
        "engines/x/c.py": "import typing\nif typing.TYPE_CHECKING:\n    import engines.x.a",
        "engines/x/d.py": "from engines.x.a import A",
    }
    found = [imp for module, source in sources.items() for imp in imports_of(module, source)]
    graph = import_graph(found, {module_name(module) for module in sources})
    assert circles(graph) == [["engines.x.a", "engines.x.b", "engines.x.c"]]


@pytest.mark.parametrize(
    ("module", "source", "rule"),
    [
        ("engines/tts/x.py", "import rtc_server.config", "engines may import only"),
        ("engines/vad/x.py", "def f():\n    from media.audio import OUT_RATE", "engines may"),
        ("engines/asr/x.py", "import asyncio", "CPU-bound engines are synchronous"),
        ("engines/llm/x.py", "from aiohttp import web", "aiohttp only"),
        ("engines/face/x.py", "from aiortc import RTCPeerConnection", "aiortc only"),
        ("media/avatar/x.py", "from engines import portrait", "media may import only"),
        ("engines/face/runtime.py", "from engines.face.training import visemes", "training"),
        ("rtc_server/x.py", "from engines.face.training.data import build_dataset", "training"),
        ("media/playout.py", "import aiortc", "aiortc only"),
        ("media/x.py", "import onnxruntime", "never loads a model"),
        ("signaling/x.py", "from rtc_server import errors", "signaling may import only"),
        ("signaling/x.py", "from aiortc.sdp import SessionDescription", "aiortc only"),
        ("common/x.py", "import engines", "common may import only"),
        ("rtc_server/session.py", "from signaling.errors import InvalidOffer", "HTTP modules"),
        ("rtc_server/x.py", "from signaling import http", "HTTP modules"),
        ("rtc_server/x.py", "from testkit.peer import LoopbackPeer", "rtc_server may"),
        ("testkit/x.py", "from tests.support import fakes", "testkit may import only"),
        ("bench/x.py", "from tests.support.server import loopback_config", "bench may"),
    ],
)
def test_each_rule_catches_its_breach(module: str, source: str, rule: str) -> None:
    """The checker itself: each rule, fed a module that breaks it, says so."""
    broken = [v for imp in imports_of(module, source) for v in violations(imp)]
    assert any(rule in v for v in broken), broken


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("engines/llm/openai_http.py", "import aiohttp"),
        ("engines/llm/resilience.py", "import asyncio"),
        ("media/tracks.py", "from aiortc import MediaStreamTrack"),
        ("media/avatar/__main__.py", "from engines.voicing import lips"),
        ("rtc_server/cluster/gateway.py", "from signaling.errors import AtCapacity"),
        ("rtc_server/session.py", "from signaling.offer import Offer"),
        ("bench/x.py", "from testkit.speech import synth"),
        ("engines/face/x.py", "from common.face_geometry import BASIS"),
        ("engines/face/training/train.py", "from engines.face.training.data import targets"),
        ("tests/engines/x.py", "from engines.face.training.visemes import trajectory"),
    ],
)
def test_what_the_rules_allow(module: str, source: str) -> None:
    assert [v for imp in imports_of(module, source) for v in violations(imp)] == []
