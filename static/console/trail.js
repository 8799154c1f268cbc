// The live trail: every row on the bus the actor may read (R20), labelled by both ends (R16).

import { get, query } from "./api.js";
import { openStream } from "./connection.js";
import { noteTrailRow } from "./inbox.js";
import { $, element, me, say, state, timeOf } from "./page.js";
import { rowList } from "./rows.js";

const PAGE_SIZE = 50;
// The channel a person's message came through (the row's `via`), as the trail names it; the
// stored `from_run` (`human-cli`, R6) stays beside it.
const VIA = { console: "via Console", api: "via API", cli: "via CLI" };
// Rows a run writes about its own bookkeeping: folded into the run's row (decided on `kind`,
// never on the text; rows without a kind are shown as they are).
const FOLDED_KINDS = new Set(["claim.ended"]);

// "in <thread>": a link to it for the actor's own threads, the name alone for others'.
function threadLabel(row) {
  if (row.thread === null || row.thread === undefined) return null;
  const name = row.thread_name ?? state.threads.get(row.thread)?.name ?? `thread ${row.thread}`;
  const label = element("span", "trail-in", "in ");
  const own = row.from_role === me || row.to_role === me || state.threads.has(row.thread);
  const target = own ? element("a", "trail-thread", name) : element("span", "trail-thread-name", name);
  if (own) target.href = `#thread=${row.thread}`;
  target.dir = "auto";
  label.append(target);
  return label;
}

function renderTrailRow(row) {
  const byTester = [row.from_role, row.to_role, row.actor?.role].includes("tester");
  const item = element("li", byTester ? "trail-row by-tester" : "trail-row");
  item.dataset.run = row.actor?.run ?? "";
  item.dataset.kind = row.kind ?? "";
  const meta = element("div", "meta", `${row.actor?.role ?? "?"} · ${row.actor?.run ?? "?"} · `);
  if (VIA[row.via]) meta.prepend(`${VIA[row.via]} · `);
  meta.append(timeOf(row.at));
  const thread = threadLabel(row);
  if (thread) meta.append(" · ", thread);
  const text = element("span", "trail-text", row.text);
  text.dir = "auto";
  item.append(text, meta);
  return item;
}

// A folded row goes under the newest earlier row of its run, in a disclosure of its own; with
// no such row shown, it stays a row like the others.
function fold(row) {
  const item = trail.item(row.id);
  if (!FOLDED_KINDS.has(row.kind) || !item) return;
  let owner = item.previousElementSibling;
  while (owner && (owner.dataset.run !== item.dataset.run || FOLDED_KINDS.has(owner.dataset.kind))) {
    owner = owner.previousElementSibling;
  }
  if (!owner) return;
  let details = owner.querySelector("details.folded");
  if (!details) {
    details = element("details", "folded");
    details.append(element("summary"), element("ul", "folded-rows"));
    owner.append(details);
  }
  const folded = element("li", "", item.querySelector(".trail-text").textContent);
  folded.dir = "auto";
  details.querySelector("ul").append(folded);
  const count = details.querySelectorAll("li").length;
  details.querySelector("summary").textContent = count === 1 ? "1 more row of this run" : `${count} more rows of this run`;
  item.hidden = true;
}

const trail = rowList($("trail"), $("trail-log"), renderTrailRow);

function addRow(row) {
  if (trail.add(row)) fold(row);
}

function showTrailState() {
  say($("trail-state"), trail.size ? "" : "Nothing on the bus yet.");
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
      addRow(row);
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
    rows.forEach(fold);
    $("trail-older").hidden = rows.length < PAGE_SIZE;
  } catch (error) {
    say($("trail-state"), error.message, "error");
  }
}
