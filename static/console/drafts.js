// What is typed in the composer, kept per thread in this browser (localStorage): it survives a
// reload or a sign-out, and never follows the reader to another thread.

import { listener } from "./page.js";

const key = (threadId) => `mosaic.draft.${listener}.${threadId}`;

export function loadDraft(threadId) {
  try {
    return localStorage.getItem(key(threadId)) ?? "";
  } catch {
    return ""; // storage refused (private mode, full): drafts last as long as the page
  }
}

export function saveDraft(threadId, text) {
  try {
    if (text) localStorage.setItem(key(threadId), text);
    else localStorage.removeItem(key(threadId));
  } catch {
    // as above: nothing kept, nothing lost from the page itself
  }
}
