// rtc-avatar web client: microphone up, avatar video and voice down, events on a data channel.
// Plain browser JS, no build step, no external resources. `window.rtcAvatar` exposes the
// peer connection and the received events for tests and embedding apps.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  const STAGES = [
    "voice_end", "speech_end", "asr_final", "llm_first_token", "first_chunk", "tts_start",
    "tts_first_audio", "face_first_frame", "first_audio_sent",
  ];
  // A connection that drops (its worker crashed or went away) is replaced by a new session
  // through the same entry: at most this many times in a row without a connected state.
  const MAX_RECONNECTS = 3;
  const LOST_AFTER_MS = 5000;  // "disconnected" this long counts as lost ("failed" can take 30 s)
  const state = {
    pc: null, sessionId: null, mic: null, portraitId: null, events: [], turns: new Map(),
    calls: new Map(), reconnects: 0, sessions: [],
  };
  window.rtcAvatar = state;

  class ApiError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  function token() { return $("token").value.trim() || params.get("token") || ""; }

  async function api(path, options = {}) {
    const headers = { ...(options.headers || {}) };
    if (options.body && !headers["Content-Type"]) headers["Content-Type"] = "application/json";
    if (token()) headers["Authorization"] = `Bearer ${token()}`;
    const res = await fetch(path, { ...options, headers });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) {
      throw new ApiError(res.status, (body.error && body.error.message) || res.statusText);
    }
    return body;
  }

  function setStatus(text) { $("status").textContent = text; }

  function setState(name) {
    const el = $("state");
    el.textContent = name;
    el.className = `state ${name}`;
  }

  function waitForIceGathering(pc, timeoutMs = 5000) {
    // The server does not take trickled candidates: send the offer with all of them.
    if (pc.iceGatheringState === "complete") return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        if (pc.iceGatheringState !== "complete") return;
        pc.removeEventListener("icegatheringstatechange", done);
        resolve();
      };
      pc.addEventListener("icegatheringstatechange", done);
      setTimeout(resolve, timeoutMs);
    });
  }

  function line(turnId, who) {
    const key = `${who}:${turnId}`;
    let li = state.turns.get(key);
    if (!li) {
      li = document.createElement("li");
      li.className = who;
      state.turns.set(key, li);
      $("transcript").appendChild(li);
    }
    return li;
  }

  // A tool call of the agent: one card per call, updated in place as its status moves on
  // (confirm -> running -> done, or cancelled, failed...). A sensitive tool's arguments are null.
  function showToolCall(ev) {
    let card = state.calls.get(ev.call_id);
    if (!card) {
      card = document.createElement("li");
      card.dataset.callId = ev.call_id;
      state.calls.set(ev.call_id, card);
      $("transcript").appendChild(card);
    }
    const part = (className, text) => Object.assign(document.createElement("span"), { className, textContent: text });
    const args = Object.entries(ev.arguments || {})
      .map(([k, v]) => `${k.replaceAll("_", " ")}: ${typeof v === "object" ? JSON.stringify(v) : v}`).join(", ");
    const took = ev.duration_ms == null ? "" : ` ${Math.round(ev.duration_ms)} ms`;
    card.className = `tool ${ev.status}`;
    card.title = ev.detail || "";
    card.replaceChildren(part("tool-name", ev.name.replaceAll("_", " ")), part("tool-args", args),
      part("tool-status", ev.status + took));
  }

  function showTimings(marks) {
    const body = $("latency").tBodies[0];
    body.replaceChildren();
    const names = [...STAGES.filter((s) => s in marks), ...Object.keys(marks).filter((s) => !STAGES.includes(s))];
    for (const name of names) {
      const row = body.insertRow();
      row.insertCell().textContent = name.replaceAll("_", " ");
      row.insertCell().textContent = Math.round(marks[name]).toString();
    }
  }

  function onEvent(ev) {
    state.events.push(ev);
    switch (ev.type) {
      case "session": setStatus(""); break;
      case "state": setState(ev.state); break;
      case "transcript": {
        const li = line(ev.turn_id, "user");
        li.textContent = ev.text;
        li.classList.toggle("partial", !ev.final);
        break;
      }
      case "agent_text": {
        const li = line(ev.turn_id, "agent");
        // Chunks arrive exactly as written, spaces included (none between Chinese words).
        li.textContent = (li.textContent + ev.text).trimStart();
        break;
      }
      case "tool_call": showToolCall(ev); break;
      case "timings": showTimings(ev.marks_ms); break;
      case "error": setStatus(`${ev.code}: ${ev.message}`); break;
      default: break;
    }
    const list = $("transcript");
    list.scrollTop = list.scrollHeight;
  }

  async function start() {
    $("start").disabled = true;
    setStatus("");
    setState("connecting");
    try {
      const config = await api("/api/config");
      const pc = new RTCPeerConnection({
        iceServers: config.ice_servers, iceTransportPolicy: config.ice_transport_policy || "all",
      });
      state.pc = pc;
      const channel = pc.createDataChannel("events");
      channel.onmessage = (e) => onEvent(JSON.parse(e.data));
      state.mic = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
        video: false,
      });
      for (const track of state.mic.getAudioTracks()) pc.addTrack(track, state.mic);
      pc.addTransceiver("video", { direction: "recvonly" });
      const remote = new MediaStream();
      pc.ontrack = (e) => {
        remote.addTrack(e.track);
        $("avatar").srcObject = remote;
      };
      let lostTimer = null;
      pc.onconnectionstatechange = () => {
        clearTimeout(lostTimer);
        const now = pc.connectionState;
        if (now === "connected") state.reconnects = 0;
        if (now === "disconnected") lostTimer = setTimeout(() => reconnect(pc), LOST_AFTER_MS);
        if (now === "failed") reconnect(pc);
        if (now === "closed") stop();
      };
      await pc.setLocalDescription(await pc.createOffer());
      await waitForIceGathering(pc);
      const answer = await api("/api/offer", {
        method: "POST",
        body: JSON.stringify({
          sdp: pc.localDescription.sdp, type: "offer",
          ...(state.portraitId ? { portrait_id: state.portraitId } : {}),
        }),
      });
      state.sessionId = answer.session_id;
      state.sessions.push(answer.session_id);
      await pc.setRemoteDescription({ sdp: answer.sdp, type: "answer" });
      $("stop").disabled = false;
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) $("auth").hidden = false;
      setStatus(err.message || String(err));
      await stop();
    }
  }

  async function reconnect(pc) {
    if (state.pc !== pc) return;  // stopped or already replaced
    await stop();
    if (state.reconnects >= MAX_RECONNECTS) {
      setStatus("connection failed");
      return;
    }
    state.reconnects += 1;
    setStatus("connection lost: reconnecting…");
    await start();
  }

  async function stop() {
    const { pc, sessionId, mic } = state;
    state.pc = null;
    state.sessionId = null;
    state.mic = null;
    if (sessionId) {
      try { await api(`/api/sessions/${encodeURIComponent(sessionId)}`, { method: "DELETE" }); } catch (_) { /* already gone */ }
    }
    if (mic) mic.getTracks().forEach((t) => t.stop());
    if (pc) pc.close();
    $("avatar").srcObject = null;
    $("stop").disabled = true;
    $("start").disabled = false;
    setState("idle");
  }

  async function uploadPortrait() {
    const file = $("portrait").files[0];
    state.portraitId = null;
    if (!file) return;
    setStatus("checking portrait…");
    try {
      const res = await api("/api/portrait", {
        method: "POST", body: file, headers: { "Content-Type": file.type || "application/octet-stream" },
      });
      state.portraitId = res.portrait_id;
      setStatus("");
    } catch (err) {
      $("portrait").value = "";
      setStatus(`portrait: ${err.message}`);
    }
  }

  async function init() {
    try {
      const config = await api("/api/config");
      $("portrait-picker").hidden = config.mode !== "agent" || config.portrait_upload === false;
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) $("auth").hidden = false;
    }
  }

  $("portrait").addEventListener("change", uploadPortrait);
  init();
  $("start").addEventListener("click", start);
  $("stop").addEventListener("click", stop);
  window.addEventListener("pagehide", () => {
    if (state.sessionId) {
      fetch(`/api/sessions/${encodeURIComponent(state.sessionId)}`, {
        method: "DELETE", keepalive: true,
        headers: token() ? { Authorization: `Bearer ${token()}` } : {},
      });
    }
  });
})();
