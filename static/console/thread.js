// One thread: its messages (live), the reply being written, the composer with this thread's
// own draft, and the stop for this thread.

import { ApiError, get, query, write } from "./api.js";
import { checkConnection, onReconnect, openStream } from "./connection.js";
import { loadDraft, saveDraft } from "./drafts.js";
import { plain, rendered } from "./markdown.js";
import { markRead, showThreadActions } from "./inbox.js";
import { $, button, canSend, element, me, newKey, say, state, timeOf } from "./page.js";
import { rowList } from "./rows.js";
import { forgetTurns, trackTurn, turnChanged, turnState, whenRetried } from "./runstate.js";

const PAGE_SIZE = 50;

// Told when a thread was opened, to mark it in the list.
const listeners = { opened: () => {} };
export function onThreadEvents(handlers) {
  Object.assign(listeners, handlers);
}

let stream = null;
// Bumped on every thread switch, so an answer for a thread no longer open is ignored.
let generation = 0;
// A thread whose messages failed to load: loaded again when the connection returns.
let failedThread = null;
const drafts = new Map(); // turn id → the <li> of the reply being written

// RESULTs are rendered as markdown; turns people typed show as typed (docs/decisions.md).
const RENDERED_CLASSES = new Set(["RESULT"]);

function rawToggle(message, item) {
  const toggle = button("Raw", "link raw-toggle", "Show the raw text");
  toggle.setAttribute("aria-pressed", "false");
  toggle.addEventListener("click", () => {
    const raw = toggle.getAttribute("aria-pressed") !== "true";
    toggle.setAttribute("aria-pressed", String(raw));
    item.querySelector(".body").replaceWith(raw ? plain(message.body) : rendered(message.body));
  });
  return toggle;
}

function renderMessage(message) {
  const item = element("li", message.from_role === me ? "message mine" : "message");
  item.dataset.from = message.from_role;
  item.dataset.class = message.class ?? "";
  const meta = element("div", "meta", `${message.from_role} to ${message.to_role} · `);
  meta.append(timeOf(message.created_at));
  if (message.finish_reason === "length") meta.append(" · cut off");
  const markdown = RENDERED_CLASSES.has(message.class);
  if (markdown) meta.append(" · ", rawToggle(message, item));
  item.append(meta, markdown ? rendered(message.body) : plain(message.body));
  if (message.reply_state) item.append(element("div", "turn-state"));
  return item;
}

const messages = rowList($("messages"), $("messages-log"), renderMessage);

function showMessagesState() {
  say($("messages-state"), messages.size ? "" : "No messages yet. Write the first one below.");
}

function addMessage(message) {
  if (!messages.add(message)) return;
  trackTurn(message, messages.item(message.id));
  if (message.class === "RESULT" && message.in_reply_to !== null) {
    drafts.get(message.in_reply_to)?.remove();
    drafts.delete(message.in_reply_to);
    turnChanged(message.in_reply_to, { state: "answered" });
  }
  showMessagesState();
}

// The newest message shown in the open thread, read by its owner.
export function readNewest() {
  if (state.threadId !== null && messages.size) markRead(state.threadId, messages.newest);
}

// The reply so far (`reply.draft`: the whole text each time), shown after its turn until the
// RESULT itself arrives.
function showDraft(turnId, text) {
  const near = messages.near();
  let item = drafts.get(turnId);
  if (!item) {
    item = element("li", "message draft");
    item.dataset.draftFor = turnId;
    item.append(element("div", "meta", "assistant · writing…"), element("div", "body"));
    drafts.set(turnId, item);
    $("messages").append(item);
  }
  item.querySelector(".body").replaceWith(rendered(text));
  messages.followIfNear(near);
}

function receiveFrame(frame) {
  if (frame.type === "reply.state" && typeof frame.in_reply_to === "number") {
    turnChanged(frame.in_reply_to, frame);
    if (frame.state !== "working") {
      drafts.get(frame.in_reply_to)?.remove();
      drafts.delete(frame.in_reply_to);
    }
  } else if (frame.type === "reply.draft" && typeof frame.in_reply_to === "number") {
    if (["answered", "stopped", "failed"].includes(turnState(frame.in_reply_to))) return;
    showDraft(frame.in_reply_to, String(frame.text ?? ""));
  }
}

export function closeThread() {
  generation += 1;
  stream?.stop();
  stream = null;
  messages.clear();
  drafts.clear();
  forgetTurns();
  $("messages-older").hidden = true;
}

export async function openThread(id) {
  closeThread();
  const mine = generation;
  state.threadId = id;
  failedThread = null;
  listeners.opened(id);
  $("thread-title").textContent = state.threads.get(id)?.name ?? `Thread ${id}`;
  showThreadActions(id);
  const composer = $("composer-body");
  composer.disabled = !canSend;
  composer.value = loadDraft(id);
  $("send").disabled = !canSend;
  say($("composer-notice"), canSend ? "" : "Sending from the Console is turned off on this server.");
  say($("messages-state"), "Loading messages…");
  let rows;
  try {
    ({ messages: rows } = await get(query(`/api/chat/threads/${id}/messages`, { limit: PAGE_SIZE })));
  } catch (error) {
    if (mine !== generation) return;
    say($("messages-state"), error.message, "error");
    if (error.status === 0 || error.code === "unavailable") {
      failedThread = id;
      checkConnection();
    }
    return;
  }
  if (mine !== generation) return;
  rows.forEach(addMessage);
  $("messages-older").hidden = rows.length < PAGE_SIZE;
  showMessagesState();
  readNewest();
  stream = openStream({
    path: `/ws/chat/threads/${id}/`,
    type: "message",
    field: "message",
    rowsType: "messages",
    after: messages.newest,
    onRow: (row) => {
      addMessage(row);
      readNewest();
    },
    onFrame: receiveFrame,
    status: $("thread-status"),
  });
  // Records that the owner opened it (R2); refused harmlessly where writes are off.
  write(`/api/chat/threads/${id}/open`, {}).catch(() => {});
  if (canSend && !matchMedia("(max-width: 699px)").matches) composer.focus();
}

onReconnect(() => {
  if (failedThread !== null && failedThread === state.threadId) openThread(failedThread);
});

export async function loadOlderMessages() {
  const mine = generation;
  try {
    const path = query(`/api/chat/threads/${state.threadId}/messages`, { before: messages.oldest, limit: PAGE_SIZE });
    const { messages: rows } = await get(path);
    if (mine !== generation) return;
    messages.addOlder(rows);
    rows.forEach((row) => trackTurn(row, messages.item(row.id)));
    $("messages-older").hidden = rows.length < PAGE_SIZE;
  } catch (error) {
    say($("messages-state"), error.message, "error");
  }
}

// --- the composer ------------------------------------------------------------------------

// A send's key lives until the send is answered: pressing Send again after a failure
// repeats the same key, so the turn is stored once.
let pending = null;
let sending = false;

async function sendBody(body, threadId, key) {
  const answer = await write(`/api/chat/threads/${threadId}/messages`, { body }, key);
  // Shown at once; the thread's stream brings the same id later and it is not shown again.
  if (state.threadId === threadId) addMessage(answer.message);
  return answer;
}

export async function send() {
  const composer = $("composer-body");
  const body = composer.value;
  const threadId = state.threadId;
  if (!canSend || sending || threadId === null || !body.trim()) return;
  if (!pending || pending.body !== body || pending.threadId !== threadId) pending = { body, threadId, key: newKey() };
  sending = true;
  $("send").disabled = true;
  say($("composer-notice"), "Sending…");
  try {
    await sendBody(body, threadId, pending.key);
    pending = null;
    if (loadDraft(threadId) === body) saveDraft(threadId, "");
    if (state.threadId === threadId && composer.value === body) composer.value = "";
    say($("composer-notice"), "");
  } catch (error) {
    say($("composer-notice"), error.message, "error");
  } finally {
    sending = false;
    $("send").disabled = !canSend;
  }
}

// Retry: the same body again, as a new turn of the open thread.
whenRetried(async (body) => {
  if (!canSend || state.threadId === null) return;
  say($("composer-notice"), "Sending again…");
  try {
    await sendBody(body, state.threadId, newKey());
    say($("composer-notice"), "");
  } catch (error) {
    say($("composer-notice"), error.message, "error");
  }
});

export function keepDraft() {
  if (state.threadId !== null) saveDraft(state.threadId, $("composer-body").value);
}

export function composerKey(event) {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
}

// Stops the assistant in the open thread only (SPEC §7.1: stop takes a thread).
export async function stop() {
  const threadId = state.threadId;
  if (threadId === null) return;
  say($("composer-notice"), "Stopping…");
  try {
    await write("/api/chat/stop", { thread: threadId });
    say($("composer-notice"), "Stopped the assistant in this thread.");
  } catch (error) {
    if (error instanceof ApiError && error.code === "not-held") {
      say($("composer-notice"), "Nothing to stop: the assistant is not working on this thread.");
    } else {
      say($("composer-notice"), error.message, "error");
    }
  }
}
