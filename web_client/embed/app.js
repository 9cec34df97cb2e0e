// The agent in a web app through Pipecat's JS client SDK: the SmallWebRTC transport carries
// the microphone up and the avatar's voice and face down; RTVI messages carry the rest. The
// agent's tools run here, in the app (the server never holds the customer's credentials): demo
// handlers for the bank example's tools (engines/tools/examples/bank.toml).
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
    onBotReady: async () => {
      // The names this customer may say, so the agent hears them as spelled: the reply says
      // how many it took, and whether its speech recognition can use them.
      try {
        window.avatar.vocabulary = await client.sendClientRequest("vocabulary", { words: PAYEES });
      } catch (e) {
        log("error", `vocabulary refused: ${e?.data?.error ?? e}`);
      }
      $("status").textContent = "ready";
    },
    onUserTranscript: (t) => t.final && log("user", t.text),
    onBotOutput: (o) => log("bot", o.text),
    onError: (m) => log("error", m.data?.error ?? String(m)),
    onDisconnected: () => ($("status").textContent = "disconnected"),
  },
});

// Made-up data: a real app would call its own back end with the signed-in customer's session.
const PAYMENTS = [
  { date: "2026-12-05", shop: "Tesco", amount_pounds: 23.4 },
  { date: "2026-12-04", shop: "Pret A Manger", amount_pounds: 6.85 },
  { date: "2026-12-03", shop: "Trainline", amount_pounds: 42.1 },
  { date: "2026-12-01", shop: "Boots", amount_pounds: 12.99 },
  { date: "2026-11-29", shop: "Amazon", amount_pounds: 31.5 },
];
// The customer's saved payees (transfer_money sends only to these).
const PAYEES = ["Priya Shah", "David Okafor", "Jamie Clark", "Emma Wilson"];
let transfers = 0;
const BANK = {
  recent_payments: ({ count = 3 }) => ({ payments: PAYMENTS.slice(0, count) }),
  account_balance: () => ({ balance_pounds: 1234.56, currency: "GBP" }),
  freeze_card: ({ card_last4 }) => ({ frozen: true, card_last4 }),
  transfer_money: ({ payee, amount }) => ({
    sent: true, payee, amount_pounds: amount, reference: `DEMO-${++transfers}` }),
  book_appointment: ({ branch, day, time = "10:00" }) => ({ booked: true, branch, day, time }),
};
// What the handlers were asked to run, in order (for the console and the tests).
const toolCalls = [];
const logCall = (name, args, result) => {
  const li = Object.assign(document.createElement("li"), { className: "tool" });
  const part = (tag, text) => Object.assign(document.createElement(tag), { textContent: text });
  li.append(part("b", name.replaceAll("_", " ")), " ", part("code", JSON.stringify(args)),
    " → ", part("code", JSON.stringify(result)));
  $("log").append(li);
};
for (const [name, run] of Object.entries(BANK)) {
  // The SDK answers `llm-function-call-in-progress` for `name` with what this returns.
  client.registerFunctionCallHandler(name, async ({ functionName, arguments: args }) => {
    toolCalls.push({ name: functionName, arguments: args });
    const result = run(args);
    logCall(functionName, args, result);
    return result;
  });
}

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
window.avatar = { client, PipecatClient, SmallWebRTCTransport, WavMediaManager, toolCalls };
