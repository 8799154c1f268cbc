// The keyboard beyond each control's own keys: the skip link to the conversation, the focus
// given back to the thread after a rename or an archive, and the list of shortcuts (? outside
// a text field, or Ctrl+/ anywhere; Esc closes it, as any modal dialog).

import { $ } from "./page.js";

// The thread's place for the focus: its composer when it can be written in and is shown, else
// its heading (focusable by script only); on a phone's list, where neither is shown, the first
// thread to open, or New chat.
export function focusThread() {
  const composer = $("composer-body");
  if (!composer.disabled && composer.checkVisibility()) composer.focus();
  else if ($("thread-title").checkVisibility()) $("thread-title").focus();
  else ($("threads").querySelector("button") ?? $("new-chat")).focus();
}

// A text field takes `?` as text: only outside one does it open the list.
function typing(target) {
  return target instanceof HTMLElement
    && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
}

function openShortcuts() {
  const dialog = $("shortcuts");
  if (!dialog.open) dialog.showModal();
}

export function wireKeys() {
  // The link's address would be taken for a place (place.js): the focus moves, the address stays.
  $("skip-link").addEventListener("click", (event) => {
    event.preventDefault();
    focusThread();
  });
  document.addEventListener("keydown", (event) => {
    if (event.isComposing || event.altKey) return;
    const ctrlSlash = (event.ctrlKey || event.metaKey) && event.key === "/";
    const question = event.key === "?" && !event.ctrlKey && !event.metaKey && !typing(event.target);
    if (!ctrlSlash && !question) return;
    event.preventDefault();
    openShortcuts();
  });
}
