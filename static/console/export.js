// A thread's export: every message of the open thread with its reply state and its
// steps (SPEC §7.2), as
// Markdown or as JSON, downloaded as a file; or the thread as a test case, a suite file whose
// turns send what its owner sent (docs/suite-file.md). Built here from the thread's messages API, every
// page of it, so it goes through the same checks as reading the thread (R1, both listeners'
// gates) and needs no route of its own (docs/decisions/console.md).

import { get, query } from "./api.js";
import { me, readableTime, state, writerOf } from "./page.js";
import { stepLine } from "./steps.js";

const PAGE_SIZE = 500; // the API's largest page (SPEC §6)

// Every message of thread `id`, oldest first: pages after the last id read until a short page.
export async function allMessages(id) {
  const rows = [];
  let after = 0;
  for (;;) {
    const { messages } = await get(query(`/api/chat/threads/${id}/messages`, { after, limit: PAGE_SIZE }));
    rows.push(...messages);
    if (messages.length < PAGE_SIZE) return rows;
    after = messages[messages.length - 1].id;
  }
}

// The fields a reader of an export needs; the rest of the shape is the API's.
const FIELDS = [
  "id", "from_role", "to_role", "class", "body", "created_at", "in_reply_to", "version_of", "reply_state",
  "retry_at", "failure", "partial", "model", "finish_reason", "usage", "steps",
];

function exported(message) {
  const row = {};
  for (const field of FIELDS) if (field in message) row[field] = message[field];
  return row;
}

export function asJson(thread, messages) {
  const document = {
    thread: { id: thread.id, name: thread.name, project: thread.project, created_at: thread.created_at },
    exported_at: new Date().toISOString(),
    messages: messages.map(exported),
  };
  return `${JSON.stringify(document, null, 2)}\n`;
}

// A turn's state as a line under it: the answered ones say nothing more than their reply.
function stateLine(message) {
  if (!message.reply_state || message.reply_state === "answered") return "";
  let line = `*Reply: ${message.reply_state}`;
  if (message.failure) line += ` — ${message.failure}`;
  if (message.reply_state === "retrying" && message.retry_at) line += ` (next attempt ${readableTime(message.retry_at)})`;
  line += "*";
  if (message.partial) line += `\n\n> ${message.partial.split("\n").join("\n> ")}`;
  return line;
}

// `text` as inline code, fenced with more backticks than it holds in a row.
function code(text) {
  const longest = Math.max(0, ...(text.match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(longest + 1);
  const pad = text.startsWith("`") || text.endsWith("`") ? " " : "";
  return `${fence}${pad}${text}${pad}${fence}`;
}

// A turn's steps as a list under it, one line each: tool, arguments, outcome, what came of it.
function stepLines(message) {
  const steps = message.steps ?? [];
  if (!steps.length) return "";
  return steps.map((step) => {
    // JSON on one line: an object, or the text the model sent when it was not one.
    const args = JSON.stringify(step.arguments ?? null);
    return `- Step ${code(step.tool)} ${code(args)} · ${step.outcome ?? "running"} · ${stepLine(step)}`;
  }).join("\n");
}

// A document for people: each message under a plain heading that says who wrote it, as the
// thread does ("You", "assistant"), its time on the line below in the reader's own time zone.
// The JSON export keeps the API's ISO times, for programs.
export function asMarkdown(thread, messages) {
  const parts = [`# ${thread.name}`, `Thread ${thread.id}, exported ${readableTime(new Date())}.`];
  for (const message of messages) {
    let when = `*${readableTime(message.created_at)}`;
    if (message.finish_reason === "length") when += " · cut off";
    parts.push(`## ${writerOf(message)}`, `${when}*`, message.body);
    const line = stateLine(message);
    if (line) parts.push(line);
    const steps = stepLines(message);
    if (steps) parts.push(steps);
  }
  return `${parts.join("\n\n")}\n`;
}

// --- the thread as a test case ---------------------------------------------------------------

// A TOML basic string: JSON's escapes are TOML's, but for DEL, which TOML wants escaped too, and
// a lone surrogate, which neither can carry (U+FFFD in its place).
function tomlString(text) {
  return JSON.stringify(text.toWellFormed()).replace(/\u007f/g, "\\u007F");
}

// At most `limit` characters of `text`, without control characters (a suite's names refuse them).
function clipped(text, limit) {
  const chars = [...text.replace(/[\p{Cc}\p{Cf}]+/gu, " ").trim()];
  return chars.length > limit ? `${chars.slice(0, limit - 1).join("").trimEnd()}…` : chars.join("");
}

// The first line of a reply, at most 60 characters cut at a word: what `contains` could ask.
function firstWords(body) {
  const line = body.split("\n").map((part) => part.trim()).find(Boolean) ?? "";
  if ([...line].length <= 60) return line;
  const cut = [...line].slice(0, 60).join("");
  return cut.slice(0, cut.lastIndexOf(" ") > 20 ? cut.lastIndexOf(" ") : cut.length).trimEnd();
}

// What the reply to `turn` was, as comments: the expectation to fill in, by docs/suite-file.md's
// keys. Left as comments the turn expects a reply within 30 seconds, nothing more.
function expectationLines(turn, reply) {
  if (!reply) {
    const state = turn.reply_state ?? "pending";
    return [`# No reply came (the turn is ${state}). To expect none:`, "# expect = { reply = false }"];
  }
  const lines = [`# The reply then: ${tomlString(clipped(reply.body, 200))}`];
  const words = firstWords(reply.body);
  const checks = words ? [`contains = [${tomlString(words)}]`] : [];
  if (reply.model) checks.push(`model = ${tomlString(reply.model)}`);
  if (reply.finish_reason) checks.push(`finish_reason = ${tomlString(reply.finish_reason)}`);
  if (checks.length) lines.push(`# expect = { ${checks.join(", ")} }`);
  return lines;
}

// The conversation as it reads (R24): of a turn's versions only the newest, with its reply.
function onPath(messages) {
  const newest = new Map();
  for (const m of messages) {
    if (m.class !== "REQUEST") continue;
    const group = m.version_of ?? m.id;
    newest.set(group, Math.max(newest.get(group) ?? 0, m.id));
  }
  const superseded = new Set(
    messages.filter((m) => m.class === "REQUEST" && newest.get(m.version_of ?? m.id) !== m.id).map((m) => m.id),
  );
  return messages.filter((m) => !superseded.has(m.id) && !superseded.has(m.in_reply_to));
}

// The open thread as a suite file: one case, its turns the owner's messages in order (a
// branch's carried conversation first, each turn's newest version only), each reply under its
// turn as a commented-out expectation. Throws when the owner sent nothing.
export function asSuite(thread, messages, carried = []) {
  const turns = onPath([...carried, ...messages]).filter((message) => message.from_role === me && message.class === "REQUEST" && message.body.trim());
  if (!turns.length) throw new Error("This thread has no message of yours to send: there is no test case to save.");
  const replies = new Map([...carried, ...messages].filter((m) => m.class === "RESULT").map((m) => [m.in_reply_to, m]));
  const name = clipped(thread.name ?? "", 80) || `Thread ${thread.id}`;
  const project = clipped(state.projects.get(thread.project)?.name ?? "", 200) || "Console test cases";
  const lines = [
    `# A test case made from the thread ${tomlString(name)} (thread ${thread.id}) on ${readableTime(new Date())}.`,
    "# Each turn sends what was sent in the thread. Under it, the reply it got then, and an",
    "# expectation to fill in: take the \"# \" off its line to keep it (docs/suite-file.md).",
    "",
    `name = ${tomlString(name)}`,
    `project = ${tomlString(project)}`,
    "",
    "[[cases]]",
    `name = ${tomlString(name)}`,
  ];
  if (/^[A-Za-z0-9_-]{1,100}$/.test(thread.instance ?? "")) lines.push(`instance = ${tomlString(thread.instance)}`);
  for (const turn of turns) {
    lines.push("", "[[cases.turns]]", `send = ${tomlString(turn.body)}`, ...expectationLines(turn, replies.get(turn.id)));
  }
  return `${lines.join("\n")}\n`;
}

// A file name from the thread's name: letters, digits and dashes.
export function fileName(thread, extension) {
  const stem = thread.name.normalize("NFKD").replace(/[^\p{L}\p{N}]+/gu, "-").replace(/^-+|-+$/g, "").slice(0, 60);
  return `${stem || "thread"}-${thread.id}.${extension}`;
}

function download(text, name, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

// The formats: the file's extension and type, and how it is written.
const FORMATS = {
  markdown: { extension: "md", type: "text/markdown", write: asMarkdown },
  json: { extension: "json", type: "application/json", write: asJson },
  suite: { extension: "suite.toml", type: "application/toml", write: asSuite },
};

// Downloads the open thread as `format` ("markdown", "json" or "suite"); throws the API's error,
// or why the thread makes no such file.
export async function exportThread(format) {
  const id = state.threadId;
  if (id === null) return null;
  const thread = state.threads.get(id) ?? { id, name: `Thread ${id}` };
  const messages = await allMessages(id);
  // A branch's test case replays the conversation it carries too (R24).
  const carried = format === "suite" && thread.branched_from
    ? (await get(query(`/api/chat/threads/${id}/carried`, { limit: PAGE_SIZE }))).messages
    : [];
  const { extension, type, write } = FORMATS[format] ?? FORMATS.markdown;
  const name = fileName(thread, extension);
  download(write(thread, messages, carried), name, type);
  return { name, count: messages.length };
}
