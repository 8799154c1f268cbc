// The Mosaic bus Console: projects, the actor's own threads, one thread's messages, the
// composer, the stop, and the live trail. One page, ES modules, no framework, no build step.
//
//   page.js        the page's elements, who is using it, small helpers
//   api.js         the HTTP API
//   connection.js  live streams, the offline banner, the session check, signing out
//   lists.js       projects and threads
//   search.js      search everywhere: the reader's threads and messages in every project
//   thread.js      one thread: messages, the reply being written, composer, stop
//   runstate.js    how each turn's reply is going
//   markdown.js    replies rendered safely
//   highlight.js   code blocks in replies highlighted (vendored highlight.js)
//   drafts.js      the composer's text, per thread
//   trail.js       the live trail
//   inbox.js       unread marks, previews, rename and archive
//   runs.js        test runs: the stored history of conversation-test runs (the tester's only)
//   comparison.js  a test run compared with its baseline or an earlier run, replies side by side
//   repeats.js     a stored case's steps and the judge's votes, under their repeat and turn
//   runtext.js     how the test runs' parts are written (tallies, p-values, texts, costs, links)
//   place.js       the address and history
//   follow.js      the thread follows its newest line; "New messages ↓" when scrolled up
//   stopped.js     a stopped reply's partial text, kept in the thread
//   versions.js    a turn's versions (‹ 2/3 ›), Edit, Regenerate, "Branch from here"
//   branches.js    a branch's source and the conversation it carries
//   threadstate.js the open thread's badge: Archived, Not found, Not yours
//   keys.js        the skip link, the focus after rename and archive, the shortcuts list
//   details.js     a reply's details (model, tokens, timing) and the thread's token total

import { write } from "./api.js";
import { wireComparison } from "./comparison.js";
import { checkConnection, onReconnect, onSignedOut } from "./connection.js";
import { exportThread } from "./export.js";
import { rename, startRename, toggleArchive, togglePin } from "./inbox.js";
import { focusThread, wireKeys } from "./keys.js";
import {
  createProject, createThread, defaultProject, findThread, loadOlderThreads, loadProjects, loadThreads,
  markCurrent, markProject, onChoose, showArchived, showingArchived,
} from "./lists.js";
import { $, hasTestRuns, say, state } from "./page.js";
import { recalled, remember } from "./place.js";
import { focusRuns, hideRuns, loadMoreCases, loadOlderRuns, showRuns } from "./runs.js";
import { clearSearch, onSearch, showFound, wireSearch } from "./search.js";
import { startThread } from "./start.js";
import { showThreadBadge } from "./threadstate.js";
import {
  closeThread, composerKey, keepDraft, loadOlderMessages, onThreadEvents, openThread, readNewest,
  send, showBlank, stop,
} from "./thread.js";
import { loadOlderTrail, startTrail } from "./trail.js";
import { onVersionEvents } from "./versions.js";

// Bumped by every move, the reader's or the address's: a move that waits on the server gives
// way to any made meanwhile.
let moves = 0;

function chooseProject(id) {
  state.projectId = id;
  markProject(id);
  $("thread-name").disabled = false;
  $("thread-create").disabled = false;
  return loadThreads();
}

function forgetThread() {
  if (state.threadId === null) return;
  closeThread();
  state.threadId = null;
  markCurrent($("threads"), null);
  showBlank();
}

// "New chat", from anywhere: the empty composer, whose first send starts a thread in the
// project in view.
function newChat() {
  moves += 1;
  forgetThread();
  showBlank();
  showView("thread");
  remember({ push: true });
  $("composer-body").focus();
}

// A thread just made (a new chat's, a branch's): listed in its project and opened.
async function showNewThread(thread) {
  moves += 1;
  if (thread.project !== state.projectId) {
    await loadProjects();
    await chooseProject(thread.project);
  } else {
    clearSearch();
    await loadThreads();
  }
  if (!state.threads.has(thread.id)) state.threads.set(thread.id, thread);
  showView("thread");
  await openThread(thread.id);
  remember({ push: true });
}

// The first send with no thread open: its thread is made, listed and opened, then the send
// goes there (thread.js).
async function startChat(body) {
  const thread = await startThread(body);
  await showNewThread(thread);
  return thread.id;
}

// The open thread as a file; what happened is said beside the Export button.
async function downloadThread(format) {
  $("thread-export").open = false;
  say($("actions-notice"), "Exporting…");
  try {
    const done = await exportThread(format);
    if (done) say($("actions-notice"), `Exported ${done.count} messages to ${done.name}.`);
  } catch (error) {
    say($("actions-notice"), error.message, "error");
  }
}

// Back to the list (the phone's back buttons): a history entry like any other move.
function backToList() {
  moves += 1;
  forgetThread();
  showView("list");
  remember({ push: true });
}

async function pickProject(id) {
  moves += 1;
  forgetThread();
  showView("list");
  await chooseProject(id);
  remember({ push: true });
}

// What the main pane shows: no thread ("list"), a thread, or the test runs. On a phone the list
// and the other two are separate screens (`data-view`).
function showView(view) {
  if (state.view === "runs" && view !== "runs") {
    hideRuns();
    state.testRunId = null;
  }
  state.view = view;
  document.body.dataset.view = view;
}

function pickThread(id) {
  moves += 1;
  const moved = id !== state.threadId || state.view !== "thread";
  showView("thread");
  if (id !== state.threadId) openThread(id);
  if (moved) remember({ push: true });
}

// The test runs in the main pane, the list (`runId` null) or one run; the thread closes.
function openRuns(runId) {
  forgetThread();
  showView("runs");
  state.testRunId = runId;
  showRuns(runId);
  focusRuns(runId);
}

// Opens thread `id` in its own project and in the list that holds it, current or archived: an
// address or a link may name a thread alone (the trail's, a test run's, a search hit), in a
// project not chosen, or archived (the runner archives the threads of passed repeats).
// `around`: a message of it to show in place, loaded with its neighbours however old (a search
// hit). `push`: the reader moved, a new history entry.
async function openThreadAt(id, mine, { around = null, push = false } = {}) {
  let thread = null;
  try {
    thread = await findThread(id);
  } catch {
    // Not looked up (offline): opened where the list is, the pane says why it cannot load.
  }
  if (mine !== moves) return;
  if (thread && (thread.project !== state.projectId || Boolean(thread.archived) !== showingArchived())) {
    showArchived(Boolean(thread.archived));
    await chooseProject(thread.project);
    if (mine !== moves) return;
  }
  const shown = around !== null && id === state.threadId && showFound(around);
  const opening = id !== state.threadId || (around !== null && !shown) ? openThread(id, { around }) : null;
  showView("thread");
  remember({ push });
  if (opening === null || around === null) return;
  await opening;
  if (mine === moves) showFound(around);
}

// A search hit chosen: its thread, or its thread at the message found.
function openHit(threadId, messageId = null) {
  return openThreadAt(threadId, ++moves, { around: messageId, push: true });
}

onChoose({ project: pickProject, thread: pickThread });
onSearch({
  thread: (id) => openHit(id),
  message: openHit,
  // The project's own list steps aside while the hits are shown.
  searching: (on) => $("threads").closest("section").classList.toggle("searching", on),
});
onThreadEvents({
  opened: (id) => markCurrent($("threads"), id),
  start: startChat,
});
// An edit, a regenerate or a branch that made a thread: it opens there (R24).
onVersionEvents({ branched: showNewThread });

async function signOut() {
  try {
    await write("/api/auth/logout", {});
  } catch (error) {
    say($("alert"), error.message, "error");
    return;
  }
  location.assign("/signin");
}

// Follows the address (Back, Forward, an edited address, a link) to its project and thread, or
// to the test runs. `popstate` and `hashchange` may both call it for one move: it is idempotent.
async function followAddress() {
  const place = recalled();
  const mine = ++moves;
  if (hasTestRuns && place.runs) {
    if (state.view !== "runs" || state.testRunId !== place.run) openRuns(place.run);
    remember();
    return;
  }
  if (place.project !== null && place.project !== state.projectId) await chooseProject(place.project);
  if (mine !== moves) return;
  if (place.thread === null) {
    forgetThread();
    showView("list");
    return;
  }
  await openThreadAt(place.thread, mine);
}

function wire() {
  $("project-form").addEventListener("submit", createProject);
  $("thread-form").addEventListener("submit", createThread);
  wireSearch();
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
  $("back").addEventListener("click", backToList);
  $("new-chat").addEventListener("click", newChat);
  $("export-markdown").addEventListener("click", () => downloadThread("markdown"));
  $("export-json").addEventListener("click", () => downloadThread("json"));
  $("export-suite").addEventListener("click", () => downloadThread("suite"));
  onSignedOut(() => { $("new-chat").hidden = true; });
  for (const tab of document.querySelectorAll("[role=tab][data-tab]")) {
    tab.addEventListener("click", () => showTab(tab.dataset.tab));
  }
  $("sign-out")?.addEventListener("click", signOut);
  $("rename").addEventListener("click", startRename);
  // The focus goes back to the thread once a rename or an archive is done (the form or the
  // button it was on goes away or changes).
  $("rename-form").addEventListener("submit", async (event) => {
    if (await rename(event)) focusThread();
  });
  $("rename-cancel").addEventListener("click", () => { $("rename-form").hidden = true; });
  $("archive").addEventListener("click", () => toggleArchive((thread) => {
    showThreadBadge(thread);
    focusThread();
  }));
  $("pin").addEventListener("click", togglePin);
  // Esc closes the rename form, as Cancel does, and gives the focus back to Rename.
  $("rename-form").addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.isComposing) return;
    event.preventDefault();
    $("rename-form").hidden = true;
    $("rename").focus();
  });
  $("show-archived").addEventListener("change", loadThreads);
  wireKeys();
  if (hasTestRuns) {
    $("runs-older").addEventListener("click", loadOlderRuns);
    $("test-run-more").addEventListener("click", loadMoreCases);
    wireComparison();
    $("runs-back").addEventListener("click", backToList);
    // The link to the place already shown changes no address: it shows the runs afresh.
    $("runs-link").addEventListener("click", () => {
      if (location.hash === "#runs") openRuns(null);
    });
  }
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
  const mine = moves;
  const projects = await loadProjects();
  if (state.signedOut) return;
  if (projects === null) {
    checkConnection();
    return;
  }
  if (!trailStarted) trailStarted = await startTrail();
  if (!trailStarted) checkConnection();
  if (state.projectId !== null) return;
  // The address's project, else the reader's own newest: never the tester's on the human's
  // Console (a suite run makes projects of its own). None of the reader's: no project is chosen,
  // and a new chat goes to the reader's default project.
  const project = projects.find((p) => p.id === place.project) ?? defaultProject(projects);
  if (!project) {
    say($("threads-state"), "Choose a project, or start a new chat.");
    return;
  }
  await chooseProject(project.id);
  // The reader may have moved while the lists loaded (opened or created a thread, opened the
  // test runs): that wins.
  if (mine !== moves || state.threadId !== null || state.projectId !== project.id) return;
  if (state.view === "runs") return;
  if (place.thread !== null) await openThreadAt(place.thread, ++moves);
  else remember();
}

// On load the focus goes to the composer wherever it is shown (a wide screen; a phone shows the
// list first), so text typed at once lands there and, with no thread open, starts a chat. A
// reader who already moved the focus keeps it.
function focusComposer() {
  const composer = $("composer-body");
  if (composer.disabled || !composer.checkVisibility()) return;
  if (document.activeElement && document.activeElement !== document.body) return;
  composer.focus();
}

function start() {
  // Signed in, but not the business's human (staff): the page says whose Console it is.
  if (document.body.dataset.visitor === "other") return;
  wire();
  showBlank();
  showView("list");
  showTab("threads");
  focusComposer();
  onReconnect(() => {
    if (state.projectId === null || !trailStarted) load();
  });
  // The test runs need no project: they show while the lists load.
  if (hasTestRuns && recalled().runs) followAddress();
  load();
}

start();
