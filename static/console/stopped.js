// A turn a stop ended keeps what its reply had written (SPEC §7.1): shown right after
// the turn, on the assistant's side, marked "stopped" — live from the `stopped` frame and after
// a reload from the message shape's `partial`. It is never a reply: the turn has none.

import { rendered } from "./markdown.js";
import { element } from "./page.js";

// Shows `text` as the stopped reply to the turn shown as `turnItem` (id `turnId`).
export function showPartial(turnItem, turnId, text) {
  if (!turnItem || !text) return;
  let item = turnItem.parentElement?.querySelector(`[data-partial-for="${turnId}"]`);
  if (!item) {
    item = element("li", "message partial");
    item.dataset.partialFor = turnId;
    // Between its turn and the message after it: rows.js places each new row after the last
    // item whose id is lower.
    item.dataset.id = String(turnId + 0.5);
    const meta = element("div", "meta", "assistant · ");
    meta.append(element("span", "partial-mark", "stopped"));
    item.append(meta, element("div", "body"));
    // After the turn's steps when they are shown beside it (steps.js): what it did, then what
    // it had written.
    const steps = turnItem.nextElementSibling;
    (steps?.dataset.stepsFor === String(turnId) ? steps : turnItem).after(item);
  }
  item.querySelector(".body").replaceWith(rendered(text));
}
