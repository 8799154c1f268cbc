// Just start typing: with no thread open the composer is enabled, and its first send
// makes the thread it goes to, in the project in view or, with none of the reader's own in view,
// in the reader's default project (the server's: `Chats` for the human, created on first use).
// The thread is named from the message's first words, within the name limit, and made unique by
// a suffix when the name is taken (`thread-exists`); it can be renamed like any other.

import { ApiError, write } from "./api.js";
import { isOwnProject } from "./lists.js";
import { $, state } from "./page.js";

// A name is the message's first words: a line of the list, not the message again.
const NAME_WORDS = 8;
const NAME_MOST = 60;
// "(2)" … "(50)": past that, the server's refusal is shown as it is.
const SUFFIXES = 50;

// The name limit is the broker's, carried by the page's fields (STYLE 15).
const nameMax = () => $("thread-name").maxLength > 0 ? $("thread-name").maxLength : 200;

// Characters as the server counts them (code points), never half a surrogate pair.
const cut = (text, most) => Array.from(text).slice(0, most).join("");
const length = (text) => Array.from(text).length;

// "Plan the launch of…" from the first words of `body`: control characters and runs of
// whitespace become one space; whole words while they fit, the first word cut if it alone
// does not.
export function nameFrom(body, limit = nameMax()) {
  const most = Math.min(limit, NAME_MOST);
  // eslint-disable-next-line no-control-regex
  const words = body.replace(/[\u0000-\u001f\u007f-\u009f]/g, " ").trim().split(/\s+/).filter(Boolean);
  let name = "";
  for (const word of words.slice(0, NAME_WORDS)) {
    const next = name ? `${name} ${word}` : word;
    if (length(next) > most) break;
    name = next;
  }
  return name || cut(words[0] ?? "", most) || "New chat";
}

// `name (n)`, the name shortened so that the whole stays within the limit.
export function suffixed(name, n, limit = nameMax()) {
  const suffix = ` (${n})`;
  return `${cut(name, limit - length(suffix)).trimEnd()}${suffix}`;
}

// Makes the thread the first send of `body` goes to, and answers it: in the project in view
// when it is the reader's own, else, with no project named, in the reader's default project,
// which the server finds or makes (the human's never one the tester made).
export async function startThread(body) {
  const project = isOwnProject(state.projectId) ? state.projectId : undefined;
  const name = nameFrom(body);
  for (let n = 1; ; n += 1) {
    try {
      const asked = n === 1 ? name : suffixed(name, n);
      const { thread } = await write("/api/chat/threads", { project, name: asked });
      return thread;
    } catch (error) {
      if (!(error instanceof ApiError && error.code === "thread-exists") || n >= SUFFIXES) throw error;
    }
  }
}
