// The thread scrolls like a chat: while the reader is at the bottom, whatever lands
// or grows there — a message, a streamed draft, a turn's mark, the composer or the on-screen
// keyboard taking room — keeps the last line of the newest message in view. A reader who
// scrolled up stays where they are, and when a row arrives below the view (a message, a reply
// being written that grew) a "New messages ↓" button takes them down. The reader's own send
// always shows it.
//
// One observer of the list (and of the sizes of the list and its scroller) follows every kind of
// change, so no part that adds to the thread has to remember to scroll. The button is told by
// the thread itself (`arrived`): a change that brings nothing new — a finished reply taking its
// draft's place, Copy saying "Copied", a turn's mark redrawn — never shows it.

import { $ } from "./page.js";

// How close to the bottom still counts as "at the bottom", in CSS pixels.
const AT_BOTTOM_PX = 24;

const scroller = $("messages-log");
const list = $("messages");
const jump = $("new-messages");

// Whether the view follows the newest line: true until the reader scrolls away from it.
let pinned = true;

const distance = () => scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight;

function toBottom() {
  scroller.scrollTop = scroller.scrollHeight;
}

function showJump(shown) {
  jump.hidden = !shown;
}

// Follows the newest line from now on, and shows it.
export function showNewest() {
  pinned = true;
  showJump(false);
  toBottom();
}

// The reader moved (or a scroll of ours ended): at the bottom, the view follows again.
scroller.addEventListener("scroll", () => {
  pinned = distance() <= AT_BOTTOM_PX;
  if (pinned) showJump(false);
});

// Content changed: followed while pinned. An emptied list (another thread opening) starts pinned.
new MutationObserver(() => {
  if (!list.childElementCount) showNewest();
  else if (pinned) toBottom();
}).observe(list, { childList: true, subtree: true, characterData: true });

// A row arrived (or the reply being written grew): announced by the button when the reader is
// scrolled up and the row ends below the view.
export function arrived(item) {
  if (pinned || !item?.isConnected) return;
  if (item.getBoundingClientRect().bottom > scroller.getBoundingClientRect().bottom + 1) showJump(true);
}

// Sizes changed (the window, the composer growing, the run-state line, the keyboard): the
// newest line stays in view while pinned.
const resized = new ResizeObserver(() => {
  if (pinned) toBottom();
});
resized.observe(scroller);
resized.observe(list);

jump.addEventListener("click", () => {
  showNewest();
  scroller.focus({ preventScroll: true });
});

// On a phone the on-screen keyboard shrinks the visual viewport: the page's height follows it
// (`--viewport-height`, chat.css), so the composer stays above the keyboard and the newest line
// above the composer.
const viewport = window.visualViewport;
if (viewport) {
  const fit = () => {
    // A pinch-zoom also shrinks the visual viewport: the page keeps its height then.
    if (viewport.scale > 1.01) document.documentElement.style.removeProperty("--viewport-height");
    else document.documentElement.style.setProperty("--viewport-height", `${Math.round(viewport.height)}px`);
    if (pinned) toBottom();
  };
  viewport.addEventListener("resize", fit);
  fit();
}
