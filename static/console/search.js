// Search everywhere: the reader's own threads and their messages in every project
// (`GET /api/chat/search`), listed under the search box while it holds a term. Choosing a thread
// opens it; choosing a message opens its thread with that message in view, marked.

import { get, query } from "./api.js";
import { $, element, nameOf, say, timeOf } from "./page.js";

const PAGE_SIZE = 50;
const SEARCH_DELAY_MS = 250;

// What choosing a hit does, set by the page: open a thread, or a thread at one message.
const choose = { thread: () => {}, message: () => {} };
// Told when the search starts or ends, so the project's thread list steps aside for the hits.
let onSearching = () => {};
export function onSearch(handlers) {
  if (handlers.thread) choose.thread = handlers.thread;
  if (handlers.message) choose.message = handlers.message;
  if (handlers.searching) onSearching = handlers.searching;
}

const term = () => $("thread-search").value.trim();
const searching = () => term() !== "";

// `text` as text nodes, the first match of `words` in a <mark> (case ignored; the snippet has
// its whitespace collapsed, so the term's is too). Never parsed as HTML.
function marked(text, words) {
  const escaped = words.split(/\s+/).join(" ").replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const found = escaped ? new RegExp(escaped, "iu").exec(text) : null;
  const span = element("span", "hit-snippet");
  span.dir = "auto";
  if (!found) {
    span.textContent = text;
    return span;
  }
  const end = found.index + found[0].length;
  span.append(text.slice(0, found.index), element("mark", "", found[0]), text.slice(end));
  return span;
}

// Where a hit is: its project, its thread (none for a thread found by name), and "archived".
function where(hit, { thread = true } = {}) {
  const line = element("span", "hit-where");
  const project = element("span", "hit-project", hit.project_name);
  project.dir = "auto";
  line.append(project);
  if (thread) {
    const name = element("span", "hit-thread", hit.thread_name);
    name.dir = "auto";
    line.append(" · ", name);
  }
  if (hit.archived) line.append(" · ", element("span", "hit-archived", "archived"));
  return line;
}

function hitItem(content, onChoose) {
  const choice = element("button", "choice hit");
  choice.type = "button";
  choice.append(...content);
  choice.addEventListener("click", onChoose);
  const item = element("li");
  item.append(choice);
  return item;
}

function threadHit(thread, words) {
  const name = marked(thread.name, words);
  name.className = "hit-name";
  const item = hitItem([name, where(thread, { thread: false })], () => choose.thread(thread.id));
  item.firstChild.dataset.thread = thread.id;
  return item;
}

function messageHit(hit, words) {
  const meta = where(hit);
  // Who wrote it in the Console's words: "You", or the instance's name.
  const writer = element("span", "hit-from", nameOf(hit.from_role, { first: true }));
  meta.append(" · ", writer, " · ", timeOf(hit.created_at));
  const item = hitItem([meta, marked(hit.snippet, words)], () => choose.message(hit.thread, hit.id));
  item.firstChild.dataset.thread = hit.thread;
  item.firstChild.dataset.message = hit.id;
  return item;
}

// Shows the hits of a first page (`older`: appends a further page of messages).
function showHits({ threads, messages }, words, { older = false } = {}) {
  if (!older) {
    $("search-threads").replaceChildren(...threads.map((thread) => threadHit(thread, words)));
    $("search-messages").replaceChildren();
  }
  $("search-messages").append(...messages.map((hit) => messageHit(hit, words)));
  const threadCount = $("search-threads").childElementCount;
  const messageCount = $("search-messages").childElementCount;
  $("search-threads-group").hidden = threadCount === 0;
  $("search-messages-group").hidden = messageCount === 0;
  $("search-older").hidden = messages.length < PAGE_SIZE;
  say($("search-state"), threadCount || messageCount ? "" : "No thread matches.");
}

function clearHits() {
  $("search-threads").replaceChildren();
  $("search-messages").replaceChildren();
  $("search-older").hidden = true;
}

const searchPath = (words, extra = {}) => query("/api/chat/search", { q: words, limit: PAGE_SIZE, ...extra });

// The search for the box's term, shown unless the term changed meanwhile.
async function runSearch() {
  const words = term();
  $("search-results").hidden = !words;
  onSearching(Boolean(words));
  if (!words) {
    clearHits();
    return;
  }
  say($("search-state"), "Searching…");
  try {
    const hits = await get(searchPath(words));
    if (words === term()) showHits(hits, words);
  } catch (error) {
    if (words === term()) say($("search-state"), error.message, "error");
  }
}

async function loadOlderHits() {
  const words = term();
  const last = [...$("search-messages").querySelectorAll("button[data-message]")].at(-1);
  if (!words || !last) return;
  try {
    const hits = await get(searchPath(words, { before: Number(last.dataset.message) }));
    if (words === term()) showHits({ threads: [], messages: hits.messages }, words, { older: true });
  } catch (error) {
    say($("search-state"), error.message, "error");
  }
}

let timer = null;
function searchSoon() {
  clearTimeout(timer);
  timer = setTimeout(runSearch, SEARCH_DELAY_MS);
}

// Empties the box and puts the project's threads back.
export function clearSearch() {
  clearTimeout(timer);
  $("thread-search").value = "";
  runSearch();
}

export function wireSearch() {
  const box = $("thread-search");
  box.addEventListener("input", searchSoon);
  // Esc clears the search; ↓ goes to the first hit.
  box.addEventListener("keydown", (event) => {
    if (event.isComposing) return;
    if (event.key === "Escape" && box.value) {
      event.preventDefault();
      clearSearch();
    } else if (event.key === "ArrowDown" && searching()) {
      const first = $("search-results").querySelector("button:not([hidden])");
      if (!first) return;
      event.preventDefault();
      first.focus();
    }
  });
  // Esc on a hit clears the search too, and gives the focus back to the box.
  $("search-results").addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.isComposing) return;
    event.preventDefault();
    clearSearch();
    box.focus();
  });
  $("search-older").addEventListener("click", loadOlderHits);
}

// The message a hit opened, shown in place: scrolled into view, marked for a moment (the
// class's animation), and focused. The thread stops following its newest line (follow.js reads
// the scroll at once, before any newer row lands).
export function showFound(messageId) {
  const item = document.querySelector(`#messages > li[data-id="${messageId}"]`);
  if (!item) return false;
  for (const other of document.querySelectorAll("#messages > li.found")) other.classList.remove("found");
  item.classList.add("found");
  item.tabIndex = -1;
  item.scrollIntoView({ block: "center" });
  $("messages-log").dispatchEvent(new Event("scroll"));
  item.focus({ preventScroll: true });
  return true;
}
