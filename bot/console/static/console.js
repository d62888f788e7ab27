// The Countersign console: draws the stand-in Slack's workspace (a channel, the app's Home tab,
// each person's direct messages with the app) from server-sent snapshots, and turns what you do
// into intents that the server signs and plays into /slack/events, exactly as Slack would. Cards
// and tabs are drawn from the Block Kit JSON the bot sent (blocks.js). No build step.
"use strict";

const EXAMPLES = [
  "delete u-100", "restart the api", "refund o-5521 1200", "delete u-101 and restart search",
  "drop the orders table", "greet me in spanish",
  "shell: echo hello > notes.txt && cat notes.txt", "help",
];
const FOLLOW_MS = 15000;
let snapshot = null;
let person = localStorage.getItem("countersign.person");
let place = null;  // "home", "dm" (the person's direct messages with the app) or a channel id
let shownModal = "";
let shownPlace = "";  // what the place showed last: unchanged snapshots leave menus alone
let followUntil = 0;  // after a command, the view follows what it brings, wherever it was
const seen = {};  // per person and place, how many messages were seen there (unread badges)

function personName(id) {
  if (id === BOT.id) return "countersign";
  const found = snapshot && snapshot.config.people.find((p) => p.id === id);
  return found ? found.name : id;
}

// --- places --------------------------------------------------------------------------------------
// The sidebar's places: the app's Home tab, the channels, and the acting person's direct
// messages with the app. Slack files a message sent to a user id under that person's DM channel
// (`D` + the id here, as `conversations.open` answers).

function dmOf(id) {
  return "D" + id;
}

function conversationOf(channel) {
  return /^[UW]/.test(channel || "") ? dmOf(channel) : channel;
}

function placeChannel() {
  return place === "dm" ? dmOf(person) : place;
}

function channelName(id) {
  return (snapshot.config.channels || {})[id] || id;
}

function channelIds() {
  const ids = [snapshot.config.channel.id];
  for (const m of snapshot.messages) {
    if (/^[CG]/.test(m.channel) && !ids.includes(m.channel)) ids.push(m.channel);
  }
  return ids;
}

function messagesIn(channel) {
  return snapshot.messages.filter((m) => conversationOf(m.channel) === channel);
}

function notesIn(channel) {
  // A reply to a command comes without a channel: it belongs where commands are typed.
  const commands = snapshot.config.channel.id;
  return snapshot.notes.filter((n) => n.user === person
    && (n.channel ? conversationOf(n.channel) === channel : channel === commands));
}

function sidebarEntry(key, label, count, title) {
  const button = el("button", "place" + (place === key ? " current" : ""));
  button.type = "button";
  button.title = title;
  button.append(el("span", "label", label));
  const unseen = count - (seen[person + key] || 0);
  if (place === key) {
    seen[person + key] = count;
    button.setAttribute("aria-current", "page");
  } else if (unseen > 0) {
    button.append(el("span", "unread", String(unseen)));
  }
  button.onclick = () => go(key);
  return button;
}

function renderSidebar() {
  const home = sidebarEntry("home", "Home", 0, `${BOT.name}'s Home tab: what waits for you, your runs`);
  home.prepend(el("span", "icon", "🏠"));
  $("home-entry").replaceChildren(home);
  $("channel-list").replaceChildren(...channelIds().map((id) => sidebarEntry(
    id, "# " + channelName(id), messagesIn(id).filter((m) => !m.thread_ts).length, "#" + channelName(id),
  )));
  $("dm-list").replaceChildren(sidebarEntry(
    "dm", BOT.name, messagesIn(dmOf(person)).length,
    `${BOT.name}'s Messages tab: write a task to start a run; copies of cards land here too`,
  ));
}

function go(key, ts) {
  place = key;
  shownPlace = "";
  if (key === "home") send({ kind: "home" });  // Slack sends app_home_opened on every visit
  if (key === "dm") send({ kind: "messages" });  // with tab "messages": the suggested prompts
  render();
  $("messages").scrollTop = $("messages").scrollHeight;
  if (ts) {
    const found = document.querySelector(`.message[data-ts="${ts}"]`);
    if (found) {
      found.scrollIntoView({ block: "center" });
      found.classList.add("highlight");
    }
  }
}

// A link to a thread (`https://console.localhost/archives/C…/p…`, as the bot makes them from
// auth.test's URL) opens that thread here.
function consoleLink(href) {
  const match = href.match(/^https:\/\/console\.localhost\/archives\/([A-Z0-9]+)\/p(\d+)(\d{6})$/);
  return match ? { channel: conversationOf(match[1]), ts: `${match[2]}.${match[3]}` } : null;
}

// --- messages ------------------------------------------------------------------------------------

function clock(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

const TASK_MARKS = { pending: "○", in_progress: "◐", complete: "✓", error: "✗" };

function renderTasks(tasks) {
  const list = el("ul", "tasks");
  for (const task of tasks) {
    const item = el("li", "task " + task.status, `${TASK_MARKS[task.status] || "○"} ${task.title}`);
    const said = task.output || task.details;
    if (said) item.append(el("div", "context", said));
    list.append(item);
  }
  return list;
}

function renderMessage(message) {
  const node = el("div", "message");
  node.dataset.ts = message.ts;
  const body = el("div", "body");
  const meta = el("div", "meta");
  if (message.user) meta.append(el("b", "", personName(message.user)), clock(Number(message.ts)));
  else meta.append(el("b", "", BOT.name), el("span", "app-tag", "APP"), clock(Number(message.ts)));
  if (message.updates) meta.append(" (edited)");
  const where = { place: { message_ts: message.ts } };
  if (message.streamed) {
    // A run's streamed message, as Slack draws one: its text, a line per task, then its blocks.
    if (message.text) body.append(meta, mrkdwn(message.text));
    else body.append(meta);
    if (message.tasks && message.tasks.length) body.append(renderTasks(message.tasks));
    if (message.streaming) body.append(el("div", "context", "… streaming"));
    if (message.blocks.length) body.append(renderBlocks(message.blocks, where));
  } else {
    body.append(meta, message.blocks.length ? renderBlocks(message.blocks, where) : mrkdwn(message.text));
  }
  node.append(el("div", "avatar", message.user ? personName(message.user)[0] : "C"), body);
  return node;
}

// Slack's "Reply…" box under a thread: a person's message in it continues the run's conversation.
// Kept across redraws (the snapshot redraws every thread), so what is typed is not lost.
const replyDrafts = new Map();
let replyFocused = null;

function replyBox(threadTs) {
  const form = el("form", "reply");
  const input = el("input");
  input.placeholder = "Reply…";
  input.value = replyDrafts.get(threadTs) || "";
  input.setAttribute("aria-label", "Reply in this thread");
  input.dataset.thread = threadTs;
  input.oninput = () => replyDrafts.set(threadTs, input.value);
  input.onfocus = () => { replyFocused = threadTs; };
  // A redraw removes the box (and may blur it): only a blur of a box still shown is the person's.
  input.onblur = () => { if (input.isConnected && replyFocused === threadTs) replyFocused = null; };
  form.append(input);
  form.onsubmit = async (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    replyDrafts.delete(threadTs);
    if (!(await send({ kind: "reply", thread_ts: threadTs, text }))) replyDrafts.set(threadTs, text);
    follow();
  };
  return form;
}

// Slack's line under a thread whose agent session is processing, with Slack's own Stop.
function sessionBar(threadTs) {
  const bar = el("div", "session context", `${BOT.name} is working… `);
  const stop = el("button", "session-stop", "Stop");
  stop.onclick = () => send({ kind: "stop_session", thread_ts: threadTs });
  bar.append(stop);
  return bar;
}

function renderNote(note) {
  const node = el("div", "message note");
  const body = el("div", "body");
  const meta = el("div", "meta");
  meta.append(el("b", "", BOT.name), el("span", "app-tag", "APP"), clock(note.at));
  meta.append(el("i", "only-you", "Only visible to you"));
  const blocks = note.blocks || [];
  body.append(meta, blocks.length ? renderBlocks(blocks, { place: { note_id: note.id } }) : mrkdwn(note.text));
  node.append(el("div", "avatar", "C"), body);
  return node;
}

function renderConversation(channel) {
  const box = $("messages");
  const nearBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
  const messages = messagesIn(channel);
  const notes = notesIn(channel);
  const timeline = [];
  const known = new Set(messages.map((m) => m.ts));
  // A reply whose thread start this channel never saw (e.g. kept from before a restart) still
  // shows, under a stand-in for the missing start.
  const roots = messages.filter((m) => !m.thread_ts);
  for (const ts of new Set(messages.map((m) => m.thread_ts))) {
    if (ts && !known.has(ts)) roots.push({ ts, missing: true });
  }
  for (const root of roots) {
    const group = el("div", "conversation");
    group.append(root.missing
      ? el("div", "message missing", "The start of this thread is not in the console any more.")
      : renderMessage(root));
    const replies = messages.filter((m) => m.thread_ts === root.ts)
      .map((m) => [Number(m.ts), renderMessage(m)])
      .concat(notes.filter((n) => n.thread_ts === root.ts).map((n) => [n.at, renderNote(n)]))
      .sort((a, b) => a[0] - b[0]);
    const session = !root.missing && (snapshot.sessions || {})[root.ts];
    if (replies.length || session) {
      const thread = el("div", "thread");
      thread.append(...replies.map((r) => r[1]));
      if (session && session.status === "processing") thread.append(sessionBar(root.ts));
      if (!root.missing && (!channel.startsWith("D") || channel === dmOf(person))) {
        thread.append(replyBox(root.ts));
      }
      group.append(thread);
    }
    timeline.push([Number(root.ts), group]);
  }
  for (const note of notes.filter((n) => !n.thread_ts || !known.has(n.thread_ts))) {
    timeline.push([note.at, renderNote(note)]);
  }
  timeline.sort((a, b) => a[0] - b[0]);
  box.replaceChildren(...timeline.map((t) => t[1]));
  if (!timeline.length) box.append(emptyHint(channel));
  const focused = replyFocused && box.querySelector(`input[data-thread="${replyFocused}"]`);
  if (focused) focused.focus();
  if (nearBottom || Date.now() < followUntil) box.scrollTop = box.scrollHeight;
}

// A command's answer and its thread come in over a few seconds: follow them to the bottom, even
// from a view scrolled up or centred on an old message by a Home link.
function follow() {
  followUntil = Date.now() + FOLLOW_MS;
  document.querySelectorAll(".message.highlight").forEach((m) => m.classList.remove("highlight"));
  $("messages").scrollTop = $("messages").scrollHeight;
}

function emptyHint(channel) {
  if (channel === snapshot.config.channel.id) {
    return el("p", "empty", "Type a task below, e.g. /agent delete u-100. Cards, clicks and "
      + "modals go through the same handlers as in Slack.");
  }
  if (channel === dmOf(person)) {
    return el("p", "empty", `Write a task below to start a run, as in Slack's Messages tab: `
      + "its cards wait in #" + channelName(snapshot.config.channel.id) + ", where the approvers "
      + "are. Copies of cards a policy sends you and notes about the Home tab land here too.");
  }
  return el("p", "empty", "Nothing here yet.");
}

// --- the Home tab --------------------------------------------------------------------------------

function renderHome() {
  const box = $("home");
  const view = snapshot.home[person];
  if (!view) {
    box.replaceChildren(el("p", "empty", "Opening your Home tab…"));
    return;
  }
  box.replaceChildren(renderBlocks(view.blocks, { place: { home: true } }));
}

// --- modals --------------------------------------------------------------------------------------

function renderModal() {
  const backdrop = $("modal");
  const open = snapshot.views.find((v) => v.user === person);
  const key = open ? open.id + JSON.stringify(open.errors) : "";
  if (key === shownModal) return;
  // Shown again with errors: what was typed stays, as in Slack.
  const typed = {};
  if (open && backdrop.dataset.view === open.id) {
    backdrop.querySelectorAll("[data-block]").forEach((f) => { typed[f.id] = f.value; });
  }
  shownModal = key;
  backdrop.dataset.view = open ? open.id : "";
  if (!open) {
    backdrop.hidden = true;
    backdrop.replaceChildren();
    return;
  }
  const view = open.view;
  const modal = el("div", "modal");
  modal.setAttribute("role", "dialog");
  modal.setAttribute("aria-label", view.title.text);
  const content = el("div", "content");
  content.append(renderBlocks(view.blocks, { errors: open.errors }));
  const footer = el("footer");
  const close = el("button", "btn", view.close ? view.close.text : "Close");
  close.type = "button";
  close.onclick = () => send({ kind: "close", view_id: open.id });
  footer.append(close);
  if (view.submit) {
    const submit = el("button", "btn primary", view.submit.text);
    submit.type = "button";
    submit.onclick = () => {
      const values = {};
      modal.querySelectorAll("[data-block]").forEach((f) => {
        values[f.dataset.block] = { ...(values[f.dataset.block] || {}), [f.dataset.action]: f.value };
      });
      send({ kind: "submit", view_id: open.id, values });
    };
    footer.append(submit);
  }
  modal.append(el("h2", "", view.title.text), content, footer);
  backdrop.replaceChildren(modal);
  modal.querySelectorAll("[data-block]").forEach((f) => { if (f.id in typed) f.value = typed[f.id]; });
  backdrop.hidden = false;
  const first = modal.querySelector("textarea, input");
  if (first) first.focus();
}

// --- the page ------------------------------------------------------------------------------------

function renderHeader() {
  const config = snapshot.config;
  if (!place) place = config.channel.id;
  $("place-title").textContent = place === "home" ? `🏠 ${BOT.name}: Home`
    : place === "dm" ? `${BOT.name} · direct messages`
    : "# " + channelName(place);
  const model = $("model");
  model.className = "model " + config.model;
  const badge = el("span", "badge", config.model === "scripted" ? "Scripted model" : "OpenAI");
  model.replaceChildren(badge, config.model === "scripted"
    ? "No OPENAI_API_KEY: the example agents' replies are canned, their tools and approvals are real. Set the key and restart to use OpenAI."
    : "Agents run on OpenAI's API.");
  const select = $("person");
  if (!select.options.length) {
    for (const p of config.people) select.append(new Option("@" + p.name, p.id));
    if (!config.people.some((p) => p.id === person)) person = config.people[0].id;
    select.value = person;
    select.onchange = () => {
      person = select.value;
      localStorage.setItem("countersign.person", person);
      if (place === "home") send({ kind: "home" });  // each person has a Home tab of their own
      shownPlace = "";
      render();
    };
  }
}

function renderPlace() {
  const home = place === "home";
  const shown = JSON.stringify(home
    ? [person, snapshot.home[person] || null]
    : [person, place, messagesIn(placeChannel()), notesIn(placeChannel()),
      place === "dm" ? (snapshot.prompts || {})[dmOf(person)] || null : null]);
  if (shown === shownPlace) return;
  shownPlace = shown;
  $("home").hidden = !home;
  $("messages").hidden = home;
  const writing = place === "dm";  // the Messages tab: a message to the app, not a command
  const composing = place === snapshot.config.channel.id || writing;
  $("composer-box").hidden = !composing;
  $("composer-box").parentElement.classList.toggle("quiet", !composing);
  $("command").placeholder = writing ? `Message ${BOT.name}` : "/agent delete u-100";
  $("command").setAttribute("aria-label", writing ? `Message ${BOT.name}` : "Message #demo");
  renderSuggestions(writing);
  if (home) renderHome();
  else renderConversation(placeChannel());
}

// Under the composer: the example commands in the channel; in the Messages tab, the suggested
// prompts the app set when the tab opened, which Slack sends as written when clicked.
function renderSuggestions(writing) {
  const box = $("examples");
  if (!writing) {
    box.replaceChildren(...EXAMPLES.map((example) => {
      const chip = el("button", "", "/agent " + example);
      chip.type = "button";
      chip.onclick = () => { $("command").value = "/agent " + example; $("command").focus(); };
      return chip;
    }));
    return;
  }
  const shown = (snapshot.prompts || {})[dmOf(person)];
  if (!shown) {
    box.replaceChildren();
    return;
  }
  box.replaceChildren(el("span", "prompts-title", shown.title || ""), ...shown.prompts.map((p) => {
    const chip = el("button", "", p.title);
    chip.type = "button";
    chip.onclick = async () => { if (await send({ kind: "write", text: p.message })) follow(); };
    return chip;
  }));
}

// What real Slack would have refused: the stand-in answered with Slack's error, so the bot saw a
// failure. It is a bug in what the bot sends; the web process's log has the whole call.
function renderRefused() {
  const box = $("refused");
  box.hidden = !snapshot.refusals;
  if (!snapshot.refusals) return;
  const count = snapshot.refusals === 1 ? "1 call" : `${snapshot.refusals} calls`;
  box.replaceChildren(el("b", "", `Real Slack would have refused ${count} of the bot (see the log):`));
  for (const r of snapshot.refused) box.append(el("div", "", `${r.method} → ${r.error}: ${r.detail}`));
}

function render() {
  if (!snapshot) return;
  renderRefused();
  renderHeader();
  renderSidebar();
  renderPlace();
  renderModal();
}

async function send(intent) {
  $("composer-error").textContent = "";
  const response = await fetch("/console/intents", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...intent, user: person }),
  }).catch(() => null);
  if (!response || !response.ok) {
    const answer = response ? await response.json().catch(() => ({})) : {};
    $("composer-error").textContent = answer.error
      || (response ? `The console answered ${response.status}.` : "The web process did not answer.");
    return false;
  }
  return true;
}

// Like Slack's composer: a message over the limit is not sent, and what was typed stays.
function tooLong(text) {
  const limit = snapshot ? snapshot.config.command_limit : 4000;
  const over = text.length - limit;
  if (over <= 0) return "";
  return `Your command is ${over.toLocaleString()} character${over === 1 ? "" : "s"} too long `
    + `(Slack takes ${limit.toLocaleString()}). Shorten it to send it.`;
}

function start() {
  const form = $("composer");
  const input = $("command");
  form.onsubmit = async (event) => {
    event.preventDefault();
    const typed = input.value.trim();
    if (place === "dm") {
      if (!typed) return;
      if (typed.startsWith("/")) {
        $("composer-error").textContent = `Write the task itself here, e.g. delete u-100; `
          + "slash commands are typed in #" + channelName(snapshot.config.channel.id) + ".";
        return;
      }
      const problem = tooLong(typed);
      if (problem) {
        $("composer-error").textContent = problem;
        return;
      }
      input.value = "";
      if (!(await send({ kind: "write", text: typed }))) {
        if (!input.value) input.value = typed;
        return;
      }
      follow();
      return;
    }
    const match = typed.match(/^(\/[a-z0-9_-]+)(?:\s+([\s\S]*))?$/);
    if (!match) {
      $("composer-error").textContent = "Type a slash command, e.g. /agent delete u-100.";
      return;
    }
    const text = match[2] || "";
    const problem = tooLong(text);
    if (problem) {
      $("composer-error").textContent = problem;
      return;
    }
    input.value = "";
    if (!(await send({ kind: "command", command: match[1], text }))) {
      if (!input.value) input.value = typed;  // never lose what was typed
      return;
    }
    follow();
  };
  input.oninput = () => {
    const match = input.value.trim().match(/^\/[a-z0-9_-]+(?:\s+([\s\S]*))?$/);
    $("composer-error").textContent = tooLong(match ? match[1] || "" : "");
  };
  const events = new EventSource("/console/stream");
  events.onmessage = (event) => {
    snapshot = JSON.parse(event.data);
    render();
  };
  events.onerror = () => {
    $("composer-error").textContent = "Lost the connection to the web process; retrying…";
  };
  events.onopen = () => {
    $("composer-error").textContent = "";
    if (place === "home") send({ kind: "home" });  // a restarted demo publishes the tab again
    if (place === "dm") send({ kind: "messages" });
  };
}

start();
