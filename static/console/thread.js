// One thread: its messages (live), the reply being written, the composer with this thread's
// own draft, and the stop for this thread.

import { ApiError, get, query, write } from "./api.js";
import { checkConnection, onReconnect, openStream } from "./connection.js";
import { loadDraft, saveDraft } from "./drafts.js";
import { copyButton, plain, rendered } from "./markdown.js";
import { replyDetails, showThreadUsage } from "./details.js";
import { markRead, showThreadActions } from "./inbox.js";
import { $, button, canSend, element, me, newKey, say, state, timeOf, writerOf } from "./page.js";
import { rowList } from "./rows.js";
import { forgetTurns, trackTurn, turnChanged, turnState } from "./runstate.js";
import { arrived, showNewest } from "./follow.js";
import { forgetSteps, noteMessage, showStep } from "./steps.js";
import { showPartial } from "./stopped.js";
import { showThreadBadge, showUnavailable } from "./threadstate.js";
import { CONTINUE, forgetCarried, showCarried } from "./branches.js";
import { forgetVersions, noteVersion, onVersionEvents } from "./versions.js";

const PAGE_SIZE = 50;

// Told when a thread was opened, to mark it in the list; `start(body)` makes the thread a send
// with no thread open goes to, opens it, and answers its id (set by the page).
const listeners = { opened: () => {}, start: async () => null };
export function onThreadEvents(handlers) {
  Object.assign(listeners, handlers);
}

let stream = null;
// Bumped on every thread switch, so an answer for a thread no longer open is ignored.
let generation = 0;
// A thread whose messages failed to load: loaded again when the connection returns.
let failedThread = null;
const drafts = new Map(); // turn id → the <li> of the reply being written
// Turn id → the text its draft last showed: the reply that lands with that text brings nothing
// new, whether its draft is still shown or was taken away first (its `reply.state`).
const draftTexts = new Map();

// RESULTs are rendered as markdown; turns people typed show as typed
// (docs/decisions/console-markdown.md).
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
  item.dataset.to = message.to_role;
  item.dataset.class = message.class ?? "";
  const meta = element("div", "meta");
  meta.append(element("span", "writer", writerOf(message)), " · ", timeOf(message.created_at));
  if (message.finish_reason === "length") meta.append(" · cut off");
  const markdown = RENDERED_CLASSES.has(message.class);
  // The whole answer as written (its markdown), whichever way it is shown.
  if (markdown) {
    const copy = copyButton(() => message.body, "Copy the whole answer", "link copy-answer");
    meta.append(" · ", rawToggle(message, item), " · ", copy);
  }
  item.append(meta, markdown ? rendered(message.body) : plain(message.body));
  if (message.class === "RESULT") {
    const { toggle, list } = replyDetails(message);
    meta.append(" · ", toggle);
    item.append(list);
  }
  if (message.reply_state) item.append(element("div", "turn-state"));
  return item;
}

const messages = rowList($("messages"), $("messages-log"), renderMessage);

function showMessagesState() {
  // A branch with none of its own yet shows what it carries (branches.js).
  const none = $("carried").hidden ? "No messages yet. Write the first one below." : CONTINUE;
  say($("messages-state"), messages.size ? "" : none);
}

function addMessage(message) {
  if (!messages.add(message)) return;
  noteVersion(message, messages.item(message.id));
  trackTurn(message, messages.item(message.id));
  noteMessage(message, messages.item(message.id));
  if (message.partial) showPartial(messages.item(message.id), message.id, message.partial);
  // A reply that takes the place of its draft as it was last shown is nothing new.
  if (draftTexts.get(message.in_reply_to) !== message.body) arrived(messages.item(message.id));
  if (message.class === "RESULT" && message.in_reply_to !== null) {
    drafts.get(message.in_reply_to)?.remove();
    drafts.delete(message.in_reply_to);
    draftTexts.delete(message.in_reply_to);
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
    // The instance the turn went to: the thread's own, or one it consulted (R23).
    const writer = messages.item(turnId)?.dataset.to ?? "assistant";
    item.append(element("div", "meta", `${writer} · writing…`), element("div", "body"));
    drafts.set(turnId, item);
    $("messages").append(item);
  }
  const grew = draftTexts.get(turnId) !== text;
  draftTexts.set(turnId, text);
  item.querySelector(".body").replaceWith(rendered(text));
  messages.followIfNear(near);
  if (grew) arrived(item);
}

function receiveFrame(frame) {
  if (frame.type === "reply.state" && typeof frame.in_reply_to === "number") {
    turnChanged(frame.in_reply_to, frame);
    // A stopped reply keeps what it had written, in place of its draft (SPEC §7.1).
    if (frame.state === "stopped" && frame.partial) {
      showPartial(messages.item(frame.in_reply_to), frame.in_reply_to, String(frame.partial));
    }
    if (frame.state !== "working") {
      drafts.get(frame.in_reply_to)?.remove();
      drafts.delete(frame.in_reply_to);
    }
  } else if (frame.type === "reply.draft" && typeof frame.in_reply_to === "number") {
    if (["answered", "stopped", "failed"].includes(turnState(frame.in_reply_to))) return;
    showDraft(frame.in_reply_to, String(frame.text ?? ""));
  } else if (frame.type === "reply.step" && typeof frame.in_reply_to === "number" && frame.step) {
    showStep(frame.in_reply_to, frame.step);
  }
}

export function closeThread() {
  generation += 1;
  stream?.stop();
  stream = null;
  messages.clear();
  drafts.clear();
  draftTexts.clear();
  forgetTurns();
  forgetSteps();
  forgetVersions();
  forgetCarried();
  showThreadBadge(null);
  showThreadUsage(null);
  $("messages-older").hidden = true;
  $("thread-export").hidden = true;
  $("thread-export").open = false;
  say($("actions-notice"), "");
}

// The draft of a chat not started yet (no thread open) is kept under this key.
const NEW_CHAT = "new";

// No thread open: the composer is ready, and its first send starts a thread.
export function showBlank() {
  closeThread();
  state.threadId = null;
  $("thread-title").textContent = "New chat";
  $("thread-actions").hidden = true;
  $("rename-form").hidden = true;
  const composer = $("composer-body");
  composer.disabled = !canSend;
  composer.value = loadDraft(NEW_CHAT);
  $("send").disabled = !canSend;
  say($("composer-notice"), canSend ? "" : "Sending from the Console is turned off on this server.");
  say($("messages-state"), canSend ? "Type below to start a new chat, or open a thread." : "Open a thread to read it.");
}

// `around`: a message of the thread to load with the messages around it (older and newer,
// a page each; the stream brings the rest), in place of the newest page.
export async function openThread(id, { around = null } = {}) {
  closeThread();
  const mine = generation;
  state.threadId = id;
  failedThread = null;
  listeners.opened(id);
  $("thread-title").textContent = state.threads.get(id)?.name ?? `Thread ${id}`;
  showThreadActions(id);
  showThreadBadge(state.threads.get(id));
  $("thread-export").hidden = false;
  const composer = $("composer-body");
  composer.disabled = !canSend;
  composer.value = loadDraft(id);
  $("send").disabled = !canSend;
  say($("composer-notice"), canSend ? "" : "Sending from the Console is turned off on this server.");
  say($("messages-state"), "Loading messages…");
  // A branch with none of its own messages says so under what it carries, once that is shown.
  showCarried(id, () => {
    if (mine === generation && $("messages-state").dataset.kind !== "error") showMessagesState();
  });
  let rows;
  let newer = [];
  const path = `/api/chat/threads/${id}/messages`;
  try {
    const cursor = around === null ? {} : { before: around + 1 };
    ({ messages: rows } = await get(query(path, { ...cursor, limit: PAGE_SIZE })));
    if (around !== null) ({ messages: newer } = await get(query(path, { after: around, limit: PAGE_SIZE })));
  } catch (error) {
    if (mine !== generation) return;
    if (showUnavailable(error.code)) return;
    say($("messages-state"), error.message, "error");
    if (error.status === 0 || error.code === "unavailable") {
      failedThread = id;
      checkConnection();
    }
    return;
  }
  if (mine !== generation) return;
  rows.forEach(addMessage);
  newer.forEach(addMessage);
  $("messages-older").hidden = rows.length < PAGE_SIZE;
  showMessagesState();
  readNewest();
  showThreadUsage(id);
  stream = openStream({
    path: `/ws/chat/threads/${id}/`,
    type: "message",
    field: "message",
    rowsType: "messages",
    after: messages.newest,
    onRow: (row) => {
      addMessage(row);
      readNewest();
      if (row.class === "RESULT") showThreadUsage(id);
    },
    onFrame: receiveFrame,
    status: $("thread-status"),
  });
  // Records that the owner opened it (R2); refused harmlessly where writes are off.
  write(`/api/chat/threads/${id}/open`, {}).catch(() => {});
  if (canSend && !matchMedia("(max-width: 699px)").matches && !typingElsewhere()) composer.focus();
}

// The reader typing in another field while the thread loaded (the search box, say): the
// focus stays there, or the rest of what is typed would land in the composer.
function typingElsewhere() {
  const active = document.activeElement;
  return active !== $("composer-body") && Boolean(active?.matches("input, textarea, [contenteditable]"));
}

onReconnect(() => {
  // An error said beside a control is over once the server is back.
  for (const notice of document.querySelectorAll(".notice[data-kind=error]")) say(notice, "");
  if (failedThread !== null && failedThread === state.threadId) openThread(failedThread);
});

export async function loadOlderMessages() {
  const mine = generation;
  try {
    const path = query(`/api/chat/threads/${state.threadId}/messages`, { before: messages.oldest, limit: PAGE_SIZE });
    const { messages: rows } = await get(path);
    if (mine !== generation) return;
    messages.addOlder(rows);
    for (const row of rows) {
      noteVersion(row, messages.item(row.id));
      trackTurn(row, messages.item(row.id));
      noteMessage(row, messages.item(row.id));
    }
    $("messages-older").hidden = rows.length < PAGE_SIZE;
  } catch (error) {
    say($("messages-state"), error.message, "error");
  }
}

// --- the composer ------------------------------------------------------------------------

// A send's key lives until the send is answered: pressing Send again after a failure
// repeats the same key, so the turn is stored once. Keys and sends in flight are kept per
// thread (a chat not started yet under NEW_CHAT), so a send still on its way in one thread
// never holds up the next one elsewhere.
const pending = new Map();
const sending = new Set();

async function sendBody(body, threadId, key) {
  const answer = await write(`/api/chat/threads/${threadId}/messages`, { body }, key);
  // Shown at once; the thread's stream brings the same id later and it is not shown again.
  if (state.threadId === threadId) {
    addMessage(answer.message);
    showNewest(); // the reader's own send is always shown
  }
  return answer;
}

function sendingHere(slot, on) {
  if (on) sending.add(slot);
  else sending.delete(slot);
  if ((state.threadId ?? NEW_CHAT) === slot) $("send").disabled = !canSend || on;
}

export async function send() {
  const composer = $("composer-body");
  const body = composer.value;
  let threadId = state.threadId;
  if (!canSend || sending.has(threadId ?? NEW_CHAT) || !body.trim()) return;
  if (threadId === null) {
    // Just start typing: the first send makes its thread, then goes there.
    sendingHere(NEW_CHAT, true);
    say($("composer-notice"), "Starting a new chat…");
    try {
      threadId = await listeners.start(body);
    } catch (error) {
      say($("composer-notice"), error.message, "error");
      return;
    } finally {
      sendingHere(NEW_CHAT, false);
    }
    // The text moves with it: the new thread's draft until the send is answered.
    if (loadDraft(NEW_CHAT) === body) saveDraft(NEW_CHAT, "");
    saveDraft(threadId, body);
    composer.value = body;
  }
  sendingHere(threadId, true);
  const earlier = pending.get(threadId);
  const key = earlier?.body === body ? earlier.key : newKey();
  pending.set(threadId, { body, key });
  say($("composer-notice"), "Sending…");
  try {
    await sendBody(body, threadId, key);
    pending.delete(threadId);
    if (loadDraft(threadId) === body) saveDraft(threadId, "");
    if (state.threadId === threadId && composer.value === body) composer.value = "";
    if (state.threadId === threadId) say($("composer-notice"), "");
  } catch (error) {
    if (state.threadId === threadId) say($("composer-notice"), error.message, "error");
  } finally {
    sendingHere(threadId, false);
  }
}

// A new version of a turn of the open thread (an edit, a regenerate): shown like a send.
onVersionEvents({
  shown: (message) => {
    addMessage(message);
    showNewest();
  },
});

export function keepDraft() {
  saveDraft(state.threadId ?? NEW_CHAT, $("composer-body").value);
}

export function composerKey(event) {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  } else if (event.key === "Escape" && !event.isComposing && !$("run-state").hidden) {
    // Esc stops the reply being written in this thread, as its Stop button does.
    event.preventDefault();
    stop();
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
