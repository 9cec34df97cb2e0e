"""Cluster pieces without processes: TURN credentials, request tokens, registration
signatures, the [cluster]/[relay] config and the CLI's refusals."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtc_server.__main__ import main
from rtc_server.cluster.directory import WorkerRecord
from rtc_server.cluster.errors import ClusterUnauthorized, WrongWorker
from rtc_server.cluster.local import share_cores, start_child
from rtc_server.cluster.signing import Claims, sign_request, verify_request
from rtc_server.config import load_config
from rtc_server.errors import ConfigError
from signaling.turn_credentials import RelayConfig, page_ice_config, turn_credentials


def test_turn_credentials_follow_coturns_rest_scheme() -> None:
    # `echo -n "1700000600:alice" | openssl dgst -sha1 -hmac north -binary | base64`
    assert turn_credentials("north", "alice", 600, now=1_700_000_000) == (
        "1700000600:alice", "gthUwOpcRoLI0MMCziCEBOWYnpo=",
    )


def test_page_gets_fresh_credentials_never_the_secret() -> None:
    config = RelayConfig(urls=("turn:127.0.0.1:3478?transport=udp",), secret="north",
                        relay_only=True)
    first = page_ice_config([{"urls": ["stun:10.0.0.1:3478"]}], config)
    second = page_ice_config([], config)
    assert first["ice_transport_policy"] == "relay"
    stun, turn = first["ice_servers"]
    assert stun == {"urls": ["stun:10.0.0.1:3478"]}
    assert "north" not in str(first) and turn["urls"] == list(config.urls)
    assert int(turn["username"].split(":")[0]) > time.time() + 3500
    assert turn["username"] != second["ice_servers"][0]["username"]  # a random user per page
    assert page_ice_config([], RelayConfig()) == {"ice_servers": [], "ice_transport_policy": "all"}


def test_turn_urls_need_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RTC_TURN_SECRET", raising=False)
    with pytest.raises(ValueError, match="needs relay.secret"):
        RelayConfig(urls=("turn:h:3478",)).check()
    monkeypatch.setenv("RTC_TURN_SECRET", "from-env")
    RelayConfig(urls=("turn:h:3478",)).check()
    with pytest.raises(ValueError, match="turn: or turns:"):
        RelayConfig(urls=("stun:h:3478",))


def test_request_tokens_are_bound_to_action_worker_and_time() -> None:
    claims = Claims("offer", "w1", "s1", time.time() + 10)
    token = sign_request("k", claims)
    assert verify_request("k", token, "offer", "w1") == claims
    with pytest.raises(ClusterUnauthorized, match="signature"):
        verify_request("other", token, "offer", "w1")
    encoded, mac = token.split(".")
    with pytest.raises(ClusterUnauthorized, match="signature"):
        verify_request("k", encoded[:-2] + "xx." + mac, "offer", "w1")
    with pytest.raises(ClusterUnauthorized, match="not 'delete'"):
        verify_request("k", token, "delete", "w1")
    with pytest.raises(WrongWorker, match="signed for 'w1'"):
        verify_request("k", token, "offer", "w2")
    with pytest.raises(ClusterUnauthorized, match="expired"):
        verify_request("k", token, "offer", "w1", now=time.time() + 11)
    with pytest.raises(ClusterUnauthorized, match="missing"):
        verify_request("k", None, "offer", "w1")


def test_registration_signature_covers_every_field() -> None:
    record = WorkerRecord.signed("k", "w1", "http://10.0.0.5:8081", 4, False, 1000, 7)
    assert record.signature_ok("k") and not record.signature_ok("k2")
    for change in ({"url": "http://evil:1"}, {"capacity": 40}, {"draining": True},
                   {"ts_ms": 2000}, {"seq": 8}, {"worker_id": "w2"}):
        forged = WorkerRecord(**{**record.__dict__, **change})
        assert not forged.signature_ok("k"), change
    assert WorkerRecord.parse("w1", record.fields()) == record
    assert WorkerRecord.parse("w1", {"url": "x"}) is None


def test_cluster_and_turn_sections_load(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[cluster]\nrole = "worker"\nredis_url = "redis://10.0.0.2:6379/1"\nadvertise = '
        '"10.0.0.5"\nheartbeat_s = 0.5\nttl_s = 2\n[relay]\nurls = ["turn:t.example:3478"]\n'
        'secret = "s"\nttl_s = 600\n'
    )
    config = load_config(path)
    assert config.cluster.role == "worker" and config.cluster.ttl_s == 2.0
    assert config.cluster.advertise == "10.0.0.5" and config.relay.ttl_s == 600
    for text, fragment in (
        ('[cluster]\nrole = "boss"\n', "not one of"),
        ("[cluster]\nheartbeat_s = 2\nttl_s = 3\n", "ttl_s at least 2 * heartbeat_s"),
        ('[cluster]\nnamespace = "a:b"\n', "namespace"),
        ("[cluster]\nredis = 1\n", "unknown key(s): redis"),
        ("[relay]\nttl_s = 5\n", "at least 60"),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(fragment)):
            load_config(path)


def test_cli_refuses_a_cluster_role_without_its_secret(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RTC_CLUSTER_SECRET", raising=False)
    assert main(["--role", "gateway", "--redis", "redis://127.0.0.1:1/0"]) == 2
    assert "needs cluster.secret" in capsys.readouterr().err
    monkeypatch.setenv("RTC_CLUSTER_SECRET", "s")
    assert main(["--role", "worker", "--host", "0.0.0.0", "--mode", "echo"]) == 2
    assert "--advertise" in capsys.readouterr().err


def test_server_relay_gives_the_servers_peer_connection_fresh_turn_credentials() -> None:
    from rtc_server.config import IceConfig
    from rtc_server.ice import rtc_configuration

    turn = RelayConfig(urls=("turn:127.0.0.1:3478?transport=udp",), secret="north")
    assert rtc_configuration(IceConfig(), turn).iceServers == []  # only when asked
    relayed = dataclasses.replace(turn, server_relay=True)
    servers = rtc_configuration(IceConfig(), relayed).iceServers
    assert servers is not None
    (server,) = servers
    assert server.urls == list(turn.urls) and server.credential
    assert server.username is not None and int(server.username.split(":")[0]) > time.time()


def test_the_gateway_loads_neither_aiortc_nor_a_model() -> None:
    """The gateway is signaling only (CONTRIBUTING's layers): a fresh interpreter that imports
    it has no aiortc, av, torch or onnxruntime."""
    code = ("import sys, rtc_server.cluster.gateway, rtc_server.cluster.roles; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'aiortc', 'av', 'torch', 'onnxruntime', 'faster_whisper'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]"


def test_workers_on_one_box_get_disjoint_core_shares() -> None:
    groups, rest = share_cores(range(16), 4)
    assert [sorted(g) for g in groups] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
    assert sorted(rest) == [12, 13, 14, 15]
    groups, rest = share_cores(range(16), 8)
    assert all(len(g) == 1 for g in groups) and len(rest) == 8
    groups, rest = share_cores(range(16), 11)  # the GPU box's 32 sessions (README, GPU)
    assert all(len(g) == 1 for g in groups) and sorted(rest) == [11, 12, 13, 14, 15]
    groups, rest = share_cores([0, 1], 2)  # no core left over: the rest may use all of them
    assert groups == [frozenset({0}), frozenset({1})] and rest == frozenset({0, 1})
    with pytest.raises(ValueError, match="one each"):
        share_cores([0, 1], 3)


async def test_a_child_runs_on_the_cores_it_is_given(tmp_path: Path) -> None:
    """A worker pinned to its share sizes its threads from it (`usable_cores` reads the
    affinity): the launcher's `cpus` reach the child."""
    core = min(os.sched_getaffinity(0))
    child = await start_child(
        "pinned", [sys.executable, "-c", "import os; print('on', sorted(os.sched_getaffinity(0)))"],
        "on ", tmp_path, cpus=frozenset({core}))
    try:
        assert child.ready_line == f"on [{core}]"
    finally:
        await child.stop()
