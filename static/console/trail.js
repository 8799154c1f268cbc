// The live trail: every row on the bus the actor may read (R20), each row in plain words built
// from its fields, the same words as the thread's ("You to assistant", "assistant to you", and
// on the human's trail "tester to assistant"; the stored `text`, R16's label and the body, stays
// on the row as `data-text`), tester rows marked as the tester's (R16). It can be filtered
// (all, messages, the tester's), shows bookkeeping (claims and leases) only when asked, clamps
// long bodies to a few lines with "more" (rendered as the thread renders replies: never a raw
// `**`), and folds to a narrow rail on a wide screen, remembered, counting the rows that arrive
// while folded.

import { get, query } from "./api.js";
import { openStream } from "./connection.js";
import { noteTrailRow } from "./inbox.js";
import { plain, rendered } from "./markdown.js";
import { $, element, endsOf, listener, nameOf, say, state, timeOf } from "./page.js";
import { rowList } from "./rows.js";

const PAGE_SIZE = 50;
const TESTER = "tester";
const HUMAN = "human";
// Who types their messages: shown as typed, as the thread shows them.
const PEOPLE = new Set([HUMAN, TESTER]);
// The channel a person's message came through (the row's `via`).
const VIA = { console: "via Console", api: "via API", cli: "via CLI" };
// Bookkeeping a run writes about its claim (ended, stopped, its lease run out): shown only when
// asked, folded into the run's row. Decided on `kind` (broker TrailKind), never on the text.
const BOOKKEEPING = new Set(["claim.ended"]);
// Changes the owner made to its thread: "ada renamed the thread …", no addressee.
const THREAD_CHANGES = new Set([
  "thread.renamed", "thread.archived", "thread.unarchived", "thread.pinned", "thread.unpinned",
  "turn.edited", "turn.regenerated", "thread.branched",
]);
const OPEN_KEY = "mosaic.trail.open";

// What the reader asked to see.
const view = { filter: "all", bookkeeping: false };

// Threads known from their rows to be the tester's or the human's: a row with the tester (or
// the human) at one end says whose its thread is; a run's claim row in it names neither end.
const testerThreads = new Set();
const humanThreads = new Set();

function learn(row) {
  if (row.thread === null || row.thread === undefined) return;
  const ends = [row.from_role, row.to_role, row.actor?.role];
  if (ends.includes(TESTER)) testerThreads.add(row.thread);
  else if (ends.includes(HUMAN)) humanThreads.add(row.thread);
}

function isTesterRow(row) {
  if (listener === TESTER) return true; // R20: the tester's trail holds only its own rows
  return [row.from_role, row.to_role, row.actor?.role].includes(TESTER) || testerThreads.has(row.thread);
}

// The body of the row: its `text` past R16's label ("human to assistant: "), which the broker
// writes from the row's own ends.
function bodyOf(row) {
  const label = `${row.from_role} to ${row.to_role}: `;
  return row.text.startsWith(label) ? row.text.slice(label.length) : row.text;
}

// Who did it, in words, what it says, and the channel a person's message came through.
function wordsOf(row) {
  const body = bodyOf(row);
  const from = nameOf(row.from_role, { first: true });
  if (row.kind === "message" || row.kind === "decision" || !row.kind) {
    return { who: endsOf(row.from_role, row.to_role), says: body, via: VIA[row.via] ?? "" };
  }
  if (THREAD_CHANGES.has(row.kind)) {
    // The broker says "renamed “a” to “b”": the thread is the row's own.
    return { who: from, says: body.replace(/^renamed /, "renamed the thread ") };
  }
  if (row.actor?.role === "staff") return { who: `${row.actor.run} (staff)`, says: body };
  return { who: nameOf(row.actor?.role ?? row.from_role, { first: true }), says: body };
}

// "in <thread>": a link for the actor's own threads; the tester's threads on the human's trail
// are named, never linked (the human cannot open them), and said to be the tester's.
function threadLabel(row, byTester) {
  if (row.thread === null || row.thread === undefined) return null;
  const name = row.thread_name ?? state.threads.get(row.thread)?.name ?? `thread ${row.thread}`;
  const mine = listener === TESTER
    || (!byTester && (state.threads.has(row.thread) || humanThreads.has(row.thread)));
  const label = element("span", "trail-in", listener === HUMAN && byTester ? "in the tester's thread " : "in ");
  const target = mine ? element("a", "trail-thread", name) : element("span", "trail-thread-name", name);
  if (mine) target.href = `#thread=${row.thread}`;
  target.dir = "auto";
  label.append(target);
  return label;
}

function renderTrailRow(row) {
  learn(row);
  const byTester = isTesterRow(row);
  const item = element("li", byTester ? "trail-row by-tester" : "trail-row");
  item.dataset.run = row.actor?.run ?? "";
  item.dataset.kind = row.kind ?? "";
  item.dataset.tester = String(byTester);
  item.dataset.text = row.text;
  const { who, says, via } = wordsOf(row);
  const head = element("p", "meta trail-head");
  const actor = element("span", "trail-who", who);
  actor.title = `${row.actor?.role ?? "?"} · ${row.actor?.run ?? "?"}`;
  head.append(actor);
  if (via) head.append(" ", element("span", "trail-via", via));
  // Said in words on the human's trail (R16), not by colour alone.
  if (byTester && listener === HUMAN) head.append(" ", element("span", "trail-tag", "tester"));
  head.append(" · ", timeOf(row.at));
  const thread = threadLabel(row, byTester);
  if (thread) head.append(" · ", thread);
  // The body as the thread shows it, clamped by CSS: what a person typed as typed, anything
  // else (a reply, a consultation, a notice) as the same sanitised markdown.
  const typed = row.kind === "message" && PEOPLE.has(row.from_role);
  const text = typed ? plain(says) : rendered(says);
  text.classList.add("trail-text");
  const more = element("button", "link trail-more", "more");
  more.type = "button";
  more.hidden = true;
  more.setAttribute("aria-expanded", "false");
  more.addEventListener("click", () => {
    const open = item.classList.toggle("expanded");
    more.textContent = open ? "less" : "more";
    more.setAttribute("aria-expanded", String(open));
  });
  item.append(head, text, more);
  clamps.observe(text);
  return item;
}

// "more" shows only under a body the clamp cut, measured once the row is laid out (a row that
// arrives while the trail is hidden is measured when it shows).
const clamps = new ResizeObserver((entries) => {
  for (const { target } of entries) {
    const item = target.closest(".trail-row");
    const more = item?.querySelector(".trail-more");
    if (!more || item.classList.contains("expanded")) continue;
    if (target.clientHeight > 0) more.hidden = target.scrollHeight <= target.clientHeight + 1;
  }
});

// A folded row goes under the newest earlier row of its run, in a disclosure of its own; with
// no such row shown, it stays a row like the others.
function fold(row) {
  const item = trail.item(row.id);
  if (!BOOKKEEPING.has(row.kind) || !item) return;
  let owner = item.previousElementSibling;
  while (owner && (owner.dataset.run !== item.dataset.run || BOOKKEEPING.has(owner.dataset.kind))) {
    owner = owner.previousElementSibling;
  }
  if (!owner) return;
  let details = owner.querySelector("details.folded");
  if (!details) {
    details = element("details", "folded");
    details.append(element("summary"), element("ul", "folded-rows"));
    owner.append(details);
  }
  const { who, says } = wordsOf(row);
  const folded = element("li", "", `${who}: ${says}`);
  folded.dir = "auto";
  details.querySelector("ul").append(folded);
  const count = details.querySelectorAll("li").length;
  details.querySelector("summary").textContent = count === 1 ? "1 more row of this run" : `${count} more rows of this run`;
  item.hidden = true;
}

// --- what is shown: the filter and the bookkeeping ----------------------------------------------

function matches(item) {
  if (BOOKKEEPING.has(item.dataset.kind) && !view.bookkeeping) return false;
  if (view.filter === "messages") return item.dataset.kind === "message";
  if (view.filter === "tester") return item.dataset.tester === "true";
  return true;
}

function applyView(item) {
  item.classList.toggle("filtered", !matches(item));
}

function showTrailState() {
  if (!trail.size) {
    say($("trail-state"), "Nothing on the bus yet.");
    return;
  }
  const any = [...$("trail").children].some((item) => !item.hidden && !item.classList.contains("filtered"));
  say($("trail-state"), any ? "" : "No rows to show here: choose All, or show claims and leases.");
}

function setView(change) {
  Object.assign(view, change);
  $("trail").dataset.bookkeeping = String(view.bookkeeping);
  for (const choice of document.querySelectorAll(".trail-filter [data-filter]")) {
    choice.setAttribute("aria-pressed", String(choice.dataset.filter === view.filter));
  }
  for (const item of $("trail").children) applyView(item);
  showTrailState();
}

// --- open or folded to a rail (a wide screen; the phone's trail is a tab) ------------------------

// Rows shown since the trail was folded: the rail's badge; unfolding clears it.
let unseen = 0;

// The badge says the count and, to a screen reader, what it counts: the button's name is its
// text ("Show trail 3 new rows"), so the name holds what is seen (WCAG 2.5.3).
function showUnseen(open) {
  const badge = $("trail-unseen");
  badge.hidden = open || unseen === 0;
  badge.replaceChildren();
  if (badge.hidden) return;
  const words = element("span", "visually-hidden", unseen === 1 ? " new row" : " new rows");
  badge.append(unseen > 99 ? "99+" : String(unseen), words);
}

// A row that arrived while folded and that the trail would show counts on the rail.
function noteUnseen(row) {
  const item = trail.item(row.id);
  if (document.body.dataset.trail !== "closed" || !item || item.hidden || !matches(item)) return;
  unseen += 1;
  showUnseen(false);
}

function remembered() {
  try {
    return localStorage.getItem(OPEN_KEY) !== "false";
  } catch {
    return true; // storage refused: open, as at first
  }
}

function setOpen(open, { keep = true } = {}) {
  document.body.dataset.trail = open ? "open" : "closed";
  const toggle = $("trail-toggle");
  $("trail-toggle-text").textContent = open ? "Hide trail" : "Show trail";
  toggle.setAttribute("aria-expanded", String(open));
  if (open) unseen = 0;
  showUnseen(open);
  if (!keep) return;
  try {
    localStorage.setItem(OPEN_KEY, String(open));
  } catch {
    // Not kept: the next page opens it.
  }
}

function wireTrail() {
  setOpen(remembered(), { keep: false });
  $("trail-toggle").addEventListener("click", () => setOpen(document.body.dataset.trail !== "open"));
  for (const choice of document.querySelectorAll(".trail-filter [data-filter]")) {
    choice.addEventListener("click", () => setView({ filter: choice.dataset.filter }));
  }
  $("trail-bookkeeping").addEventListener("change", (event) => setView({ bookkeeping: event.target.checked }));
  setView({});
}

const trail = rowList($("trail"), $("trail-log"), renderTrailRow);
wireTrail();

// Shows `row`; false when it was shown already.
function addRow(row) {
  if (!trail.add(row)) return false;
  fold(row);
  applyView(trail.item(row.id));
  return true;
}

export async function startTrail() {
  let rows;
  try {
    ({ rows } = await get(query("/api/trail", { limit: PAGE_SIZE })));
  } catch (error) {
    say($("trail-state"), error.message, "error");
    return false;
  }
  rows.forEach(addRow);
  $("trail-older").hidden = rows.length < PAGE_SIZE;
  showTrailState();
  openStream({
    path: "/ws/trail/",
    type: "trail.row",
    field: "row",
    rowsType: "trail.rows",
    after: trail.newest,
    onRow: (row) => {
      if (addRow(row)) noteUnseen(row);
      noteTrailRow(row);
      showTrailState();
    },
    status: $("trail-status"),
  });
  return true;
}

export async function loadOlderTrail() {
  try {
    const { rows } = await get(query("/api/trail", { before: trail.oldest, limit: PAGE_SIZE }));
    trail.addOlder(rows);
    for (const row of rows) {
      fold(row);
      const item = trail.item(row.id);
      if (item) applyView(item);
    }
    $("trail-older").hidden = rows.length < PAGE_SIZE;
    showTrailState();
  } catch (error) {
    say($("trail-state"), error.message, "error");
  }
}
