// What a reply recorded, folded under it behind "Details": the instance that wrote it, the model,
// its prompt and completion tokens, the time to its first token, how long it took and why it
// ended (the message's own fields, SPEC §7.1); and the open thread's token total beside its
// title, from the single thread's read (`usage`), asked again as each reply arrives.

import { get } from "./api.js";
import { $, button, element, state } from "./page.js";

const NOT_RECORDED = "not recorded";

const count = (value) => (value === null || value === undefined ? NOT_RECORDED : value.toLocaleString());

// Milliseconds as seconds, to the hundredth under ten seconds: "0.25 s", "12.4 s".
function seconds(ms) {
  if (ms === null || ms === undefined) return NOT_RECORDED;
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

function facts(message) {
  return [
    ["Instance", message.from_role],
    ["Model", message.model ?? NOT_RECORDED],
    ["Prompt tokens", count(message.usage?.prompt_tokens)],
    ["Completion tokens", count(message.usage?.completion_tokens)],
    ["Time to first token", seconds(message.first_token_ms)],
    ["Duration", seconds(message.duration_ms)],
    ["Finish reason", message.finish_reason ?? NOT_RECORDED],
  ];
}

// The "Details" button for the reply's line and the list it unfolds, hidden until asked.
export function replyDetails(message) {
  const list = element("dl", "reply-details");
  list.id = `reply-details-${message.id}`;
  list.hidden = true;
  for (const [name, value] of facts(message)) {
    const row = element("div", "reply-detail");
    row.append(element("dt", "", name), element("dd", "", value));
    list.append(row);
  }
  const toggle = button("Details", "link details-toggle", "");
  toggle.setAttribute("aria-expanded", "false");
  toggle.setAttribute("aria-controls", list.id);
  toggle.addEventListener("click", () => {
    list.hidden = !list.hidden;
    toggle.setAttribute("aria-expanded", String(!list.hidden));
  });
  return { toggle, list };
}

// --- the thread's token total ---------------------------------------------------------------

let asked = 0;

// Shows thread `id`'s token total beside its title (null: none open, nothing shown). An answer
// for a thread no longer open, or older than the last asked, changes nothing.
export async function showThreadUsage(id) {
  const mine = ++asked;
  const shown = $("thread-usage");
  if (id === null) {
    shown.hidden = true;
    return;
  }
  let usage;
  try {
    ({ thread: { usage } } = await get(`/api/chat/threads/${id}`));
  } catch {
    return; // the thread's own read says what is wrong
  }
  if (mine !== asked || state.threadId !== id) return;
  shown.hidden = !usage;
  if (!usage) return;
  shown.textContent = `${usage.total_tokens.toLocaleString()} tokens`;
  shown.title = `This thread's replies: ${usage.prompt_tokens.toLocaleString()} prompt and `
    + `${usage.completion_tokens.toLocaleString()} completion tokens`;
}
