// Staying connected: live streams over WebSockets that reconnect with back-off after their
// last id, one page-level offline banner, and a check of the session whenever a connection
// fails — a refused handshake looks like any other failure, so the page asks the API, and a
// `not-authenticated` answer shows the signed-out card at once.
//
// The database is the record: each stream remembers the last id it took, drops any frame at or
// below it (never a row twice), and on reconnect asks for the rows after it (none missed).

import { get, isSignedOutAnswer, whenSignedOut } from "./api.js";
import { $, listener, say, state } from "./page.js";

const BACKOFF_FIRST_MS = 500;
const BACKOFF_MOST_MS = 10_000;
// How often the page asks the server whether it is back, while it is not: at most this long,
// so a server that returns without the session shows the signed-out card within seconds.
const PROBE_FIRST_MS = 500;
const PROBE_MOST_MS = 2_000;
// A cheap read every actor may make; its answer says both "reachable" and "signed in".
const PROBE_PATH = "/api/chat/projects?limit=1";

const CLOSED_FOR_GOOD = {
  4400: "closed: refused",
  4403: "closed: not allowed",
  4404: "closed: not found",
};

const streams = new Set();
const whenBack = new Set();
let probing = null;
let signedOutHandlers = [];

// --- offline banner and the probe ----------------------------------------------------------

function showOffline(offline) {
  $("offline").hidden = !offline;
}

// Runs `callback` each time the connection returns after a failure (a thread that failed to
// load loads again).
export function onReconnect(callback) {
  whenBack.add(callback);
}

// Asks the server until it answers; then wakes every stream and tells the parts that wait.
// One probe at a time, however many parts failed.
export function checkConnection() {
  if (probing || state.signedOut) return probing;
  probing = (async () => {
    showOffline(true);
    for (let wait = PROBE_FIRST_MS; !state.signedOut; wait = Math.min(PROBE_MOST_MS, wait * 2)) {
      try {
        await get(PROBE_PATH);
        break;
      } catch (error) {
        if (isSignedOutAnswer(error)) return; // `get` told the page already
        if (error.status !== 0 && error.status < 500) break; // it answered: it is back
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
    showOffline(false);
    if (state.signedOut) return;
    streams.forEach((stream) => stream.wake());
    whenBack.forEach((callback) => callback());
  })().finally(() => {
    probing = null;
  });
  return probing;
}

window.addEventListener("online", () => checkConnection());
window.addEventListener("offline", () => checkConnection());

// --- signing out -----------------------------------------------------------------------------

export function onSignedOut(callback) {
  signedOutHandlers.push(callback);
}

function signedOut() {
  if (listener !== "human" || state.signedOut) return;
  state.signedOut = true;
  streams.forEach((stream) => stream.end("signed out"));
  showOffline(false);
  signedOutHandlers.forEach((callback) => callback());
  $("console").hidden = true;
  $("sign-out").hidden = true;
  $("signed-out").hidden = false;
  $("sign-in-link").focus();
}

whenSignedOut(signedOut);

// --- streams ---------------------------------------------------------------------------------

function showStatus(node, kind, text) {
  node.dataset.state = kind;
  node.textContent = text;
}

// One live stream: frames of `type` carry a row under `field`, and frames of `rowsType` the
// rows of one read under `rows` (asked for with `batch=1`); other frames go to `onFrame`.
// Renders each row whose id is beyond the last one taken, and reconnects after that id with
// back-off until stopped.
export function openStream({ path, type, field, rowsType, after, onRow, onFrame = () => {}, status }) {
  let last = after;
  let socket = null;
  let timer = null;
  let failures = 0;
  let stopped = false;

  const url = () => {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    return `${scheme}://${location.host}${path}?after=${last}&batch=1`;
  };

  function connect() {
    timer = null;
    if (failures === 0) showStatus(status, "connecting", "connecting…");
    socket = new WebSocket(url());
    socket.onopen = () => {
      failures = 0;
      showStatus(status, "live", "live");
    };
    socket.onmessage = (event) => receive(event.data);
    socket.onclose = (event) => closed(event.code);
  }

  function receive(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    if (frame.type === "error") {
      say($("alert"), frame.detail ?? frame.error, "error");
      return;
    }
    let rows = [];
    if (frame.type === type) rows = [frame[field]];
    else if (frame.type === rowsType && Array.isArray(frame.rows)) rows = frame.rows;
    else {
      onFrame(frame);
      return;
    }
    for (const row of rows) {
      if (!row || typeof row.id !== "number" || row.id <= last) continue;
      last = row.id;
      onRow(row);
    }
  }

  function closed(code) {
    socket = null;
    if (stopped) return;
    if (code === 4401) {
      signedOut();
      return;
    }
    if (CLOSED_FOR_GOOD[code]) {
      stream.end(CLOSED_FOR_GOOD[code]);
      return;
    }
    // 0.5 s doubling to 10 s, each wait jittered between half and all of it.
    const ceiling = Math.min(BACKOFF_MOST_MS, BACKOFF_FIRST_MS * 2 ** failures);
    failures += 1;
    showStatus(status, "reconnecting", "reconnecting…");
    timer = setTimeout(connect, ceiling / 2 + (Math.random() * ceiling) / 2);
    // A refused handshake (a session gone with the restart) closes like a dropped line:
    // the probe tells them apart.
    checkConnection();
  }

  const stream = {
    get last() { return last; },
    // Back online: a stream waiting out its back-off tries at once.
    wake() {
      if (!stopped && timer !== null) {
        clearTimeout(timer);
        connect();
      }
    },
    // Ended by itself (signed out, refused): it keeps saying why.
    end(why) {
      stopped = true;
      streams.delete(stream);
      clearTimeout(timer);
      socket?.close(1000);
      showStatus(status, "closed", why);
    },
    stop() {
      if (stopped) return;
      stream.end("");
      showStatus(status, "", "");
    },
  };
  streams.add(stream);
  connect();
  return stream;
}
