// The live trail: every row on the bus the actor may read (R20), labelled by both ends (R16).

import { get, query } from "./api.js";
import { openStream } from "./connection.js";
import { $, element, say, timeOf } from "./page.js";
import { rowList } from "./rows.js";

const PAGE_SIZE = 50;

function renderTrailRow(row) {
  const byTester = [row.from_role, row.to_role, row.actor?.role].includes("tester");
  const item = element("li", byTester ? "trail-row by-tester" : "trail-row");
  const meta = element("div", "meta", `${row.actor?.role ?? "?"} · ${row.actor?.run ?? "?"} · `);
  meta.append(timeOf(row.at));
  const text = element("span", "trail-text", row.text);
  text.dir = "auto";
  item.append(text, meta);
  return item;
}

const trail = rowList($("trail"), $("trail-log"), renderTrailRow);

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
  rows.forEach((row) => trail.add(row));
  $("trail-older").hidden = rows.length < PAGE_SIZE;
  showTrailState();
  openStream({
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
  return true;
}

export async function loadOlderTrail() {
  try {
    const { rows } = await get(query("/api/trail", { before: trail.oldest, limit: PAGE_SIZE }));
    trail.addOlder(rows);
    $("trail-older").hidden = rows.length < PAGE_SIZE;
  } catch (error) {
    say($("trail-state"), error.message, "error");
  }
}
