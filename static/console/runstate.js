// How the reply to each turn is going (SPEC §7.1): the turn's own mark (stopped, failed with
// its sentence and a way to ask again, retrying with the next attempt's time) and, while any
// turn of the open thread is owed, one line above the composer — "assistant is working… 0:12" —
// with a Stop for this thread only.

import { $, clock, element } from "./page.js";

// The states that are pending work; the others are final (the broker's OWED).
const OWED = new Set(["pending", "working", "retrying"]);
const TICK_MS = 1000;

const turns = new Map(); // turn id → {id, state, retryAt, failure, since, item}
let ticker = null;
// Adds to the mark of a turn whose reply was stopped or failed the ways to ask again
// (versions.js: Regenerate, R24).
let onEnded = () => {};

export function whenEnded(callback) {
  onEnded = callback;
}

export function forgetTurns() {
  turns.clear();
  showRunState();
}

function retryText(turn) {
  const left = turn.retryAt ? (turn.retryAt - Date.now()) / 1000 : 0;
  const at = turn.retryAt ? new Date(turn.retryAt).toLocaleTimeString() : "";
  return left > 0 ? `next attempt at ${at} (in ${clock(left)})` : "next attempt now";
}

function markTurn(turn) {
  const mark = turn.item.querySelector(".turn-state");
  mark.replaceChildren();
  mark.dataset.state = turn.state;
  if (turn.state === "stopped") {
    // A stop mid-reply keeps what was written (stopped.js): the mark says it was cut short.
    mark.append(element("span", "", turn.partial ? "Stopped: the reply was cut short." : "Stopped: no reply."));
  } else if (turn.state === "failed") {
    mark.append(element("span", "", `Failed: ${turn.failure ?? "the assistant could not reply."}`));
  } else if (turn.state === "retrying") {
    const why = turn.failure ? ` after: ${turn.failure}` : "";
    mark.append(element("span", "", `Retrying, ${retryText(turn)}${why}`));
  }
  if (turn.state === "stopped" || turn.state === "failed") onEnded(turn.id, mark);
}

// A turn shown in the thread: its message's `reply_state` (null for messages that are not turns).
export function trackTurn(message, item) {
  if (!message.reply_state) return;
  turns.set(message.id, {
    id: message.id,
    state: message.reply_state,
    retryAt: message.retry_at ? Date.parse(message.retry_at) : null,
    failure: message.failure ?? null,
    partial: message.partial ?? null,
    since: Date.parse(message.created_at) || Date.now(),
    item,
  });
  markTurn(turns.get(message.id));
  showRunState();
}

// A `reply.state` frame, or a RESULT that answers a turn (`answered`).
export function turnChanged(turnId, { state, retry_at: retryAt, failure, partial }) {
  const turn = turns.get(turnId);
  if (!turn) return;
  turn.state = state;
  turn.partial = partial ?? null;
  turn.retryAt = retryAt ? Date.parse(retryAt) : null;
  turn.failure = failure ?? null;
  markTurn(turn);
  showRunState();
}

export function turnState(turnId) {
  return turns.get(turnId)?.state ?? null;
}

function owedTurns() {
  return [...turns.values()].filter((turn) => OWED.has(turn.state));
}

function runText(owed) {
  const first = owed[0];
  const elapsed = clock((Date.now() - first.since) / 1000);
  const newest = owed[owed.length - 1];
  if (newest.state === "retrying") return `assistant is retrying… ${elapsed}, ${retryText(newest)}`;
  if (owed.some((turn) => turn.state === "working")) return `assistant is working… ${elapsed}`;
  return `waiting for the assistant… ${elapsed}`;
}

export function showRunState() {
  const owed = owedTurns();
  $("run-state").hidden = owed.length === 0;
  if (owed.length === 0) {
    clearInterval(ticker);
    ticker = null;
    return;
  }
  $("run-text").textContent = runText(owed);
  for (const turn of owed.filter((item) => item.state === "retrying")) markTurn(turn);
  ticker ??= setInterval(showRunState, TICK_MS);
}
