// Versions of the reader's turns (R24): an edited or regenerated turn is one turn group — its
// first version and every message whose `version_of` names it. The thread shows each group once,
// at its newest version by default, with "‹ 2/3 ›" on the turn to page through the others; a
// version shown brings its own reply (its state, its partial text, its steps), the others and
// theirs stay in the list, hidden (rows.js keeps every row in id order; follow.js measures only
// what is seen).
//
// The actions: Edit on each of the reader's turns (the text in place: Save, Cancel), and on each
// reply Regenerate, "Regenerate with…" another instance, and "Branch from here". An edit or a
// regenerate of the thread's latest turn is a new version here; any other lands in a new thread
// (a branch), which is opened.

import { get, write } from "./api.js";
import { $, button, canSend, element, me, newKey, say, state } from "./page.js";
import { whenEnded } from "./runstate.js";

const list = $("messages");

// What the thread does with an answer (set by thread.js: show a message of the open thread) and
// the page (console.js: list and open a thread just made).
const listeners = { shown: () => {}, branched: async () => {} };
export function onVersionEvents(handlers) {
  Object.assign(listeners, handlers);
}

const messages = new Map(); // message id → the message shown (the reader's turns and replies)
const chosen = new Map(); // group id → the version the reader chose (none: the newest)
const editKeys = new Map(); // turn id → {body, key}: an edit saved again after a failure
let instances = null; // the business's instances, read once

export function forgetVersions() {
  messages.clear();
  chosen.clear();
  editKeys.clear();
}

const isTurn = (message) => message.from_role === me && message.class === "REQUEST";
const groupOf = (message) => message.version_of ?? message.id;

// The row of the list a thread row belongs to: a turn, or what answers it (its reply, its
// stopped text, its draft, its steps).
function turnOfRow(row) {
  const { group, id, replyTo, partialFor, draftFor, stepsFor } = row.dataset;
  const turn = group !== undefined ? id : replyTo ?? partialFor ?? draftFor ?? stepsFor;
  return turn === undefined ? null : Number(turn);
}

function versionsByGroup() {
  const groups = new Map();
  for (const row of list.querySelectorAll(":scope > li[data-group]")) {
    const group = Number(row.dataset.group);
    if (!groups.has(group)) groups.set(group, []);
    groups.get(group).push(Number(row.dataset.id));
  }
  for (const ids of groups.values()) ids.sort((a, b) => a - b);
  return groups;
}

function shownOf(group, ids) {
  const wanted = chosen.get(group);
  return ids.includes(wanted) ? wanted : ids[ids.length - 1];
}

// Hides every version but the shown one of each group, with what answers it, and writes each
// turn's pager.
export function showVersions() {
  const hidden = new Set();
  for (const [group, ids] of versionsByGroup()) {
    const shown = shownOf(group, ids);
    for (const id of ids) {
      if (id !== shown) hidden.add(id);
      const pager = list.querySelector(`:scope > li[data-id="${id}"] .versions`);
      if (pager) drawPager(pager, group, ids, id);
    }
  }
  for (const row of list.children) row.classList.toggle("superseded", hidden.has(turnOfRow(row)));
}

// Rows added by any part of the thread (a reply, a draft, a stopped text, steps) take their
// version's visibility.
new MutationObserver(showVersions).observe(list, { childList: true });

function drawPager(pager, group, ids, id) {
  pager.hidden = ids.length < 2;
  const at = ids.indexOf(id);
  const [previous, text, next] = pager.children;
  text.textContent = `${at + 1}/${ids.length}`;
  previous.disabled = at === 0;
  next.disabled = at === ids.length - 1;
  previous.onclick = () => showVersion(group, ids[at - 1]);
  next.onclick = () => showVersion(group, ids[at + 1]);
}

// The reader paged to another version: it is shown in the group's place, the focus on its pager.
function showVersion(group, id) {
  if (id === undefined) return;
  chosen.set(group, id);
  showVersions();
  const pager = list.querySelector(`:scope > li[data-id="${id}"] .versions`);
  const button = [...pager.querySelectorAll("button")].find((item) => !item.disabled);
  button?.focus();
}

function pagerOf() {
  const pager = element("span", "versions");
  pager.setAttribute("role", "group");
  pager.setAttribute("aria-label", "Versions of this message");
  pager.append(button("‹", "link", "Previous version"), element("span", "version-count"), button("›", "link", "Next version"));
  pager.hidden = true;
  return pager;
}

function notice(item) {
  return item.querySelector(":scope > .turn-tools .notice");
}

// A new turn answered by edit or regenerate: shown here when it is a version in this thread,
// else its thread (a branch) is listed and opened.
async function landed(answer, threadId) {
  if (answer.thread.id !== threadId) {
    await listeners.branched(answer.thread);
    return null;
  }
  chosen.delete(groupOf(answer.message));
  if (state.threadId === threadId) listeners.shown(answer.message);
  showVersions();
  return list.querySelector(`:scope > li[data-id="${answer.message.id}"]`);
}

async function act(item, doing, work) {
  const tools = item.querySelectorAll("button");
  const threadId = state.threadId;
  for (const control of tools) control.disabled = true;
  say(notice(item), doing);
  try {
    await work(threadId);
    if (item.isConnected) say(notice(item), "");
  } catch (error) {
    say(notice(item), error.message, "error");
  } finally {
    for (const control of tools) control.disabled = false;
    if (item.isConnected) showVersions();
  }
}

// --- edit ------------------------------------------------------------------------------------

function closeEdit(item, form) {
  form.remove();
  item.querySelector(":scope > .body").hidden = false;
  item.querySelector(":scope > .turn-tools").hidden = false;
}

function startEdit(item, message) {
  if (item.querySelector(":scope > .edit-form")) return;
  const form = element("form", "edit-form");
  const label = element("label", "", "Edit your message");
  const area = element("textarea", "edit-body");
  area.id = `edit-${message.id}`;
  label.htmlFor = area.id;
  area.value = message.body;
  area.dir = "auto";
  area.rows = Math.min(8, Math.max(2, message.body.split("\n").length));
  area.maxLength = $("composer-body").maxLength;
  const save = element("button", "primary", "Save");
  save.type = "submit";
  const cancel = button("Cancel");
  const actions = element("div", "form-actions");
  actions.append(save, cancel);
  const said = element("p", "notice");
  said.setAttribute("role", "status");
  form.append(label, area, actions, said);
  const back = () => item.querySelector(":scope > .turn-tools .edit")?.focus();
  const cancelEdit = () => {
    closeEdit(item, form);
    back();
  };
  cancel.addEventListener("click", cancelEdit);
  area.addEventListener("keydown", (event) => {
    if (event.isComposing) return;
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    } else if (event.key === "Escape") {
      event.preventDefault();
      cancelEdit();
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = area.value;
    if (!body.trim() || save.disabled) return;
    if (body === message.body) {
      cancelEdit();
      return;
    }
    const threadId = state.threadId;
    const earlier = editKeys.get(message.id);
    const key = earlier?.body === body ? earlier.key : newKey();
    editKeys.set(message.id, { body, key });
    save.disabled = true;
    say(said, "Saving…");
    try {
      const path = `/api/chat/threads/${threadId}/messages/${message.id}/edit`;
      const answer = await write(path, { body }, key);
      editKeys.delete(message.id);
      closeEdit(item, form);
      const shown = await landed(answer, threadId);
      (shown ?? item).querySelector(":scope > .turn-tools .edit")?.focus();
    } catch (error) {
      say(said, error.message, "error");
    } finally {
      save.disabled = false;
    }
  });
  item.querySelector(":scope > .body").hidden = true;
  item.querySelector(":scope > .turn-tools").hidden = true;
  item.querySelector(":scope > .body").after(form);
  area.focus();
  area.setSelectionRange(area.value.length, area.value.length);
}

// --- regenerate and branch ---------------------------------------------------------------------

function regenerate(item, messageId, instance = null) {
  const doing = instance ? `Asking ${instance}…` : "Regenerating…";
  return act(item, doing, async (threadId) => {
    const path = `/api/chat/threads/${threadId}/messages/${messageId}/regenerate`;
    await landed(await write(path, instance ? { instance } : {}), threadId);
  });
}

function branch(item, messageId) {
  return act(item, "Branching…", async (threadId) => {
    const { thread } = await write(`/api/chat/threads/${threadId}/branch`, { message: messageId });
    await listeners.branched(thread);
  });
}

async function otherInstances(current) {
  instances ??= (await get("/api/chat/instances")).instances;
  return instances.filter((instance) => instance.name !== current);
}

// "Regenerate with…": a menu of the business's other instances, each a button.
function instanceMenu(item, messageId, current) {
  const wrap = element("span", "instance-menu");
  const toggle = button("Regenerate with…", "link");
  toggle.setAttribute("aria-expanded", "false");
  const menu = element("span", "instance-choices");
  menu.id = `instances-${messageId}`;
  menu.hidden = true;
  toggle.setAttribute("aria-controls", menu.id);
  const close = () => {
    menu.hidden = true;
    toggle.setAttribute("aria-expanded", "false");
  };
  toggle.addEventListener("click", async () => {
    if (!menu.hidden) {
      close();
      return;
    }
    let others;
    try {
      others = await otherInstances(current);
    } catch (error) {
      say(notice(item), error.message, "error");
      return;
    }
    const choices = others.map((instance) => {
      const choice = button(instance.name, "link", `Regenerate with ${instance.name}`);
      choice.addEventListener("click", () => {
        close();
        regenerate(item, messageId, instance.name);
      });
      return choice;
    });
    menu.replaceChildren(...(choices.length ? choices : [element("span", "", "No other instance to ask.")]));
    menu.hidden = false;
    toggle.setAttribute("aria-expanded", "true");
    menu.querySelector("button")?.focus();
  });
  wrap.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || menu.hidden) return;
    event.preventDefault();
    event.stopPropagation();
    close();
    toggle.focus();
  });
  wrap.append(toggle, menu);
  return wrap;
}

function toolsOf(item) {
  const tools = element("div", "turn-tools");
  const said = element("span", "notice");
  said.setAttribute("role", "status");
  tools.append(said);
  return tools;
}

// The actions of a reply to the reader's turn `turnId`: ask again (here, or another instance in
// a branch) and branch here. `branchable`: the reply is a message of the conversation.
function replyActions(item, messageId, instance, { branchable }) {
  const again = button("Regenerate", "link regenerate");
  again.addEventListener("click", () => regenerate(item, messageId));
  const actions = [again, instanceMenu(item, messageId, instance)];
  if (branchable) {
    const here = button("Branch from here", "link branch");
    here.addEventListener("click", () => branch(item, messageId));
    actions.push(here);
  }
  return actions;
}

// A message shown in the open thread as `item` (thread.js): the reader's turn joins its group
// and gets Edit and its pager; a reply to it gets its actions. A version that arrives newer than
// the others (the send's answer, the stream) becomes the one shown.
export function noteVersion(message, item) {
  if (!item) return;
  messages.set(message.id, message);
  if (isTurn(message)) {
    item.dataset.group = groupOf(message);
    if (message.version_of !== null && message.version_of !== undefined) {
      const newest = Math.max(...versionsByGroup().get(groupOf(message)));
      if (newest === message.id) chosen.delete(groupOf(message));
    }
    // The pager is for reading: shown where sending is off too, Edit is not.
    const tools = toolsOf(item);
    if (canSend) {
      const edit = button("Edit", "link edit");
      edit.addEventListener("click", () => startEdit(item, message));
      tools.prepend(edit);
    }
    tools.prepend(pagerOf());
    item.querySelector(":scope > .body").after(tools);
  } else if (message.class === "RESULT" && message.in_reply_to !== null && message.in_reply_to !== undefined) {
    item.dataset.replyTo = message.in_reply_to;
    const turn = messages.get(message.in_reply_to);
    if (canSend && message.to_role === me && (!turn || isTurn(turn))) {
      const tools = toolsOf(item);
      tools.prepend(...replyActions(item, message.id, message.from_role, { branchable: true }));
      item.querySelector(":scope > .body").after(tools);
    }
  }
  showVersions();
}

// A turn whose reply was stopped or failed (runstate.js) offers, beside its mark, to ask again.
whenEnded((turnId, mark) => {
  const turn = messages.get(turnId);
  const item = list.querySelector(`:scope > li[data-id="${turnId}"]`);
  if (!canSend || !turn || !item) return;
  const tools = element("span", "turn-again");
  tools.append(...replyActions(item, turnId, turn.to_role, { branchable: false }));
  mark.append(" ", tools);
});
