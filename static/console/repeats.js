// What a stored case's repeats hold besides their verdicts, on the tester Console's Test runs
// view (runs.js): each turn's steps (the tool calls the assistant made answering it) and the
// judge's votes (`pass`, `fail` or `invalid`, each with its reason), every one under the repeat
// and turn it belongs to, as the runner's HTML report shows them. Each sits under a disclosure
// drawn when opened, so a case of many repeats stays a page of bounded size.
//
// A record stored before steps or votes were kept has none, and a record too big for its bound
// keeps its repeats without their turns (the runner's `stored_repeats`): then nothing shows.
// Everything is text (`textContent`): arguments and reasons are what a model wrote.

import { element } from "./page.js";
import { drawnWhenOpened, plural } from "./runtext.js";

// What the repeats of case `found` hold of one kind, each with where it belongs: `ofTurn`
// gives a turn's, `ofRepeat` a repeat's own (the judge's votes on the whole conversation).
function placesOf(found, ofTurn, ofRepeat = () => null) {
  const places = [];
  for (const repeat of found.repeats ?? []) {
    for (const turn of repeat.turns ?? []) {
      const items = ofTurn(turn) ?? [];
      if (items.length) places.push({ where: `Repeat ${repeat.repeat} · turn ${turn.turn}`, items });
    }
    const own = ofRepeat(repeat) ?? [];
    if (own.length) places.push({ where: `Repeat ${repeat.repeat} · the conversation`, items: own });
  }
  return places;
}

// One place's items, under where they belong, each drawn by `itemOf`.
function placeItem({ where, items }, kind, itemOf) {
  const item = element("li", `${kind}-turn`);
  item.append(element("p", `${kind}-where`, where));
  const list = element("ol", kind);
  list.append(...items.map(itemOf));
  item.append(list);
  return item;
}

function placesList(places, kind, itemOf) {
  const list = element("ol", `${kind}-turns`);
  list.append(...places.map((place) => placeItem(place, kind, itemOf)));
  return [list];
}

// --- steps -----------------------------------------------------------------------------------

// A step as the stored record keeps it: `create_task(title="…") refused (invalid)`. Arguments
// too long for the record are kept as their JSON text, cut, and shown as that text.
function stepText(step) {
  const args = step.arguments;
  let told = "";
  if (typeof args === "string") told = args;
  else if (args !== null && typeof args === "object" && !Array.isArray(args)) {
    told = Object.entries(args)
      .map(([name, value]) => `${name}=${JSON.stringify(value)}`)
      .join(", ");
  } else if (args !== null && args !== undefined) told = JSON.stringify(args);
  const code = step.code ? ` (${step.code})` : "";
  return `${step.tool}(${told}) ${step.outcome ?? "running"}${code}`;
}

function stepItem(step) {
  const line = element("li", "step", stepText(step));
  line.dir = "auto";
  line.dataset.outcome = step.outcome ?? "running";
  return line;
}

// "Steps: 2 calls in 1 turn", the calls listed when opened; null when no turn made one.
export function stepsOf(found) {
  const places = placesOf(found, (turn) => turn.steps);
  if (!places.length) return null;
  const count = places.reduce((sum, { items }) => sum + items.length, 0);
  const summary = `Steps: ${plural(count, "call")} in ${plural(places.length, "turn")}`;
  return drawnWhenOpened("case-steps", summary, () => placesList(places, "steps", stepItem));
}

// --- the judge's votes -----------------------------------------------------------------------

// A vote as the reports label it: `pass`, `fail`, or `invalid` (the judge answered no verdict,
// and its reason is what it said instead).
const voteLabel = (vote) => (vote.valid === false || vote.pass === null ? "invalid" : vote.pass ? "pass" : "fail");

function voteItem(vote) {
  const label = voteLabel(vote);
  const item = element("li", "vote");
  item.dataset.vote = label;
  const reason = element("span", "vote-reason", vote.reason ?? "");
  reason.dir = "auto";
  item.append(element("span", "vote-label", label), " ", reason);
  return item;
}

// "Judge: 3 votes, 1 invalid", the votes listed when opened under the turn (or the whole
// conversation) each graded; null when the judge graded nothing the record keeps.
export function votesOf(found) {
  const places = placesOf(found, (turn) => turn.judge, (repeat) => repeat.judge);
  if (!places.length) return null;
  const votes = places.flatMap(({ items }) => items);
  const invalid = votes.filter((vote) => voteLabel(vote) === "invalid").length;
  const summary = `Judge: ${plural(votes.length, "vote")}${invalid ? `, ${invalid} invalid` : ""}`;
  return drawnWhenOpened("case-judge", summary, () => placesList(places, "votes", voteItem));
}
