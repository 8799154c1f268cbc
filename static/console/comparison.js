// A test run compared with another, on the tester's Console: its baseline at once when it has
// one, otherwise a run the reader chooses among the earlier ones ("Compare with"). The server
// decides each case's change (`GET /api/suite-runs/ID/comparison/OTHER`, the broker's rule for
// any two runs) and answers them in the order a reviewer reads them: regressed, fixed, changed,
// new, missing, a page at a time; the cases that stayed the same are counted and drawn only when
// their disclosure is opened. A regressed, fixed or changed case opens its replies side by side
// (`.../cases/CASE`): the last failing repeat of each run (else its last), turn by turn, what
// was sent and each run's reply, in two columns on a wide screen and one above the other on a
// phone, each labelled with its run.
//
// Everything shown is text (`textContent`): names, sent texts and replies are what a runner or
// a model wrote, never markup for this page.

import { get, query } from "./api.js";
import { $, element, say } from "./page.js";
import { evidenceText, plural, spaced, textBlock, threadLink } from "./runtext.js";

// Earlier runs offered to compare with; the baseline is offered even when older than these.
const CHOICES = 50;
// Compared cases, and a case's turns, asked for at once.
const CASES_PAGE = 100;
const TURNS_PAGE = 20;
// The changes whose replies a reviewer opens: both runs have the case, and it moved.
const OPENED = new Set(["regressed", "fixed", "changed"]);

// Bumped whenever what the comparison shows changes, so an answer for another is dropped.
let current = 0;
// The run shown, the run it is compared with (as the answer gave it), and the last compared
// case of each part shown, from which "Show more" goes on.
let shownRun = null;
let otherRun = null;
const last = { differences: null, same: null };
// Whether the same cases' first page was asked for (their disclosure opened).
let sameAsked = false;

const runWords = (run) => `Run ${run.id} · ${run.suites.join(", ")} · ${new Date(run.started_at).toLocaleString([], { dateStyle: "medium", timeStyle: "short" })}`;

function choice(id, text) {
  const option = element("option", "", text);
  option.value = String(id);
  return option;
}

// The choice made for the reader: the baseline, else the newest earlier run of the same suites,
// else the newest earlier run.
function defaultChoice(run, earlier) {
  if (run.baseline !== null) return run.baseline;
  const suites = run.suites.join("\n");
  return (earlier.find((other) => other.suites.join("\n") === suites) ?? earlier[0]).id;
}

function resetResult() {
  $("comparison-result").hidden = true;
  $("compared-cases").replaceChildren();
  $("compared-same-cases").replaceChildren();
  $("compared-same").open = false;
  $("compared-more").hidden = true;
  $("compared-same-more").hidden = true;
  last.differences = null;
  last.same = null;
  sameAsked = false;
  otherRun = null;
}

export function clearComparison() {
  current += 1;
  shownRun = null;
  resetResult();
  $("compare-with").replaceChildren();
  $("compare-with").disabled = true;
  $("compare-go").disabled = true;
  say($("comparison-state"), "");
}

// The run shown: the runs before it offered, and its baseline compared with at once.
export async function showComparison(run) {
  clearComparison();
  const mine = current;
  shownRun = run;
  let earlier = [];
  try {
    ({ runs: earlier } = await get(query("/api/suite-runs", { before: run.id, limit: CHOICES })));
  } catch (error) {
    if (mine === current) say($("comparison-state"), error.message, "error");
    if (run.baseline === null) return;
  }
  if (mine !== current) return;
  const choices = earlier.map((other) => choice(other.id, other.id === run.baseline ? `${runWords(other)} · its baseline` : runWords(other)));
  // A baseline older than the runs offered is offered all the same, after them.
  if (run.baseline !== null && !earlier.some((other) => other.id === run.baseline)) {
    choices.push(choice(run.baseline, `Run ${run.baseline} · its baseline`));
  }
  if (!choices.length) {
    say($("comparison-state"), "No earlier run to compare this one with.");
    return;
  }
  $("compare-with").replaceChildren(...choices);
  $("compare-with").value = String(defaultChoice(run, earlier));
  $("compare-with").disabled = false;
  $("compare-go").disabled = false;
  if (run.baseline !== null) compare();
  else say($("comparison-state"), "No baseline: choose an earlier run and compare.");
}

// --- the compared cases ------------------------------------------------------------------

const tallyText = (side) => `${side.passed_runs}/${side.runs}`;
const sideTally = (side) => (side === null ? null : { passed: side.passed_runs, runs: side.runs });

// "10/10 → 2/10": the other run's k/N, then this run's; "not in run 5" for a side without it.
function talliesOf(found) {
  const told = element("span", "compared-tally");
  const arrow = element("span", "", "→");
  arrow.setAttribute("aria-hidden", "true");
  spaced(told, [
    element("span", "", found.other === null ? `not in run ${otherRun.id}` : tallyText(found.other)),
    arrow,
    element("span", "visually-hidden", "then"),
    element("span", "", found.now === null ? "not in this run" : tallyText(found.now)),
  ]);
  return told;
}

function comparedItem(found) {
  const item = element("li", "compared");
  item.dataset.change = found.change;
  const head = element("div", "compared-head");
  const name = element("span", "case-name", `${found.suite} · ${found.case}`);
  name.dir = "auto";
  const parts = [name];
  if (found.instance) {
    const instance = element("span", "case-instance", found.instance);
    instance.dir = "auto";
    const on = element("span", "compared-instance", "on ");
    on.append(instance);
    parts.push(on);
  }
  const change = element("span", "change", found.change);
  change.dataset.change = found.change;
  if (found.change === "changed") change.title = "Its definition changed between the runs: not compared.";
  parts.push(change, talliesOf(found));
  const evidence = evidenceText({
    change: found.change,
    pValue: found.p_value,
    before: sideTally(found.other),
    now: sideTally(found.now),
  });
  if (evidence) parts.push(element("span", "change-evidence", evidence));
  spaced(head, parts);
  item.append(head);
  if (OPENED.has(found.change) && found.now !== null && found.other !== null) item.append(repliesOf(found));
  return item;
}

function showCounts(counts) {
  const parts = [];
  for (const [change, count] of Object.entries(counts)) {
    if (!count) continue;
    const told = element("span", change === "regressed" ? "regressed" : "count", `${change} ${count}`);
    told.dataset.change = change;
    parts.push(told);
  }
  if (!parts.length) parts.push(element("span", "count", "no cases in either run"));
  $("comparison-counts").replaceChildren(spaced(element("span", "test-run-counts"), parts));
}

// "Run 7 against run 5, its baseline" (the run's facts link the baseline already).
function titleOf(run, other) {
  const whose = other.id === run.baseline ? ", its baseline" : "";
  $("comparison-title").textContent = `Run ${run.id} against run ${other.id}${whose}`;
}

async function compare() {
  const otherId = Number($("compare-with").value);
  if (shownRun === null || !otherId) return;
  current += 1;
  const mine = current;
  const run = shownRun;
  resetResult();
  say($("comparison-state"), "Comparing…");
  try {
    const answer = await get(query(`/api/suite-runs/${run.id}/comparison/${otherId}`, { limit: CASES_PAGE }));
    if (mine !== current) return;
    otherRun = answer.other;
    titleOf(run, answer.other);
    showCounts(answer.counts);
    showPart("differences", answer.cases, answer.more);
    const same = answer.counts.same;
    $("compared-same").hidden = same === 0;
    $("compared-same-summary").textContent = `${plural(same, "case")} the same`;
    $("comparison-result").hidden = false;
    const differences = answer.cases.length ? "" : "No case changed between the two runs.";
    say($("comparison-state"), differences);
  } catch (error) {
    if (mine === current) say($("comparison-state"), error.message, "error");
  }
}

const PARTS = {
  differences: { list: "compared-cases", more: "compared-more", same: false },
  same: { list: "compared-same-cases", more: "compared-same-more", same: true },
};

function showPart(name, cases, more) {
  const part = PARTS[name];
  $(part.list).append(...cases.map(comparedItem));
  if (cases.length) last[name] = cases[cases.length - 1].id;
  $(part.more).hidden = !more;
}

// A part's next page, after the last case of it shown (the first page of the same cases when
// their disclosure is first opened).
async function loadPart(name) {
  const part = PARTS[name];
  if (shownRun === null || otherRun === null) return;
  const mine = current;
  $(part.more).disabled = true;
  try {
    const path = `/api/suite-runs/${shownRun.id}/comparison/${otherRun.id}`;
    const answer = await get(query(path, { same: part.same ? "true" : null, after: last[name], limit: CASES_PAGE }));
    if (mine === current) showPart(name, answer.cases, answer.more);
  } catch (error) {
    if (mine === current) say($("comparison-state"), error.message, "error");
  } finally {
    $(part.more).disabled = false;
  }
}

// --- a case's replies side by side ----------------------------------------------------------

function repeatLine(label, repeat) {
  const line = element("p", "reply-repeat");
  if (repeat === null) {
    line.append(`${label}: its record keeps no repeat of this case.`);
    return line;
  }
  const how = repeat.passed === null ? "" : repeat.passed ? ", passed" : ", failed";
  line.append(`${label}: repeat ${repeat.repeat}${how}`);
  if (repeat.thread !== null) line.append(" · in ", threadLink(repeat.thread));
  if (!repeat.readable) line.append(" · its thread cannot be read");
  return line;
}

function labelled(label, block) {
  return [element("p", "reply-label", label), block];
}

function noText(text) {
  return element("p", "reply-none", text);
}

// One run's side of a turn, labelled with its run (the columns' order on a wide screen, the
// only way to tell the sides apart once they are stacked on a phone).
function sideOf(texts, label, withSent) {
  const side = element("div", "reply-side");
  side.setAttribute("role", "group");
  side.setAttribute("aria-label", label);
  side.append(element("p", "reply-side-label", label));
  if (texts === null) {
    side.append(noText("No such turn in this repeat."));
    return side;
  }
  if (withSent) side.append(...labelled("Sent", texts.sent === null ? noText("Not read") : textBlock("reply-text sent", texts.sent)));
  const none = texts.state && texts.state !== "answered" ? `No reply (${texts.state})` : "No reply read";
  side.append(...labelled("Reply", texts.reply === null ? noText(none) : textBlock("reply-text reply", texts.reply)));
  if (texts.passed === false) side.append(element("p", "reply-missed", "This turn failed its expectations."));
  return side;
}

function turnItem(turn, labels) {
  const item = element("li", "reply-turn");
  item.append(element("p", "reply-turn-head", `Turn ${turn.turn}`));
  // Sent alike (the usual case: the same file's turn): said once above both replies.
  const alike = turn.now !== null && turn.other !== null && turn.now.sent === turn.other.sent && turn.now.sent !== null;
  if (alike) item.append(...labelled("Sent", textBlock("reply-text sent", turn.now.sent)));
  const pair = element("div", "reply-pair");
  pair.append(sideOf(turn.other, labels.other, !alike), sideOf(turn.now, labels.now, !alike));
  item.append(pair);
  return item;
}

async function loadReplies(box, ids, after) {
  const mine = current;
  const state = box.querySelector(".state");
  const more = box.querySelector(".reply-more");
  say(state, "Loading the replies…");
  more.disabled = true;
  try {
    const path = `/api/suite-runs/${ids.run}/comparison/${ids.other}/cases/${ids.case}`;
    const answer = await get(query(path, { after, limit: TURNS_PAGE }));
    if (mine !== current) return;
    const labels = { other: `Run ${ids.other}`, now: `Run ${ids.run} (this run)` };
    if (after === null) {
      box.querySelector(".reply-repeats").replaceChildren(
        repeatLine(labels.other, answer.other),
        repeatLine(labels.now, answer.now),
      );
    }
    box.querySelector(".reply-turns").append(...answer.turns.map((turn) => turnItem(turn, labels)));
    if (answer.turns.length) box.dataset.after = answer.turns[answer.turns.length - 1].turn;
    more.hidden = !answer.more;
    const kept = box.querySelector(".reply-turn") !== null;
    say(state, kept ? "" : "The records kept no turns of these repeats; their threads hold them.");
  } catch (error) {
    if (mine === current) say(state, error.message, "error");
  } finally {
    more.disabled = false;
  }
}

// Drawn and asked for only when opened: a comparison of many regressions stays one page.
function repliesOf(found) {
  const disclosure = element("details", "compared-replies");
  const summary = element("summary", "", "Replies side by side");
  summary.append(element("span", "visually-hidden", ` of ${found.suite} · ${found.case}`));
  const box = element("div", "replies");
  const more = element("button", "link reply-more", "Show more turns");
  more.type = "button";
  more.hidden = true;
  box.append(element("div", "reply-repeats"), element("ol", "reply-turns"), more, element("p", "state"));
  disclosure.append(summary, box);
  const ids = { run: shownRun.id, other: otherRun.id, case: found.id };
  more.addEventListener("click", () => loadReplies(box, ids, Number(box.dataset.after)));
  disclosure.addEventListener("toggle", () => {
    if (disclosure.open && !box.dataset.asked) {
      box.dataset.asked = "true";
      loadReplies(box, ids, null);
    }
  });
  return disclosure;
}

export function wireComparison() {
  $("compare-form").addEventListener("submit", (event) => {
    event.preventDefault();
    compare();
  });
  $("compared-more").addEventListener("click", () => loadPart("differences"));
  $("compared-same-more").addEventListener("click", () => loadPart("same"));
  $("compared-same").addEventListener("toggle", () => {
    if (!$("compared-same").open || sameAsked) return;
    sameAsked = true;
    loadPart("same");
  });
}
