// What the open thread is, beside its title: "Archived" for an archived thread, and
// for an address that names no thread of the reader's — none at all ("Not found"), or the other
// side's ("Not yours") — the reason, with the composer disabled. Reached by loading the page or
// by changing the address, the answer is the same: it comes from reading the thread's messages.

import { $, say } from "./page.js";

const UNAVAILABLE = {
  "not-found": {
    badge: "Not found",
    title: "Thread not found",
    sentence: "There is no such thread. Choose one of your threads, or start a new chat.",
  },
  "thread-not-owned": {
    badge: "Not yours",
    title: "Not your thread",
    sentence: "This thread belongs to the other side of the bus: only its owner can read it or write to it.",
  },
};

function showBadge(text, kind = "") {
  const badge = $("thread-badge");
  badge.textContent = text;
  badge.dataset.kind = kind;
  badge.hidden = !text;
}

// The open thread's badge: "Archived", or none (`thread` null: no thread open).
export function showThreadBadge(thread) {
  showBadge(thread?.archived ? "Archived" : "");
}

// The thread named could not be read for `code`: true when that means it is not the reader's
// to read (then the pane says so and nothing can be written there).
export function showUnavailable(code) {
  const why = UNAVAILABLE[code];
  if (!why) return false;
  $("thread-title").textContent = why.title;
  showBadge(why.badge, "missing");
  say($("messages-state"), why.sentence, "error");
  $("thread-actions").hidden = true;
  $("rename-form").hidden = true;
  const exporter = $("thread-export");
  if (exporter) exporter.hidden = true;
  const composer = $("composer-body");
  composer.disabled = true;
  composer.value = "";
  $("send").disabled = true;
  say($("composer-notice"), "You cannot write to this thread.");
  return true;
}
