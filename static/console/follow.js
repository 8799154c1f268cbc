// The thread scrolls like a chat: while the reader is at the bottom, whatever lands
// or grows there — a message, a streamed draft, a turn's mark, the composer or the on-screen
// keyboard taking room — keeps the last line of the newest message in view. A reader who
// scrolled up stays where they are, and a "New messages ↓" button takes them down. The
// reader's own send always shows it.
//
// One observer of the list (and of the sizes of the list and its scroller) does this for every
// kind of change, so no part that adds to the thread has to remember to scroll.

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

// Content changed: followed while pinned; otherwise new content at the end is announced by the
// button. An emptied list (another thread opening) starts pinned.
new MutationObserver((changes) => {
  if (!list.childElementCount) {
    showNewest();
    return;
  }
  if (pinned) {
    toBottom();
    return;
  }
  // Older messages go on top ("Load older messages"), and a turn's mark is redrawn while it
  // waits (a retry's clock): neither is new.
  const last = list.lastElementChild;
  const grewAtEnd = changes.some((change) => !change.target.parentElement?.closest(".turn-state")
    && !change.target.classList?.contains("turn-state")
    && (last.contains(change.target) || [...change.addedNodes].includes(last)));
  if (grewAtEnd) showJump(true);
}).observe(list, { childList: true, subtree: true, characterData: true });

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
