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

// A disclosure whose content is drawn the first time it is opened (`draw` gives the nodes): a
// case of many failures, repeats or votes stays a page of bounded size until a reader asks.
export function drawnWhenOpened(className, summary, draw) {
  const disclosure = element("details", className);
  disclosure.append(element("summary", "", summary));
  disclosure.addEventListener("toggle", () => {
    if (disclosure.open && disclosure.childElementCount === 1) disclosure.append(...draw());
  });
  return disclosure;
}

// An amount in dollars as the runner writes it (`costs.money`): cents from a dollar up, four
// significant digits below, "$0" for nothing.
export function money(amount) {
  if (amount >= 1) return `$${amount.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  if (amount <= 0) return "$0";
  const digits = Math.min(12, Math.max(2, 3 - Math.floor(Math.log10(amount))));
  return `$${amount.toFixed(digits).replace(/0+$/, "").replace(/\.$/, "")}`;
}

// Tokens and cost as the runner tells them (`Spend.told`): "tokens 1,234 in, 56 out · cost
// $0.0123 (2 turns without usage)". What is unknown is said so, never a zero: tokens when no
// turn recorded usage, the cost when no turn was priced, and how many turns (and, for a run,
// cases that recorded no cost) are not counted. `cost` is the listener's (a case's or a run's),
// or null: a record stored without one.
export function spendText(cost) {
  if (!cost) return "tokens unknown · cost unknown (not recorded)";
  const withUsage = cost.turns - cost.turns_without_usage;
  const tokens = withUsage > 0
    ? `tokens ${cost.prompt_tokens.toLocaleString()} in, ${cost.completion_tokens.toLocaleString()} out`
    : "tokens unknown";
  const amount = cost.amount === null ? "cost unknown" : `cost ${money(cost.amount)}`;
  const unknown = [];
  if (cost.turns_without_usage) unknown.push(`${plural(cost.turns_without_usage, "turn")} without usage`);
  if (cost.turns_without_price) {
    const counted = unknown.length ? String(cost.turns_without_price) : plural(cost.turns_without_price, "turn");
    unknown.push(`${counted} without a price`);
  }
  if (cost.cases_without_cost) unknown.push(`${plural(cost.cases_without_cost, "case")} not recorded`);
  return `${tokens} · ${amount}${unknown.length ? ` (${unknown.join(", ")})` : ""}`;
}
