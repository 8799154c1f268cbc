// The sidebar: the business's projects, and the actor's own threads in the chosen one.

import { get, query, write } from "./api.js";
import { hasInbox, onThreadChanged, showThreadActions, showUnreadTotal, threadDetails } from "./inbox.js";
import { $, element, listener, say, state } from "./page.js";

const PAGE_SIZE = 50;
const SEARCH_DELAY_MS = 250;

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

function showProjects(projects) {
  const list = $("projects");
  list.replaceChildren();
  for (const project of projects) {
    const choice = element("button", "choice");
    const name = element("span", "", project.name);
    name.dir = "auto";
    choice.append(name);
    // The human's list says, in words, which projects the tester made, as the
    // human's trail tags tester traffic.
    if (project.creator === "tester" && listener === "human") {
      choice.append(" ", element("span", "tester-tag", "tester"));
    }
    choice.type = "button";
    choice.dataset.id = project.id;
    choice.dataset.creator = project.creator;
    choice.addEventListener("click", () => choose.project(project.id));
    const item = element("li");
    item.append(choice);
    list.append(item);
  }
  say($("projects-state"), projects.length ? "" : "No projects yet. Create one below.");
  markCurrent(list, state.projectId);
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

// A thread changed (read, renamed, archived, new activity): its entry is redrawn, or leaves a
// list it no longer belongs to.
onThreadChanged((thread) => {
  const choice = $("threads").querySelector(`button[data-id="${thread.id}"]`);
  if (!choice) return;
  if (Boolean(thread.archived) !== showingArchived()) {
    choice.closest("li").remove();
    return;
  }
  fillChoice(choice, thread);
});

// The list shows the newest first; `older` pages append below.
function showThreads(threads, { older = false } = {}) {
  const list = $("threads");
  if (!older) list.replaceChildren();
  for (const thread of [...threads].reverse()) {
    state.threads.set(thread.id, thread);
    list.append(threadItem(thread));
  }
  $("threads-older").hidden = threads.length < PAGE_SIZE;
  if (threads.some(hasInbox)) $("archived-toggle").hidden = false;
  if (state.threadId !== null && $("rename-form").hidden) showThreadActions(state.threadId);
  showUnreadTotal();
  const empty = list.childElementCount === 0;
  const searching = $("thread-search").value.trim() !== "";
  say($("threads-state"), !empty ? "" : searching ? "No thread matches." : "No threads here yet. Create one below.");
  markCurrent(list, state.threadId);
}

function threadsQuery(extra = {}) {
  return query("/api/chat/threads", {
    project: state.projectId,
    q: $("thread-search").value.trim(),
    archived: showingArchived() ? "true" : "",
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

export async function loadOlderThreads() {
  const shown = [...$("threads").querySelectorAll("button[data-id]")].map((item) => Number(item.dataset.id));
  if (!shown.length) return;
  try {
    const { threads } = await get(threadsQuery({ before: Math.min(...shown) }));
    showThreads(threads, { older: true });
  } catch (error) {
    say($("threads-state"), error.message, "error");
  }
}

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

let searchTimer = null;
export function searchThreads() {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(loadThreads, SEARCH_DELAY_MS);
}

export async function createThread(event) {
  event.preventDefault();
  const input = $("thread-name");
  say($("thread-notice"), "Creating…");
  try {
    const { thread } = await write("/api/chat/threads", { project: state.projectId, name: input.value });
    input.value = "";
    say($("thread-notice"), "");
    $("thread-search").value = "";
    await loadThreads();
    choose.thread(thread.id);
  } catch (error) {
    say($("thread-notice"), error.message, "error");
  }
}
