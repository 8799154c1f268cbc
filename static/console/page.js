// The page itself: which Console this is, its elements, and small helpers every part uses.

const page = document.body.dataset;
export const listener = page.listener === "tester" ? "tester" : "human";
// MOSAIC_CONSOLE_SEND, the human Console's switch (L2); the tester's page does not carry it.
const sendEnabled = page.sendEnabled === "true";
// The tester's composer is always enabled (SPEC §8); the human's follows its switch.
export const canSend = listener === "tester" || sendEnabled;
// The actor's own address on the bus: its turns are "mine".
export const me = listener;
// The stored history of conversation-test runs is the tester listener's alone (the human
// listener has no such routes): only the tester's page shows it, or asks for it.
export const hasTestRuns = listener === "tester";

// The Console's words for the ends of a message or a row: the reader is "You", every other end
// is named by its role (an instance's name, "tester"). The broker's stored labels (R16,
// "human to assistant: …") are the contract and stay as they are; these are for reading.
export function nameOf(role, { first = false } = {}) {
  if (role !== me) return role;
  return first ? "You" : "you";
}

// "You to assistant", "assistant to you", "assistant to reviewer".
export const endsOf = (from, to) => `${nameOf(from, { first: true })} to ${nameOf(to)}`;

// Who wrote a message, in words: "You" for the reader's own, the instance's name for what it
// wrote to the reader, both ends for what two instances said to each other (a consultation, R23).
export function writerOf(message) {
  if (message.from_role === me) return "You";
  if (message.to_role === me) return message.from_role;
  return endsOf(message.from_role, message.to_role);
}

export const $ = (id) => document.getElementById(id);

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

export function button(text, className = "", label = "") {
  const node = element("button", className, text);
  node.type = "button";
  if (label) node.setAttribute("aria-label", label);
  return node;
}

export function say(node, text, kind = "info") {
  node.textContent = text;
  node.dataset.kind = kind;
}

const sameDay = (a, b) => a.toDateString() === b.toDateString();

// The time of day for today's times, the date and time for earlier ones (or always,
// `withDate`); the full date and time on hover.
export function timeOf(iso, { withDate = false } = {}) {
  const at = new Date(iso);
  const dated = withDate || !sameDay(at, new Date());
  const shown = dated ? at.toLocaleString([], { dateStyle: "medium", timeStyle: "short" }) : at.toLocaleTimeString();
  const time = element("time", "", shown);
  time.dateTime = iso;
  time.title = at.toLocaleString();
  return time;
}

// A moment as a person reads it, in the reader's own time zone and language: "4 Dec 2026,
// 14:03:05" (exports, where a time stands alone).
export const readableTime = (iso) => new Date(iso).toLocaleString([], { dateStyle: "medium", timeStyle: "medium" });

// "0:07", "1:02:03": a duration of whole seconds as a clock shows it.
export function clock(seconds) {
  const whole = Math.max(0, Math.floor(seconds));
  const h = Math.floor(whole / 3600);
  const m = Math.floor((whole % 3600) / 60);
  const s = String(whole % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${s}` : `${m}:${s}`;
}

export function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  // randomUUID needs a secure context; a key is any 1–200 visible ASCII characters.
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

export function cookie(name) {
  const pair = document.cookie.split("; ").find((item) => item.startsWith(`${name}=`));
  return pair ? decodeURIComponent(pair.slice(name.length + 1)) : "";
}

// Shared state of the page's parts.
export const state = {
  projectId: null,
  // The business's projects by id, as last listed (their `creator` says whose they are).
  projects: new Map(),
  threads: new Map(),
  threadId: null,
  // What the main pane shows: "list" (no thread), "thread", or "runs" (the test runs; the
  // tester's only), with `testRunId` the run open there (null: the list of runs).
  view: "list",
  testRunId: null,
  signedOut: false,
};
