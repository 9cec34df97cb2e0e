// The agent in a web app through Pipecat's JS client SDK: the SmallWebRTC transport carries
// the microphone up and the avatar's voice and face down; RTVI messages carry the rest.
import { PipecatClient } from "@pipecat-ai/client-js";
import { SmallWebRTCTransport, WavMediaManager } from "@pipecat-ai/small-webrtc-transport";

const query = new URLSearchParams(location.search);
const server = query.get("server") || location.origin;
const $ = (id) => document.getElementById(id);
const log = (who, text) => {
  const li = Object.assign(document.createElement("li"), { className: who, textContent: text });
  $("log").append(li);
};

const client = new PipecatClient({
  // WavMediaManager: the microphone through getUserMedia. The transport's default device
  // manager is daily-js, which fetches Daily's call-machine bundle from c.daily.co first.
  transport: new SmallWebRTCTransport({ mediaManager: new WavMediaManager() }),
  enableMic: true,
  enableCam: false,
  callbacks: {
    onTrackStarted: (track, participant) => {
      if (participant?.local) return;
      const el = track.kind === "video" ? $("avatar") : $("voice");
      el.srcObject = new MediaStream([track]);
    },
    onBotReady: () => ($("status").textContent = "ready"),
    onUserTranscript: (t) => t.final && log("user", t.text),
    onBotOutput: (o) => log("bot", o.text),
    onError: (m) => log("error", m.data?.error ?? String(m)),
    onDisconnected: () => ($("status").textContent = "disconnected"),
  },
});

$("connect").onclick = async () => {
  $("status").textContent = "connecting";
  const token = query.get("token");
  await client.connect({
    webrtcRequestParams: {
      endpoint: `${server}/api/offer`,
      headers: new Headers(token ? { Authorization: `Bearer ${token}` } : {}),
      requestData: {
        ...(query.get("portrait_id") && { portrait_id: query.get("portrait_id") }),
        ...(query.get("persona") && { persona: query.get("persona") }),
      },
    },
  });
};
$("disconnect").onclick = () => client.disconnect();
$("ask").onsubmit = (e) => {
  e.preventDefault();
  const text = $("question").value.trim();
  if (text) client.sendText(text); // answered by voice and face, like a spoken question
  $("question").value = "";
};
// For the console (and the tests, which also build clients of their own with these).
window.avatar = { client, PipecatClient, SmallWebRTCTransport, WavMediaManager };
