// The Mosaic bus Console: projects, the actor's own threads, one thread's messages, the
// composer, the stop, and the live trail. One page, ES modules, no framework, no build step.
//
//   page.js        the page's elements, who is using it, small helpers
//   api.js         the HTTP API
//   connection.js  live streams, the offline banner, the session check, signing out
//   lists.js       projects and threads
//   thread.js      one thread: messages, the reply being written, composer, stop
//   runstate.js    how each turn's reply is going
//   markdown.js    replies rendered safely
//   drafts.js      the composer's text, per thread
//   trail.js       the live trail
//   inbox.js       unread marks, previews, rename and archive
//   place.js       the address and history

import { write } from "./api.js";
import { checkConnection, onReconnect } from "./connection.js";
import { rename, startRename, toggleArchive } from "./inbox.js";
import {
  createProject, createThread, loadOlderThreads, loadProjects, loadThreads, markCurrent, onChoose,
  searchThreads,
} from "./lists.js";
import { $, say, state } from "./page.js";
import { recalled, remember } from "./place.js";
import {
  closeThread, composerKey, keepDraft, loadOlderMessages, onThreadEvents, openThread, readNewest,
  send, stop,
} from "./thread.js";
import { loadOlderTrail, startTrail } from "./trail.js";

function chooseProject(id) {
  state.projectId = id;
  markCurrent($("projects"), id);
  $("thread-name").disabled = false;
  $("thread-create").disabled = false;
  return loadThreads();
}

function forgetThread() {
  if (state.threadId === null) return;
  closeThread();
  state.threadId = null;
  markCurrent($("threads"), null);
  $("thread-title").textContent = "No thread open";
}

// Back to the list (the phone's back button): a history entry like any other move.
function leaveThread() {
  forgetThread();
  showView("list");
  remember({ push: true });
}

async function pickProject(id) {
  forgetThread();
  showView("list");
  await chooseProject(id);
  remember({ push: true });
}

// On a phone the list and the thread are separate views (`data-view`).
function showView(view) {
  document.body.dataset.view = view;
}

function pickThread(id) {
  showView("thread");
  if (id === state.threadId) return;
  openThread(id);
  remember({ push: true });
}

onChoose({ project: pickProject, thread: pickThread });
onThreadEvents({
  opened: (id) => markCurrent($("threads"), id),
});

async function signOut() {
  try {
    await write("/api/auth/logout", {});
  } catch (error) {
    say($("alert"), error.message, "error");
    return;
  }
  location.assign("/signin");
}

// Follows the address (Back, Forward, an edited address) to its project and thread.
async function followAddress() {
  const place = recalled();
  if (place.project !== null && place.project !== state.projectId) await chooseProject(place.project);
  if (place.thread === null) {
    forgetThread();
    showView("list");
    return;
  }
  if (place.thread !== state.threadId) openThread(place.thread);
  showView("thread");
}

function wire() {
  $("project-form").addEventListener("submit", createProject);
  $("thread-form").addEventListener("submit", createThread);
  $("thread-search").addEventListener("input", searchThreads);
  $("threads-older").addEventListener("click", loadOlderThreads);
  $("messages-older").addEventListener("click", loadOlderMessages);
  $("trail-older").addEventListener("click", loadOlderTrail);
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  $("composer-body").addEventListener("keydown", composerKey);
  $("composer-body").addEventListener("input", keepDraft);
  $("stop").addEventListener("click", stop);
  $("back").addEventListener("click", leaveThread);
  for (const tab of document.querySelectorAll("[role=tab][data-tab]")) {
    tab.addEventListener("click", () => showTab(tab.dataset.tab));
  }
  $("sign-out")?.addEventListener("click", signOut);
  $("rename").addEventListener("click", startRename);
  $("rename-form").addEventListener("submit", rename);
  $("rename-cancel").addEventListener("click", () => { $("rename-form").hidden = true; });
  $("archive").addEventListener("click", () => toggleArchive(() => {}));
  $("show-archived").addEventListener("change", loadThreads);
  document.addEventListener("visibilitychange", readNewest);
  window.addEventListener("popstate", followAddress);
  window.addEventListener("hashchange", followAddress);
}

// On a phone the trail is behind a tab of its own.
function showTab(tab) {
  document.body.dataset.tab = tab;
  for (const item of document.querySelectorAll("[role=tab][data-tab]")) {
    item.setAttribute("aria-selected", String(item.dataset.tab === tab));
  }
}

let trailStarted = false;

// Loads the projects, the trail, and the place in the address; whatever failed to load is
// loaded again when the connection returns.
async function load() {
  const place = recalled();
  const projects = await loadProjects();
  if (state.signedOut) return;
  if (projects === null) {
    checkConnection();
    return;
  }
  if (!trailStarted) trailStarted = await startTrail();
  if (!trailStarted) checkConnection();
  if (state.projectId !== null) return;
  const project = projects.find((p) => p.id === place.project) ?? projects[projects.length - 1];
  if (!project) return;
  await chooseProject(project.id);
  // The reader may have moved while the lists loaded (opened or created a thread): that wins.
  if (state.threadId !== null || state.projectId !== project.id) return;
  if (place.thread !== null && project.id === place.project && state.threads.has(place.thread)) {
    showView("thread");
    openThread(place.thread);
  }
  remember();
}

function start() {
  wire();
  showView("list");
  showTab("threads");
  onReconnect(() => {
    if (state.projectId === null || !trailStarted) load();
  });
  load();
}

start();
