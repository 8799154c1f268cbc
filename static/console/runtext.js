// How the test runs' parts are written, shared by a run's cases (runs.js) and two runs compared
// (comparison.js). Everything is text (`textContent`): names, sent texts and replies are what a
// runner or a model wrote, never markup for this page.

import { element } from "./page.js";

export const plural = (count, one, many = `${one}s`) => `${count} ${count === 1 ? one : many}`;

// Spans laid out apart still read as one word unless text parts them: a space between each,
// which the layout (flex, grid) ignores and a screen reader (and a link's name) keeps.
export function spaced(parent, parts) {
  parts.forEach((part, index) => parent.append(...(index ? [" ", part] : [part])));
  return parent;
}

// A thread of a case: a link the Console follows to the thread in its own project, archived
// or not (the runner archives the threads of passed repeats).
export function threadLink(id) {
  const link = element("a", "case-thread", `thread ${id}`);
  link.href = `#thread=${id}`;
  return link;
}

// A block of text as sent: kept whole and scrollable, reachable by keyboard to scroll it.
export function textBlock(className, value) {
  const block = element("pre", className, value);
  block.dir = "auto";
  block.tabIndex = 0;
  return block;
}

// A p-value as the runner prints it: two significant digits.
export const pText = (value) => String(Number(value.toPrecision(2)));

// What a change rests on: "p = 0.014" for regressed and fixed, "within noise (p = 0.2)" for a
// rate that moved without significance; `against` follows the p-value (" against 4/4"). Null
// when there is nothing to add: new, changed, nothing compared, the same rate.
// `before` and `now` are `{ passed, runs }`.
export function evidenceText({ change, pValue, before, now, against = "" }) {
  if (pValue === null || before === null || now === null) return null;
  const evidence = `p = ${pText(pValue)}${against}`;
  if (change === "regressed" || change === "fixed") return evidence;
  const moved = before.passed * now.runs !== now.passed * before.runs;
  return change === "same" && moved ? `within noise (${evidence})` : null;
}
