// What the assistant did while answering a turn (SPEC §7.2): one compact card per step, in the
// order it was asked for — a line read at a glance ("Created task #12 · book the photographer"),
// with the tool, its arguments and its result folded under it. A turn's cards sit under its
// reply, or under the turn itself while no reply is shown. They come from the message shape's
// `steps` on load and live from `reply.step` frames, keyed by turn and `call_id`: a call's
// ended card takes the place of its started one.

import { element, listener } from "./page.js";

const turns = new Map(); // turn id → {steps: Map(call_id → step), list, turnItem, replyItem}

// The tester's threads are the only threads its page shows (R1), and a test conversation never
// creates a task (R15): every create_task refused there is refused for that reason.
const refusedAsTest = (step) => listener === "tester" && step.tool === "create_task";

// One line, for the card and for the export.
export function stepLine(step) {
  const result = step.result ?? {};
  const detail = oneLine(result.detail ?? result.error ?? step.code ?? "");
  if (!step.outcome) return `Calling ${step.tool}…`;
  if (step.outcome === "error") return `Not run · ${detail}`;
  if (step.outcome === "refused") {
    return refusedAsTest(step) ? "Refused · a test conversation creates no task" : `Refused · ${detail}`;
  }
  if (step.tool === "create_task") return `Created task #${result.task} · ${oneLine(result.title ?? "")}`;
  // To another instance it is a consultation (R23), whose answer follows in the thread.
  if (step.tool === "send_message") return result.to === "human" ? "Sent to human" : `Asked ${result.to}`;
  if (step.tool === "ask_human") return `Asked the human · decision #${result.decision}`;
  return `Ran ${step.tool}`;
}

function oneLine(text) {
  return String(text).split(/\s+/).filter(Boolean).join(" ");
}

// In the order the model asked for them: by round, then as they started.
function inOrder(a, b) {
  return (a.round ?? 0) - (b.round ?? 0)
    || (Date.parse(a.started_at) || 0) - (Date.parse(b.started_at) || 0)
    || String(a.call_id).localeCompare(String(b.call_id));
}

const pretty = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));

function folded(label, value) {
  const part = element("div", "step-part");
  part.append(element("span", "step-label", label), element("pre", "step-value", pretty(value)));
  return part;
}

function renderCard(step) {
  const card = element("li", "step");
  card.dataset.callId = step.call_id;
  card.dataset.outcome = step.outcome ?? "running";
  const details = element("details");
  const summary = element("summary", "step-line", stepLine(step));
  summary.dir = "auto";
  details.append(summary, folded("Tool", step.tool), folded("Arguments", step.arguments));
  if (step.outcome) details.append(folded("Result", step.result));
  card.append(details);
  return card;
}

function turnOf(turnId) {
  if (!turns.has(turnId)) {
    const list = element("ol", "steps");
    list.setAttribute("aria-label", "What the assistant did");
    turns.set(turnId, { steps: new Map(), list, turnItem: null, replyItem: null });
  }
  return turns.get(turnId);
}

// The cards go inside the reply when it is shown, else on the assistant's side right after the
// turn, in a row of their own.
function place(turnId, turn) {
  if (!turn.steps.size) return;
  const holder = turn.list.parentElement?.classList.contains("steps-holder") ? turn.list.parentElement : null;
  if (turn.replyItem) {
    if (turn.list.parentElement !== turn.replyItem) turn.replyItem.append(turn.list);
    holder?.remove();
  } else if (turn.turnItem && !holder) {
    const row = element("li", "steps-holder");
    row.dataset.stepsFor = turnId;
    // Before a stopped reply's text (turn id + 0.5) and whatever comes after the turn: rows.js
    // places each new row after the last item whose id is lower.
    row.dataset.id = String(turnId + 0.25);
    row.append(turn.list);
    turn.turnItem.after(row);
  }
}

function draw(turn) {
  const cards = [...turn.steps.values()].sort(inOrder).map(renderCard);
  turn.list.replaceChildren(...cards);
}

// A step of turn `turnId`, started (outcome null) or ended. A start that arrives after its end
// changes nothing.
export function showStep(turnId, step) {
  const turn = turnOf(turnId);
  const known = turn.steps.get(step.call_id);
  if (known?.outcome && !step.outcome) return;
  turn.steps.set(step.call_id, step);
  draw(turn);
  place(turnId, turn);
}

// A message shown in the thread as `item`: a turn brings its finished steps, a reply gives its
// turn's cards their place.
export function noteMessage(message, item) {
  if (!item) return;
  if (message.class === "RESULT" && message.in_reply_to !== null && message.in_reply_to !== undefined) {
    const turn = turnOf(message.in_reply_to);
    turn.replyItem = item;
    place(message.in_reply_to, turn);
  } else if (message.class === "REQUEST") {
    const turn = turnOf(message.id);
    turn.turnItem = item;
    const finished = (message.steps ?? []).filter((step) => !turn.steps.get(step.call_id)?.outcome);
    if (finished.length) {
      for (const step of finished) turn.steps.set(step.call_id, step);
      draw(turn);
    }
    place(message.id, turn);
  }
}

export function forgetSteps() {
  turns.clear();
}
