// A branch (R24): a thread that carries another's conversation up to a message. Its header says
// "Branched from ‹name›", and its log shows the carried conversation first, set apart and muted
// under "From ‹name›" (each a link that opens the source thread), then its own messages.

import { get, query } from "./api.js";
import { showNewest } from "./follow.js";
import { plain, rendered } from "./markdown.js";
import { $, element, me, say, state, timeOf, writerOf } from "./page.js";

const CARRIED_LIMIT = 500;
// What a branch with no message of its own yet says under what it carries.
export const CONTINUE = "Continue the conversation below.";

function sourceLink(source) {
  const link = element("a", "source-link", source.name);
  link.dir = "auto";
  // The thread named alone opens in its own project (place.js).
  link.href = `#thread=${source.thread}`;
  return link;
}

function carriedItem(message) {
  const item = element("li", message.from_role === me ? "message mine" : "message");
  item.dataset.from = message.from_role;
  item.dataset.class = message.class ?? "";
  const meta = element("div", "meta");
  meta.append(element("span", "writer", writerOf(message)), " · ", timeOf(message.created_at));
  item.append(meta, message.class === "RESULT" ? rendered(message.body) : plain(message.body));
  return item;
}

export function forgetCarried() {
  $("thread-origin").hidden = true;
  $("carried").hidden = true;
  $("carried-list").replaceChildren();
}

// Thread `id` opened: when it is a branch, where it came from and what it carries; `shown` is
// told once that is on screen.
export async function showCarried(id, shown) {
  forgetCarried();
  const source = state.threads.get(id)?.branched_from;
  if (!source) return;
  $("thread-origin").replaceChildren("Branched from ", sourceLink(source));
  $("thread-origin").hidden = false;
  let rows;
  try {
    ({ messages: rows } = await get(query(`/api/chat/threads/${id}/carried`, { limit: CARRIED_LIMIT })));
  } catch (error) {
    if (state.threadId === id) say($("messages-state"), error.message, "error");
    return;
  }
  if (state.threadId !== id || !rows.length) return;
  $("carried-heading").replaceChildren("From ", sourceLink(source));
  $("carried-list").replaceChildren(...rows.map(carriedItem));
  $("carried").hidden = false;
  shown();
  // Opened at the bottom: the thread's own newest line, below what it carries.
  showNewest();
}
