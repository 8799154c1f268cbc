// The sidebar: the business's projects, and the actor's own threads in the chosen one (the
// search box above them searches every project: search.js).

import { get, query, write } from "./api.js";
import {
  hasInbox, onThreadChanged, onUnlistedActivity, showThreadActions, showUnreadTotal, threadDetails,
} from "./inbox.js";
import { $, element, listener, say, state } from "./page.js";
import { clearSearch } from "./search.js";

const PAGE_SIZE = 50;
const RELIST_DELAY_MS = 250;

// What choosing does, set by the page (open a project, open a thread).
const choose = { project: () => {}, thread: () => {} };
export function onChoose(handlers) {
  Object.assign(choose, handlers);
}

export function markCurrent(list, id) {
  for (const item of list.querySelectorAll("button[data-id]")) {
    item.setAttribute("aria-current", String(Number(item.dataset.id) === id));
  }
}

// --- projects ------------------------------------------------------------------------------

// The projects the tester made, on the human's Console: listed apart, in a folded group of their
// own, and never the human's default (neither the project opened on arrival nor the one a new
// chat is filed in). Every project is listed to both sides, so they stay reachable.
const apart = (project) => listener === "human" && project.creator === "tester";
export const isOwnProject = (id) => state.projects.has(id) && !apart(state.projects.get(id));

// The project opened on arrival with none in the address: the newest of the reader's own (on the
// tester's Console, the newest of all, as before).
export const defaultProject = (projects) => projects.filter((project) => !apart(project)).at(-1) ?? null;

function projectItem(project) {
  const choice = element("button", "choice");
  const name = element("span", "", project.name);
  name.dir = "auto";
  choice.append(name);
  // The human's list says, in words, which projects the tester made, as the
  // human's trail tags tester traffic.
  if (apart(project)) choice.append(" ", element("span", "tester-tag", "tester"));
  choice.type = "button";
  choice.dataset.id = project.id;
  choice.dataset.creator = project.creator;
  choice.addEventListener("click", () => choose.project(project.id));
  const item = element("li");
  item.append(choice);
  return item;
}

// The chosen project marked in either list; the tester's group unfolds to show it when it is
// one of theirs, and otherwise stays as the reader left it.
export function markProject(id) {
  markCurrent($("projects"), id);
  const group = $("tester-projects-group");
  if (!group) return;
  markCurrent($("tester-projects"), id);
  if (apart(state.projects.get(id) ?? {})) group.open = true;
}

function showProjects(projects) {
  state.projects = new Map(projects.map((project) => [project.id, project]));
  const theirs = projects.filter(apart);
  $("projects").replaceChildren(...projects.filter((project) => !apart(project)).map(projectItem));
  const group = $("tester-projects-group");
  if (group) {
    $("tester-projects").replaceChildren(...theirs.map(projectItem));
    $("tester-projects-count").textContent = `(${theirs.length})`;
    group.hidden = theirs.length === 0;
  }
  say($("projects-state"), projects.length ? "" : "No projects yet. Create one below.");
  markProject(state.projectId);
}

export async function loadProjects() {
  try {
    const { projects } = await get(query("/api/chat/projects", { limit: 500 }));
    showProjects(projects);
    return projects;
  } catch (error) {
    say($("projects-state"), error.message, "error");
    return null;
  }
}

export async function createProject(event) {
  event.preventDefault();
  const input = $("project-name");
  say($("project-notice"), "Creating…");
  try {
    const { project } = await write("/api/chat/projects", { name: input.value });
    input.value = "";
    say($("project-notice"), "");
    await loadProjects();
    choose.project(project.id);
  } catch (error) {
    say($("project-notice"), error.message, "error");
  }
}

// --- threads -------------------------------------------------------------------------------

function fillChoice(choice, thread) {
  const name = element("span", "thread-name", thread.name);
  name.dir = "auto";
  choice.replaceChildren(name, ...threadDetails(thread));
  choice.classList.toggle("has-unread", (thread.unread ?? 0) > 0);
}

function threadItem(thread) {
  const choice = element("button", "choice thread-choice");
  choice.type = "button";
  choice.dataset.id = thread.id;
  fillChoice(choice, thread);
  choice.addEventListener("click", () => choose.thread(thread.id));
  const item = element("li");
  item.append(choice);
  return item;
}

export const showingArchived = () => $("show-archived").checked;

// The inbox's order, as the server lists it (`order=activity`): pinned threads first, then the
// others, each by last activity (the newest message, else the thread's making), newest first.
const activityOf = (thread) => Date.parse(thread.last_message_at ?? thread.created_at) || 0;
function listedBefore(a, b) {
  if (Boolean(a.pinned) !== Boolean(b.pinned)) return Boolean(a.pinned);
  if (activityOf(a) !== activityOf(b)) return activityOf(a) > activityOf(b);
  return a.id > b.id;
}

// Moves a thread's entry to its place in the order; one already in its place is left alone,
// so the focus it holds stays.
function placeInOrder(item, thread) {
  const list = $("threads");
  let next = null;
  for (const other of list.children) {
    const shown = state.threads.get(Number(other.querySelector("button[data-id]")?.dataset.id));
    if (other !== item && shown && listedBefore(thread, shown)) {
      next = other;
      break;
    }
  }
  if (item.nextElementSibling !== next) list.insertBefore(item, next);
}

// A thread changed (read, renamed, archived, pinned, new activity): its entry is redrawn and
// moved to its place, or leaves a list it no longer belongs to.
onThreadChanged((thread) => {
  const choice = $("threads").querySelector(`button[data-id="${thread.id}"]`);
  if (!choice) return;
  if (Boolean(thread.archived) !== showingArchived()) {
    choice.closest("li").remove();
    return;
  }
  fillChoice(choice, thread);
  placeInOrder(choice.closest("li"), thread);
});

// The list shows threads in the server's order; `older` pages append below, leaving out any
// thread already shown (one that moved up meanwhile).
function showThreads(threads, { older = false } = {}) {
  const list = $("threads");
  if (!older) list.replaceChildren();
  for (const thread of threads) {
    state.threads.set(thread.id, thread);
    if (!older || !list.querySelector(`button[data-id="${thread.id}"]`)) list.append(threadItem(thread));
  }
  $("threads-older").hidden = threads.length < PAGE_SIZE;
  if (threads.some(hasInbox)) $("archived-toggle").hidden = false;
  if (state.threadId !== null && $("rename-form").hidden) showThreadActions(state.threadId);
  showUnreadTotal();
  const empty = list.childElementCount === 0;
  say($("threads-state"), empty ? "No threads here yet. Create one below." : "");
  markCurrent(list, state.threadId);
}

function threadsQuery(extra = {}) {
  return query("/api/chat/threads", {
    project: state.projectId,
    archived: showingArchived() ? "true" : "",
    order: "activity",
    limit: PAGE_SIZE,
    ...extra,
  });
}

export async function loadThreads() {
  if (state.projectId === null) return;
  const asked = threadsQuery();
  say($("threads-state"), "Loading threads…");
  try {
    const { threads } = await get(asked);
    if (asked === threadsQuery()) showThreads(threads);
  } catch (error) {
    say($("threads-state"), error.message, "error");
  }
}

// The next page: the threads listed below the last one shown.
export async function loadOlderThreads() {
  const last = [...$("threads").querySelectorAll("button[data-id]")].at(-1);
  if (!last) return;
  try {
    const { threads } = await get(threadsQuery({ below: Number(last.dataset.id) }));
    showThreads(threads, { older: true });
  } catch (error) {
    say($("threads-state"), error.message, "error");
  }
}

// A message in a thread of the reader's that is not listed (further down than the pages shown,
// or not loaded yet): the list is read again, a moment later, so that the thread comes up.
let relisting = null;
onUnlistedActivity(() => {
  clearTimeout(relisting);
  relisting = setTimeout(loadThreads, RELIST_DELAY_MS);
});

// One of the actor's own threads by id, current or archived, or null when it is neither (not
// the actor's, or no such thread). The API has no read of one thread, so this asks for the page
// of one thread that ends at it (`before` its id + 1), among current threads, then archived
// ones: two bounded reads at most, and none for a thread already listed.
export async function findThread(id) {
  if (state.threads.has(id)) return state.threads.get(id);
  for (const archived of ["", "true"]) {
    const { threads } = await get(query("/api/chat/threads", { before: id + 1, limit: 1, archived }));
    if (threads[0]?.id === id) {
      state.threads.set(id, threads[0]);
      return threads[0];
    }
  }
  return null;
}

// Shows archived threads in the list, or current ones: the list a thread is found in.
export function showArchived(archived) {
  $("show-archived").checked = archived;
}

export async function createThread(event) {
  event.preventDefault();
  const input = $("thread-name");
  say($("thread-notice"), "Creating…");
  try {
    const { thread } = await write("/api/chat/threads", { project: state.projectId, name: input.value });
    input.value = "";
    say($("thread-notice"), "");
    clearSearch();
    await loadThreads();
    choose.thread(thread.id);
  } catch (error) {
    say($("thread-notice"), error.message, "error");
  }
}
