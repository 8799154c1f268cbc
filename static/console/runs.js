// Test runs, on the tester's Console only: the stored history of conversation-test runs
// (`GET /api/suite-runs`, newest first, paged with `before`) and one run's cases
// (`GET /api/suite-runs/ID`, a page at a time: "Show more cases" asks for those `after` the
// last shown while the answer says `more`) with their verdicts, k/N and its 95% interval,
// change against the baseline (with its p-value, or "within noise"), failures, threads, tokens
// and cost (each run's too: unknown said so, never a zero) and, when the stored record has
// them, each turn's steps and the judge's votes (repeats.js); above them, the run compared with
// its baseline or an earlier run (comparison.js). The human listener has none of these routes; its page has no such view and never
// asks for them (`hasTestRuns`).
//
// Everything a run or a case carries is shown as text (`textContent`): names, expected and
// actual are what a runner or a model wrote, never markup for this page.

import { get, query } from "./api.js";
import { clearComparison, showComparison } from "./comparison.js";
import { checkConnection, onReconnect } from "./connection.js";
import { $, element, say, timeOf } from "./page.js";
import { stepsOf, votesOf } from "./repeats.js";
import { drawnWhenOpened, evidenceText, plural, spaced, spendText, textBlock, threadLink } from "./runtext.js";

const PAGE_SIZE = 50;
// A run's cases asked for at once; the server may answer fewer, to keep its answer near 1 MB.
const CASES_PAGE = 100;
// In the order the runner reports them; each has its colour (console.css, `data-verdict`).
const VERDICTS = ["pass", "flaky", "fail", "error"];
// A case's failures shown at once; the rest are drawn when their disclosure is opened, so a
// run of many failing cases stays a page of bounded size.
const FAILURES_SHOWN = 1;

// Bumped on every change of what the pane shows, so an answer for another view is dropped.
let generation = 0;
// What the pane shows: `{ runId }` (null: the list of runs), or null when it is hidden; and
// whether it failed to load for want of a connection (loaded again when it returns).
let shown = null;
let failed = false;
// The id of the last case shown of the run shown, from which "Show more cases" goes on.
let lastCase = null;

function failedToLoad(node, error) {
  say(node, error.message, "error");
  if (error.status === 0 || error.code === "unavailable") {
    failed = true;
    checkConnection();
  }
}

// "3 pass 1 fail regressed 1": the verdicts a run holds, each in its colour, and its
// regressions set apart when there are any.
function counts(run) {
  const parts = [];
  for (const verdict of VERDICTS) {
    if (!run.counts[verdict]) continue;
    const count = element("span", "count", `${run.counts[verdict]} ${verdict}`);
    count.dataset.verdict = verdict;
    parts.push(count);
  }
  if (!parts.length) parts.push(element("span", "count", "no cases"));
  if (run.counts.regressed > 0) parts.push(element("span", "regressed", `regressed ${run.counts.regressed}`));
  return spaced(element("span", "test-run-counts"), parts);
}

function suitesOf(run) {
  const suites = element("span", "test-run-suites", run.suites.join(", "));
  suites.dir = "auto";
  return suites;
}

// A run that ended halted (refused, interrupted, or silent too long), with why as its title.
function haltedMark(run) {
  const mark = element("span", "test-run-halted", "halted");
  if (run.reason) mark.title = run.reason;
  return mark;
}

function runWhen(run) {
  const when = element("span", "test-run-when");
  when.append(timeOf(run.started_at, { withDate: true }));
  if (run.ended_at === null) when.append(" · ", element("span", "test-run-running", "running"));
  else if (run.state === "halted") when.append(" · ", haltedMark(run));
  return when;
}

// --- the list of runs ------------------------------------------------------------------------

function runItem(run) {
  const link = element("a", "test-run-choice");
  link.href = `#run=${run.id}`;
  link.dataset.id = run.id;
  spaced(link, [element("span", "test-run-name", `Run ${run.id}`), suitesOf(run), runWhen(run), counts(run), spendOf(run.cost)]);
  const item = element("li");
  item.append(link);
  return item;
}

function showRunList(runs, { older = false } = {}) {
  const list = $("runs");
  if (!older) list.replaceChildren();
  list.append(...runs.map(runItem));
  $("runs-older").hidden = runs.length < PAGE_SIZE;
  say($("runs-state"), "");
  $("runs-empty").hidden = list.childElementCount > 0;
}

// The command that makes a run, pointed at this listener as the page reaches it (the tester's
// page; the human's has no test runs).
const command = $("runs-command");
if (command) command.textContent = `mosaic-test --url ${location.origin} examples/conversations/*.suite.toml`;

async function loadRuns(mine) {
  $("runs-empty").hidden = true;
  say($("runs-state"), "Loading test runs…");
  try {
    const { runs } = await get(query("/api/suite-runs", { limit: PAGE_SIZE }));
    if (mine === generation) showRunList(runs);
  } catch (error) {
    if (mine === generation) failedToLoad($("runs-state"), error);
  }
}

export async function loadOlderRuns() {
  const mine = generation;
  const ids = [...$("runs").querySelectorAll("a[data-id]")].map((link) => Number(link.dataset.id));
  if (!ids.length) return;
  try {
    const { runs } = await get(query("/api/suite-runs", { before: Math.min(...ids), limit: PAGE_SIZE }));
    if (mine === generation) showRunList(runs, { older: true });
  } catch (error) {
    if (mine === generation) say($("runs-state"), error.message, "error");
  }
}

// --- one run ---------------------------------------------------------------------------------

function failureItem(failure) {
  const item = element("li", "failure");
  const where = failure.turn === null ? "the conversation" : `turn ${failure.turn}`;
  item.append(element("p", "failure-where", `Repeat ${failure.repeat} · ${where}`));
  const facts = element("dl");
  const fact = (label, value, kind) => {
    const detail = element("dd");
    detail.append(textBlock(`failure-text ${kind}`, value));
    facts.append(element("dt", "", label), detail);
  };
  if (failure.sent !== null) fact("Sent", failure.sent, "sent");
  fact("Expected", failure.expected, "expected");
  fact("Actual", failure.actual, "actual");
  item.append(facts);
  return item;
}

function failuresOf(failures) {
  const list = element("ol", "failures");
  list.append(...failures.slice(0, FAILURES_SHOWN).map(failureItem));
  const rest = failures.slice(FAILURES_SHOWN);
  if (!rest.length) return [list];
  const more = drawnWhenOpened("more-failures", rest.length === 1 ? "1 more failure" : `${rest.length} more failures`, () => {
    const others = element("ol", "failures");
    others.start = FAILURES_SHOWN + 1;
    others.append(...rest.map(failureItem));
    return [others];
  });
  return [list, more];
}

// Tokens and cost (a case's or a run's), what is unknown said so and never a zero.
const spendOf = (cost) => element("span", "spend", spendText(cost));

const percent = (value) => `${Math.round(value * 100)}%`;

// "95% interval 21–94%", with pass^k in its title, when the record has statistics.
function intervalOf(found) {
  if (!found.interval) return null;
  const [low, high] = found.interval;
  const told = element("span", "interval", `95% interval ${Math.round(low * 100)}–${percent(high)}`);
  const k = found.runs;
  told.title = `pass rate ${percent(found.pass_rate)}`;
  if (found.pass_hat_k !== null) told.title += `, pass^${k} ${found.pass_hat_k.toFixed(2)}`;
  return told;
}

// What the change rests on: "p = 0.014 against 4/4", "within noise (p = 0.2 against 2/3)";
// null when there is nothing to add (new, changed, the same rate).
function evidenceOf(found) {
  if (found.baseline_runs === null) return null;
  const text = evidenceText({
    change: found.change,
    pValue: found.p_value,
    before: { passed: found.baseline_passed_runs, runs: found.baseline_runs },
    now: { passed: found.passed_runs, runs: found.runs },
    against: ` against ${found.baseline_passed_runs}/${found.baseline_runs}`,
  });
  return text === null ? null : element("span", "change-evidence", text);
}

function caseItem(found, compared) {
  const item = element("li", "case");
  item.dataset.verdict = found.verdict;
  const head = element("div", "case-head");
  const name = element("span", "case-name", `${found.suite} · ${found.case}`);
  name.dir = "auto";
  const verdict = element("span", "verdict", found.verdict);
  verdict.dataset.verdict = found.verdict;
  const tally = element("span", "tally", `${found.passed_runs}/${found.runs}`);
  tally.title = `${found.passed_runs} of ${plural(found.runs, "repeat")} passed`;
  tally.append(element("span", "visually-hidden", " repeats passed"));
  const parts = [name, verdict, tally];
  const interval = intervalOf(found);
  if (interval) parts.push(interval);
  // A change says something only against a baseline; without one every case is "new".
  if (compared) {
    const change = element("span", "change", found.change);
    change.dataset.change = found.change;
    if (found.change === "changed") change.title = "Its definition changed since the baseline: not compared.";
    parts.push(change);
    const evidence = evidenceOf(found);
    if (evidence) parts.push(evidence);
  }
  spaced(head, parts);
  const meta = element("div", "case-meta");
  if (found.instance) {
    const instance = element("span", "case-instance", found.instance);
    instance.dir = "auto";
    meta.append("on ", instance);
  }
  if (found.threads.length) {
    if (found.instance) meta.append(" · ");
    meta.append(found.threads.length === 1 ? "in " : "in threads ");
    found.threads.forEach((id, index) => meta.append(...(index ? [", "] : []), threadLink(id)));
  }
  if (meta.childNodes.length) meta.append(" · ");
  meta.append(spendOf(found.cost));
  item.append(head, meta);
  if (found.failures.length) item.append(...failuresOf(found.failures));
  item.append(...[stepsOf(found), votesOf(found)].filter(Boolean));
  return item;
}

function showCases(run, cases, more) {
  $("test-run-cases").append(...cases.map((found) => caseItem(found, run.baseline !== null)));
  if (cases.length) lastCase = cases[cases.length - 1].id;
  $("test-run-more").hidden = !more;
}

function showRun(run, cases, more) {
  $("test-run-title").textContent = `Run ${run.id}`;
  const facts = $("test-run-facts");
  facts.replaceChildren(suitesOf(run), " · started ", timeOf(run.started_at, { withDate: true }), " · ");
  if (run.ended_at === null) facts.append(element("span", "test-run-running", "running"));
  else if (run.state === "halted") {
    facts.append(haltedMark(run), " ", timeOf(run.ended_at, { withDate: true }));
    if (run.reason) facts.append(": ", element("span", "test-run-reason", run.reason));
  } else facts.append("ended ", timeOf(run.ended_at, { withDate: true }));
  facts.append(" · ");
  if (run.baseline === null) facts.append("no baseline");
  else {
    const baseline = element("a", "", `run ${run.baseline}`);
    baseline.href = `#run=${run.baseline}`;
    facts.append("compared with ", baseline, ` at alpha ${run.alpha}`);
  }
  if (run.keyword) facts.append(" · cases matching “", element("span", "test-run-keyword", run.keyword), "”");
  $("test-run-counts").replaceChildren(counts(run));
  $("test-run-cost").replaceChildren(spendOf(run.cost));
  showComparison(run);
  showCases(run, cases, more);
  say($("test-run-state"), cases.length ? "" : "No cases recorded in this run.");
}

async function loadRun(id, mine) {
  $("test-run-title").textContent = `Run ${id}`;
  $("test-run-facts").replaceChildren();
  $("test-run-counts").replaceChildren();
  $("test-run-cost").replaceChildren();
  $("test-run-cases").replaceChildren();
  $("test-run-more").hidden = true;
  lastCase = null;
  say($("test-run-state"), "Loading the run…");
  try {
    const { run, cases, more } = await get(query(`/api/suite-runs/${id}`, { limit: CASES_PAGE }));
    if (mine === generation) showRun(run, cases, more);
  } catch (error) {
    if (mine === generation) failedToLoad($("test-run-state"), error);
  }
}

// The run's next page of cases, after the last shown, added below them.
export async function loadMoreCases() {
  const mine = generation;
  const runId = shown?.runId;
  if (runId === null || runId === undefined || lastCase === null) return;
  $("test-run-more").disabled = true;
  try {
    const { run, cases, more } = await get(query(`/api/suite-runs/${runId}`, { after: lastCase, limit: CASES_PAGE }));
    if (mine === generation) showCases(run, cases, more);
  } catch (error) {
    if (mine === generation) say($("test-run-state"), error.message, "error");
  } finally {
    $("test-run-more").disabled = false;
  }
}

// --- the view --------------------------------------------------------------------------------

// Shows the list of runs (`runId` null) or one run, loaded afresh: a run may have been stored,
// or one ended, since it was last shown.
export function showRuns(runId) {
  generation += 1;
  clearComparison();
  shown = { runId };
  failed = false;
  $("runs-link").setAttribute("aria-current", "page");
  $("runs-list").hidden = runId !== null;
  $("test-run").hidden = runId === null;
  return runId === null ? loadRuns(generation) : loadRun(runId, generation);
}

export function hideRuns() {
  generation += 1;
  clearComparison();
  shown = null;
  $("runs-link").removeAttribute("aria-current");
}

// Where the keyboard goes once a run or the list is shown: its heading.
export function focusRuns(runId) {
  $(runId === null ? "runs-heading" : "test-run-title").focus();
}

onReconnect(() => {
  if (failed && shown !== null) showRuns(shown.runId);
});
