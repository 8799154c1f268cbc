// The Mosaic bus Console: projects, the actor's own threads, one thread's messages, the
// composer, the stop, and the live trail. One page, no framework, no build step.
//
// Live rows arrive over two WebSockets: the trail, and the open thread's messages. The
// database is the record: each stream remembers the last id it took, drops any frame at or
// below it (never a row twice), and on reconnect asks for the rows after it (none missed).

const PAGE_SIZE = 50;
const BACKOFF_FIRST_MS = 500;
const BACKOFF_MOST_MS = 10_000;
const RETRY_ATTEMPTS = 3;
const SEARCH_DELAY_MS = 250;
const NEAR_BOTTOM_PX = 48;

const page = document.body.dataset;
const listener = page.listener === "tester" ? "tester" : "human";
// MOSAIC_CONSOLE_SEND, the human Console's switch (L2); the tester's page does not carry it.
const sendEnabled = page.sendEnabled === "true";
// The tester's composer is always enabled (SPEC §8); the human's follows its switch.
const canSend = listener === "tester" || sendEnabled;
// The actor's own address on the bus: its turns are "mine".
const me = listener;

const $ = (id) => document.getElementById(id);

const state = {
  projectId: null,
  threads: new Map(),
  threadId: null,
  threadStream: null,
  trailStream: null,
  // Bumped on every thread switch, so an answer for a thread no longer open is ignored.
  generation: 0,
  signedOut: false,
};

// --- small helpers ---------------------------------------------------------------------

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function say(node, text, kind = "info") {
  node.textContent = text;
  node.dataset.kind = kind;
}

function alertError(error) {
  say($("alert"), error.message, "error");
}

function timeOf(iso) {
  const at = new Date(iso);
  const time = element("time", "", at.toLocaleTimeString());
  time.dateTime = iso;
  time.title = at.toLocaleString();
  return time;
}

function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  // randomUUID needs a secure context; a key is any 1–200 visible ASCII characters.
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

function cookie(name) {
  const pair = document.cookie.split("; ").find((item) => item.startsWith(`${name}=`));
  return pair ? decodeURIComponent(pair.slice(name.length + 1)) : "";
}

// --- the HTTP API ------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail);
    this.status = status;
    this.code = code;
  }
}

async function request(method, path, body, key) {
  const headers = { Accept: "application/json" };
  const init = { method, headers, credentials: "same-origin" };
  if (method !== "GET") {
    // Origin and Sec-Fetch-Site are the browser's own; the CSRF token is the human's (L2).
    headers["Content-Type"] = "application/json";
    if (listener === "human") headers["X-CSRFToken"] = cookie("csrftoken");
    if (key) headers["Idempotency-Key"] = key;
    init.body = JSON.stringify(body ?? {});
  }
  let answer;
  try {
    answer = await fetch(path, init);
  } catch {
    throw new ApiError(0, "unavailable", "The server did not answer. Check the connection and try again.");
  }
  const data = await answer.json().catch(() => ({}));
  if (answer.ok) return data;
  if (answer.status === 401) signedOut();
  throw new ApiError(answer.status, data.error ?? "error", data.detail ?? `The server answered ${answer.status}.`);
}

const get = (path) => request("GET", path);

// Every write carries an Idempotency-Key (R21). A write that got no answer is retried with
// the same key and body, so the server stores it once however often it arrives.
async function write(path, body, key = newKey()) {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await request("POST", path, body, key);
    } catch (error) {
      const retriable = error.status === 0 || error.code === "unavailable";
      if (!retriable || attempt >= RETRY_ATTEMPTS) throw error;
      await sleep(BACKOFF_FIRST_MS * 2 ** attempt);
    }
  }
}

function query(path, params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") search.set(name, value);
  }
  const text = search.toString();
  return text ? `${path}?${text}` : path;
}

// --- lists of rows, in id order, each id once --------------------------------------------

function rowList(list, render) {
  const shown = new Map();
  const follow = () => list.scrollHeight - list.scrollTop - list.clientHeight < NEAR_BOTTOM_PX;
  return {
    get size() { return shown.size; },
    get oldest() { return shown.size ? Math.min(...shown.keys()) : null; },
    get newest() { return shown.size ? Math.max(...shown.keys()) : 0; },
    clear() { shown.clear(); list.replaceChildren(); },
    // Adds a row unless its id is already shown; rows arrive mostly in order, so the
    // place is found walking back from the end.
    add(row) {
      if (shown.has(row.id)) return false;
      const atBottom = follow();
      const item = render(row);
      item.dataset.id = row.id;
      let next = null;
      for (let node = list.lastElementChild; node && Number(node.dataset.id) > row.id; node = node.previousElementSibling) {
        next = node;
      }
      list.insertBefore(item, next);
      shown.set(row.id, item);
      if (atBottom && !next) list.scrollTop = list.scrollHeight;
      return true;
    },
    // Older rows go on top; the reader's place stays where it was.
    addOlder(rows) {
      const before = list.scrollHeight;
      rows.forEach((row) => this.add(row));
      list.scrollTop += list.scrollHeight - before;
    },
  };
}

function renderMessage(message) {
  const item = element("li", message.from_role === me ? "message mine" : "message");
  item.dataset.from = message.from_role;
  const meta = element("div", "meta", `${message.from_role} to ${message.to_role} · `);
  meta.append(timeOf(message.created_at));
  item.append(meta, element("p", "body", message.body));
  return item;
}

function renderTrailRow(row) {
  const byTester = [row.from_role, row.to_role, row.actor?.role].includes("tester");
  const item = element("li", byTester ? "trail-row by-tester" : "trail-row");
  const meta = element("div", "meta", `${row.actor?.role ?? "?"} · ${row.actor?.run ?? "?"} · `);
  meta.append(timeOf(row.at));
  item.append(element("span", "trail-text", row.text), meta);
  return item;
}

const messages = rowList($("messages"), renderMessage);
const trail = rowList($("trail"), renderTrailRow);

// --- live streams ------------------------------------------------------------------------

const CLOSED_FOR_GOOD = {
  4400: "closed: refused",
  4403: "closed: not allowed",
  4404: "closed: not found",
};

function showStatus(node, kind, text) {
  node.dataset.state = kind;
  node.textContent = text;
}

// One live stream: frames of `type` carry a row under `field`, and frames of `rowsType` the
// rows of one read under `rows` (asked for with `batch=1`). Renders each row whose id is beyond
// the last one taken, and reconnects after that id with back-off until stopped.
function openStream({ path, type, field, rowsType, after, onRow, status }) {
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
      stopped = true;
      showStatus(status, "closed", "signed out");
      signedOut();
      return;
    }
    if (CLOSED_FOR_GOOD[code]) {
      stopped = true;
      showStatus(status, "closed", CLOSED_FOR_GOOD[code]);
      return;
    }
    // 0.5 s doubling to 10 s, each wait jittered between half and all of it.
    const ceiling = Math.min(BACKOFF_MOST_MS, BACKOFF_FIRST_MS * 2 ** failures);
    failures += 1;
    showStatus(status, "reconnecting", "reconnecting…");
    timer = setTimeout(connect, ceiling / 2 + (Math.random() * ceiling) / 2);
  }

  connect();
  return {
    get last() { return last; },
    // Back online: a stream waiting out its back-off tries at once.
    wake() {
      if (!stopped && timer !== null) {
        clearTimeout(timer);
        connect();
      }
    },
    // A stream that ended by itself (signed out, refused) keeps saying why.
    stop() {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      socket?.close(1000);
      showStatus(status, "", "");
    },
  };
}

window.addEventListener("online", () => {
  state.trailStream?.wake();
  state.threadStream?.wake();
});

function signedOut() {
  if (listener !== "human" || state.signedOut) return;
  state.signedOut = true;
  state.trailStream?.stop();
  state.threadStream?.stop();
  $("console").hidden = true;
  $("sign-out").hidden = true;
  $("signed-out").hidden = false;
  $("sign-in-link").focus();
}

// --- projects ----------------------------------------------------------------------------

function showProjects(projects) {
  const list = $("projects");
  list.replaceChildren();
  for (const project of projects) {
    const button = element("button", "", project.name);
    button.type = "button";
    button.dataset.id = project.id;
    button.addEventListener("click", () => chooseProject(project.id));
    const item = element("li");
    item.append(button);
    list.append(item);
  }
  say($("projects-state"), projects.length ? "" : "No projects yet. Create one below.");
  markCurrent(list, state.projectId);
}

function markCurrent(list, id) {
  for (const button of list.querySelectorAll("button")) {
    button.setAttribute("aria-current", String(Number(button.dataset.id) === id));
  }
}

async function loadProjects() {
  try {
    const { projects } = await get(query("/api/chat/projects", { limit: 500 }));
    showProjects(projects);
    return projects;
  } catch (error) {
    say($("projects-state"), error.message, "error");
    return [];
  }
}

async function createProject(event) {
  event.preventDefault();
  const input = $("project-name");
  say($("project-notice"), "Creating…");
  try {
    const { project } = await write("/api/chat/projects", { name: input.value });
    input.value = "";
    say($("project-notice"), "");
    await loadProjects();
    chooseProject(project.id);
  } catch (error) {
    say($("project-notice"), error.message, "error");
  }
}

function chooseProject(id) {
  state.projectId = id;
  markCurrent($("projects"), id);
  $("thread-name").disabled = false;
  $("thread-create").disabled = false;
  remember();
  return loadThreads();
}

// --- threads -----------------------------------------------------------------------------

function threadItem(thread) {
  const button = element("button", "", thread.name);
  button.type = "button";
  button.dataset.id = thread.id;
  button.addEventListener("click", () => openThread(thread.id));
  const item = element("li");
  item.append(button);
  return item;
}

// The list shows the newest first; `older` pages append below.
function showThreads(threads, { older = false } = {}) {
  const list = $("threads");
  if (!older) list.replaceChildren();
  for (const thread of [...threads].reverse()) {
    state.threads.set(thread.id, thread);
    list.append(threadItem(thread));
  }
  $("threads-older").hidden = threads.length < PAGE_SIZE;
  const empty = list.childElementCount === 0;
  const searching = $("thread-search").value.trim() !== "";
  say($("threads-state"), !empty ? "" : searching ? "No thread matches." : "No threads here yet. Create one below.");
  markCurrent(list, state.threadId);
}

function threadsQuery(extra = {}) {
  return query("/api/chat/threads", {
    project: state.projectId,
    q: $("thread-search").value.trim(),
    limit: PAGE_SIZE,
    ...extra,
  });
}

async function loadThreads() {
  if (state.projectId === null) return;
  const asked = threadsQuery();
  say($("threads-state"), "Loading threads…");
  try {
    const { threads } = await get(asked);
    if (asked === threadsQuery()) showThreads(threads);
  } catch (error) {
    say($("threads-state"), error.message, "error");
  }
}

async function loadOlderThreads() {
  const shown = [...$("threads").querySelectorAll("button")].map((button) => Number(button.dataset.id));
  if (!shown.length) return;
  try {
    const { threads } = await get(threadsQuery({ before: Math.min(...shown) }));
    showThreads(threads, { older: true });
  } catch (error) {
    say($("threads-state"), error.message, "error");
  }
}

let searchTimer = null;
function searchThreads() {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(loadThreads, SEARCH_DELAY_MS);
}

async function createThread(event) {
  event.preventDefault();
  const input = $("thread-name");
  say($("thread-notice"), "Creating…");
  try {
    const { thread } = await write("/api/chat/threads", { project: state.projectId, name: input.value });
    input.value = "";
    say($("thread-notice"), "");
    $("thread-search").value = "";
    await loadThreads();
    openThread(thread.id);
  } catch (error) {
    say($("thread-notice"), error.message, "error");
  }
}

// --- one thread: messages, composer, stop ------------------------------------------------

function closeThread() {
  state.generation += 1;
  state.threadStream?.stop();
  state.threadStream = null;
  messages.clear();
  $("messages-older").hidden = true;
}

async function openThread(id) {
  closeThread();
  const generation = state.generation;
  state.threadId = id;
  remember();
  markCurrent($("threads"), id);
  $("thread-title").textContent = state.threads.get(id)?.name ?? `Thread ${id}`;
  $("composer-body").disabled = !canSend;
  $("send").disabled = !canSend;
  say($("composer-notice"), canSend ? "" : "Sending from the Console is turned off on this server.");
  say($("messages-state"), "Loading messages…");
  let rows;
  try {
    ({ messages: rows } = await get(query(`/api/chat/threads/${id}/messages`, { limit: PAGE_SIZE })));
  } catch (error) {
    if (generation === state.generation) say($("messages-state"), error.message, "error");
    return;
  }
  if (generation !== state.generation) return;
  rows.forEach((row) => messages.add(row));
  $("messages-older").hidden = rows.length < PAGE_SIZE;
  showMessagesState();
  state.threadStream = openStream({
    path: `/ws/chat/threads/${id}/`,
    type: "message",
    field: "message",
    rowsType: "messages",
    after: messages.newest,
    onRow: (row) => {
      messages.add(row);
      showMessagesState();
    },
    status: $("thread-status"),
  });
  // Records that the owner opened it (R2); refused harmlessly where writes are off.
  write(`/api/chat/threads/${id}/open`, {}).catch(() => {});
  if (canSend) $("composer-body").focus();
}

function showMessagesState() {
  say($("messages-state"), messages.size ? "" : "No messages yet. Write the first one below.");
}

async function loadOlderMessages() {
  const generation = state.generation;
  try {
    const path = query(`/api/chat/threads/${state.threadId}/messages`, { before: messages.oldest, limit: PAGE_SIZE });
    const { messages: rows } = await get(path);
    if (generation !== state.generation) return;
    messages.addOlder(rows);
    $("messages-older").hidden = rows.length < PAGE_SIZE;
  } catch (error) {
    say($("messages-state"), error.message, "error");
  }
}

// A send's key lives until the send is answered: pressing Send again after a failure
// repeats the same key, so the turn is stored once.
let draft = null;
let sending = false;

async function send() {
  const body = $("composer-body").value;
  const threadId = state.threadId;
  if (!canSend || sending || threadId === null || !body.trim()) return;
  if (!draft || draft.body !== body || draft.threadId !== threadId) draft = { body, threadId, key: newKey() };
  sending = true;
  $("send").disabled = true;
  say($("composer-notice"), "Sending…");
  try {
    const answer = await write(`/api/chat/threads/${threadId}/messages`, { body }, draft.key);
    draft = null;
    if ($("composer-body").value === body) $("composer-body").value = "";
    say($("composer-notice"), "");
    // Shown at once; the thread's stream brings the same id later and it is not shown again.
    if (state.threadId === threadId) {
      messages.add(answer.message);
      showMessagesState();
    }
  } catch (error) {
    say($("composer-notice"), error.message, "error");
  } finally {
    sending = false;
    $("send").disabled = !canSend;
  }
}

function composerKey(event) {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
}

async function stop() {
  say($("composer-notice"), "Stopping…");
  try {
    const { stopped } = await write("/api/chat/stop", {});
    const runs = stopped.length === 1 ? "1 run" : `${stopped.length} runs`;
    say($("composer-notice"), `Stopped ${runs} of the assistant.`);
  } catch (error) {
    if (error.code === "not-held") {
      say($("composer-notice"), "Nothing to stop: the assistant is not working on any of your threads.");
    } else {
      say($("composer-notice"), error.message, "error");
    }
  }
}

// --- the trail ---------------------------------------------------------------------------

async function startTrail() {
  let rows;
  try {
    ({ rows } = await get(query("/api/trail", { limit: PAGE_SIZE })));
  } catch (error) {
    say($("trail-state"), error.message, "error");
    return;
  }
  rows.forEach((row) => trail.add(row));
  $("trail-older").hidden = rows.length < PAGE_SIZE;
  showTrailState();
  state.trailStream = openStream({
    path: "/ws/trail/",
    type: "trail.row",
    field: "row",
    rowsType: "trail.rows",
    after: trail.newest,
    onRow: (row) => {
      trail.add(row);
      showTrailState();
    },
    status: $("trail-status"),
  });
}

function showTrailState() {
  say($("trail-state"), trail.size ? "" : "Nothing on the bus yet.");
}

async function loadOlderTrail() {
  try {
    const { rows } = await get(query("/api/trail", { before: trail.oldest, limit: PAGE_SIZE }));
    trail.addOlder(rows);
    $("trail-older").hidden = rows.length < PAGE_SIZE;
  } catch (error) {
    say($("trail-state"), error.message, "error");
  }
}

// --- signing out, where we are, start-up -------------------------------------------------

async function signOut() {
  try {
    await write("/api/auth/logout", {});
  } catch (error) {
    alertError(error);
    return;
  }
  location.assign("/signin");
}

// The open project and thread live in the address (#project=1&thread=5), so a reload or a
// shared link comes back to the same place.
function remember() {
  const place = query("", { project: state.projectId, thread: state.threadId }).replace(/^\?/, "");
  history.replaceState(null, "", place ? `#${place}` : location.pathname);
}

function recalled() {
  const params = new URLSearchParams(location.hash.slice(1));
  const id = (name) => (/^[0-9]{1,15}$/.test(params.get(name) ?? "") ? Number(params.get(name)) : null);
  return { project: id("project"), thread: id("thread") };
}

function wire() {
  $("project-form").addEventListener("submit", createProject);
  $("thread-form").addEventListener("submit", createThread);
  $("thread-search").addEventListener("input", searchThreads);
  $("threads-older").addEventListener("click", loadOlderThreads);
  $("messages-older").addEventListener("click", loadOlderMessages);
  $("trail-older").addEventListener("click", loadOlderTrail);
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  $("composer-body").addEventListener("keydown", composerKey);
  $("stop").addEventListener("click", stop);
  $("sign-out")?.addEventListener("click", signOut);
}

async function start() {
  wire();
  const place = recalled();
  const projects = await loadProjects();
  if (state.signedOut) return;
  startTrail();
  const project = projects.find((p) => p.id === place.project) ?? projects[projects.length - 1];
  if (!project) return;
  await chooseProject(project.id);
  if (place.thread !== null && project.id === place.project && state.threads.has(place.thread)) {
    openThread(place.thread);
  }
}

start();
