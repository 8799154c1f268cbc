// The inbox, as its contract shapes it: each thread's last activity, a one-line preview and
// an unread count, the tab title counting unread, a read mark moved as the owner reads, and
// rename, archive and pin. Every part reads the contract's fields when the server sends them and
// stays out of the way when it does not (`thread.unread ?? 0`; no `archived` field, no buttons).

import { write } from "./api.js";
import { $, element, me, say, state, timeOf } from "./page.js";

const BASE_TITLE = document.title;

export const hasInbox = (thread) => thread !== undefined && "archived" in thread;

// The extra lines of a thread's entry in the list: when, what, how many unread.
export function threadDetails(thread) {
  const details = [];
  if (thread.last_message_at) {
    details.push(element("span", "thread-when"));
    details[0].append(timeOf(thread.last_message_at));
  }
  if (thread.preview) {
    const preview = element("span", "thread-preview", thread.preview);
    preview.dir = "auto";
    details.push(preview);
  }
  const marks = element("span", "thread-marks");
  if (thread.pinned) marks.append(element("span", "pinned-mark", "pinned"));
  const unread = thread.unread ?? 0;
  if (unread > 0) {
    const mark = element("span", "unread", String(unread));
    mark.setAttribute("aria-label", unread === 1 ? "1 unread" : `${unread} unread`);
    marks.append(mark);
  }
  if (marks.childElementCount) details.push(marks);
  return details;
}

export function showUnreadTotal() {
  const total = [...state.threads.values()].reduce((sum, thread) => sum + (thread.archived ? 0 : thread.unread ?? 0), 0);
  document.title = total ? `(${total}) ${BASE_TITLE}` : BASE_TITLE;
}

// What refreshes one thread's entry in the list, and what brings up a thread the list does not
// hold (set by the list).
let redraw = () => {};
export function onThreadChanged(callback) {
  redraw = callback;
}
let relist = () => {};
export function onUnlistedActivity(callback) {
  relist = callback;
}

function changed(thread) {
  state.threads.set(thread.id, thread);
  redraw(thread);
  showUnreadTotal();
}

// The owner read the open thread up to `messageId`: the mark moves forward on the server (it
// never moves back there either), and the count here is zero.
let reading = Promise.resolve();
export function markRead(threadId, messageId) {
  const thread = state.threads.get(threadId);
  if (!hasInbox(thread) || document.hidden) return;
  if ((thread.read_up_to ?? 0) >= messageId && !thread.unread) return;
  changed({ ...thread, read_up_to: Math.max(thread.read_up_to ?? 0, messageId), unread: 0 });
  reading = reading
    .then(() => write(`/api/chat/threads/${threadId}/read`, { up_to: messageId }))
    .then(({ thread: stored }) => stored && changed(stored))
    .catch(() => {}); // a mark not stored is moved again by the next read
}

// A message on the trail in one of the reader's threads is activity: the thread moves to the top
// of its part of the list (pinned or not); a reply to the reader in a thread that is not open
// (or a page not looked at) is one more unread. Renames, archives, pins and claims are not
// activity. A thread the list does not hold comes up when the list is read again.
export function noteTrailRow(row) {
  if (row.kind && row.kind !== "message") return;
  const thread = state.threads.get(row.thread);
  if (!hasInbox(thread)) {
    if (row.thread !== null && row.thread !== undefined && [row.from_role, row.to_role].includes(me)) relist();
    return;
  }
  const activity = { ...thread, last_message_at: row.at };
  const toMe = row.to_role === me && row.from_role !== me;
  if (toMe && (row.thread !== state.threadId || document.hidden)) activity.unread = (thread.unread ?? 0) + 1;
  changed(activity);
}

// --- rename, archive and pin (the thread header's buttons) ---------------------------------

export function showThreadActions(threadId) {
  const thread = state.threads.get(threadId);
  $("thread-actions").hidden = !hasInbox(thread);
  $("rename-form").hidden = true;
  if (!hasInbox(thread)) return;
  $("archive").textContent = thread.archived ? "Unarchive" : "Archive";
  // Shown when the server keeps pins (the thread shape's `pinned`).
  $("pin").hidden = !("pinned" in thread);
  $("pin").textContent = thread.pinned ? "Unpin" : "Pin";
}

// `notice` is the line beside the button or field that asked: an error shows there,
// and `focus` (the field to correct) takes the focus.
async function patch(threadId, body, notice, focus) {
  try {
    const { thread } = await write(`/api/chat/threads/${threadId}`, body, undefined, "PATCH");
    changed(thread);
    return thread;
  } catch (error) {
    say(notice, error.message, "error");
    focus?.focus();
    return null;
  }
}

export function startRename() {
  const thread = state.threads.get(state.threadId);
  if (!thread) return;
  $("rename-form").hidden = false;
  say($("rename-notice"), "");
  $("rename-name").value = thread.name;
  $("rename-name").focus();
}

export async function rename(event) {
  event.preventDefault();
  const threadId = state.threadId;
  const thread = await patch(threadId, { name: $("rename-name").value }, $("rename-notice"), $("rename-name"));
  if (!thread) return null;
  $("rename-form").hidden = true;
  say($("rename-notice"), "");
  if (state.threadId === threadId) $("thread-title").textContent = thread.name;
  say($("actions-notice"), `Renamed to ${thread.name}.`);
  return thread;
}

// Sets a flag of the open thread or clears it (`archived`, `pinned`), saying which beside the
// buttons; the thread as the server answered, or null.
async function toggle(flag, says) {
  const current = state.threads.get(state.threadId);
  if (!hasInbox(current)) return null;
  const thread = await patch(current.id, { [flag]: !current[flag] }, $("actions-notice"));
  if (!thread) return null;
  say($("actions-notice"), thread[flag] ? says.on : says.off);
  showThreadActions(thread.id);
  return thread;
}

// Archive or unarchive the open thread; an archived thread leaves the list of current ones.
export async function toggleArchive(afterwards) {
  const thread = await toggle("archived", { on: "Archived.", off: "Back among your current threads." });
  if (thread) afterwards(thread);
}

// Pin or unpin the open thread: pinned threads stay at the top of the list.
export const togglePin = () => toggle("pinned", { on: "Pinned to the top of the list.", off: "Unpinned." });
