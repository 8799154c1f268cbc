// Where the reader is, in the address: `#project=1&thread=5`. Each thread opened by the reader
// is a history entry, so Back returns to the thread before; editing the address switches.

import { query } from "./api.js";
import { state } from "./page.js";

function placeOf(project, thread) {
  const text = query("", { project, thread }).replace(/^\?/, "");
  return text ? `#${text}` : location.pathname;
}

// Writes the current place: a new entry (`push`) when the reader moved, else in place.
export function remember({ push = false } = {}) {
  const place = placeOf(state.projectId, state.threadId);
  if (place === (location.hash || location.pathname)) return;
  if (push) history.pushState(null, "", place);
  else history.replaceState(null, "", place);
}

export function recalled() {
  const params = new URLSearchParams(location.hash.slice(1));
  const id = (name) => (/^[0-9]{1,15}$/.test(params.get(name) ?? "") ? Number(params.get(name)) : null);
  return { project: id("project"), thread: id("thread") };
}
