// Where the reader is, in the address: `#project=1&thread=5`, or on the tester's Console the
// test runs, `#runs` (the list) or `#run=7` (one run). Each thread or run opened by the reader is
// a history entry, so Back returns to the one before; editing the address switches. A thread
// named alone (`#thread=5`, as the trail's and the test runs' links name it) is opened in its
// own project.

import { query } from "./api.js";
import { state } from "./page.js";

function placeOf() {
  if (state.view === "runs") return state.testRunId === null ? "#runs" : `#run=${state.testRunId}`;
  const text = query("", { project: state.projectId, thread: state.threadId }).replace(/^\?/, "");
  return text ? `#${text}` : location.pathname;
}

// Writes the current place: a new entry (`push`) when the reader moved, else in place.
export function remember({ push = false } = {}) {
  const place = placeOf();
  if (place === (location.hash || location.pathname)) return;
  if (push) history.pushState(null, "", place);
  else history.replaceState(null, "", place);
}

export function recalled() {
  const params = new URLSearchParams(location.hash.slice(1));
  const id = (name) => (/^[0-9]{1,15}$/.test(params.get(name) ?? "") ? Number(params.get(name)) : null);
  const run = id("run");
  return { project: id("project"), thread: id("thread"), runs: params.has("runs") || run !== null, run };
}
