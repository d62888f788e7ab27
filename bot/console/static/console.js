// The Countersign console: draws the stand-in Slack's channel from server-sent snapshots, and
// turns what you do into intents that the server signs and plays into /slack/events, exactly
// as Slack would. Cards are drawn from the Block Kit JSON the bot sent. No build step.
"use strict";

// Every shortcode the bot writes, drawn as Slack draws it (tests/test_console.py checks the list).
const EMOJI = {
  raised_hand: "✋", white_check_mark: "✅", no_entry: "⛔", no_entry_sign: "🚫", hourglass: "⌛",
  hourglass_flowing_sand: "⏳", x: "❌", warning: "⚠️", robot_face: "🤖", alarm_clock: "⏰",
  busts_in_silhouette: "👥", bust_in_silhouette: "👤", bell: "🔔", rotating_light: "🚨",
  arrow_up: "⬆️", key: "🔑", lock: "🔒", pencil2: "✏️", memo: "📝", eyes: "👀",
  information_source: "ℹ️", heavy_check_mark: "✔️", stopwatch: "⏱️", house: "🏠",
};
const EXAMPLES = [
  "delete u-100", "restart the api", "refund o-5521 1200", "delete u-101 and restart search",
  "drop the orders table", "help",
];
const BOT = { id: "UBOT0001", name: "Countersign" };
const INLINE = /(<[^>\s][^>]*>)|(`[^`\n]+`)|((?<![\w*])\*[^*\n]+\*(?![\w*]))|((?<![\w_])_[^_\n]+_(?![\w_]))|((?<![\w~])~[^~\n]+~(?![\w~]))|(:[a-z0-9_+-]+:)/g;

let snapshot = null;
let person = localStorage.getItem("countersign.person");
let shownModal = "";

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// --- mrkdwn -----------------------------------------------------------------------------------

function decode(text) {
  return text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

function personName(id) {
  if (id === BOT.id) return "countersign";
  const found = snapshot && snapshot.config.people.find((p) => p.id === id);
  return found ? found.name : id;
}

function slackDate(epoch, format) {
  const when = new Date(epoch * 1000);
  const date = when.toLocaleDateString([], { month: "short", day: "numeric", year: "numeric" });
  const time = when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return format.replace(/\{date[a-z_]*\}/g, date).replace(/\{time[a-z_]*\}/g, time);
}

function special(token) {
  const inner = token.slice(1, -1);
  const [target, label] = inner.split("|");
  if (target.startsWith("@")) return el("span", "mention", "@" + personName(target.slice(1)));
  if (target.startsWith("#")) return el("span", "mention", "#" + (label || snapshot.config.channel.name));
  if (target.startsWith("!date^")) {
    const [, epoch, format] = target.split("^");
    return document.createTextNode(slackDate(Number(epoch), format || "{date} {time}"));
  }
  if (target.startsWith("!")) return el("span", "mention", "@" + target.slice(1));
  const link = el("a", "", decode(label || target));
  link.href = decode(target);
  link.target = "_blank";
  link.rel = "noopener";
  return link;
}

function inline(parent, text) {
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    parent.append(decode(text.slice(last, match.index)));
    const token = match[0];
    if (match[1]) parent.append(special(token));
    else if (match[2]) parent.append(el("code", "", decode(token.slice(1, -1))));
    else if (match[6]) parent.append(EMOJI[token.slice(1, -1)] || token);
    else {
      const tag = match[3] ? "b" : match[4] ? "i" : "s";
      const node = el(tag);
      inline(node, token.slice(1, -1));
      parent.append(node);
    }
    last = match.index + token.length;
  }
  parent.append(decode(text.slice(last)));
}

function mrkdwn(text) {
  const box = el("div", "text");
  text.split("```").forEach((part, index) => {
    if (index % 2 === 1) {
      box.append(el("pre", "", decode(part.replace(/^\n/, "").replace(/\n$/, ""))));
      return;
    }
    let lines = [];
    const flush = () => {
      if (lines.length) {
        const span = el("span");
        inline(span, lines.join("\n"));
        box.append(span);
      }
      lines = [];
    };
    for (const line of (index > 0 ? part.replace(/^\n/, "") : part).split("\n")) {
      if (line.startsWith(">")) {
        flush();
        const quote = el("blockquote");
        inline(quote, line.slice(1));
        box.append(quote);
      } else {
        lines.push(line);
      }
    }
    flush();
  });
  return box;
}

function textObject(object) {
  if (!object) return el("span");
  return object.type === "mrkdwn" ? mrkdwn(object.text) : el("div", "text", object.text);
}

// --- Block Kit ---------------------------------------------------------------------------------

function renderBlocks(blocks, where) {
  const box = el("div", "blocks");
  for (const block of blocks) box.append(renderBlock(block, where));
  return box;
}

function renderBlock(block, where) {
  const node = el("div", "block " + block.type);
  if (block.type === "section") {
    if (block.text) node.append(textObject(block.text));
    if (block.fields) {
      const fields = el("div", "fields");
      for (const field of block.fields) fields.append(textObject(field));
      node.append(fields);
    }
  } else if (block.type === "context") {
    for (const element of block.elements) if (element.text !== undefined) node.append(textObject(element));
  } else if (block.type === "actions") {
    node.className = "block actions";
    for (const element of block.elements) {
      if (element.type !== "button") continue;
      const button = el("button", "btn" + (element.style ? " " + element.style : ""), element.text.text);
      button.type = "button";
      button.onclick = () => {
        node.querySelectorAll("button").forEach((b) => { b.disabled = true; });
        send({ kind: "click", message_ts: where.ts, action_id: element.action_id })
          .finally(() => node.querySelectorAll("button").forEach((b) => { b.disabled = false; }));
      };
      node.append(button);
    }
  } else if (block.type === "input") {
    const id = `input-${block.block_id}-${block.element.action_id}`;
    const label = el("label", "", block.label.text);
    label.htmlFor = id;
    const field = el(block.element.multiline ? "textarea" : "input");
    field.id = id;
    field.dataset.block = block.block_id;
    field.dataset.action = block.element.action_id;
    if (block.element.placeholder) field.placeholder = block.element.placeholder.text;
    if (block.element.max_length) field.maxLength = block.element.max_length;
    node.append(label, field);
    const error = where.errors && where.errors[block.block_id];
    if (error) node.append(el("div", "error", error));
  } else if (block.type === "header") {
    node.append(el("h3", "", block.text.text));
  } else if (block.type === "divider") {
    node.append(el("hr"));
  } else {
    node.append(el("div", "context", `(a ${block.type} block: not drawn by the console)`));
  }
  return node;
}

// --- the channel -------------------------------------------------------------------------------

function clock(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

function renderMessage(message) {
  const node = el("div", "message");
  node.dataset.ts = message.ts;
  const body = el("div", "body");
  const meta = el("div", "meta");
  meta.append(el("b", "", BOT.name), el("span", "app-tag", "APP"), clock(Number(message.ts)));
  if (message.updates) meta.append(" (edited)");
  body.append(meta, message.blocks.length ? renderBlocks(message.blocks, message) : mrkdwn(message.text));
  node.append(el("div", "avatar", "C"), body);
  return node;
}

function renderNote(note) {
  const node = el("div", "message note");
  const body = el("div", "body");
  const meta = el("div", "meta");
  meta.append(el("b", "", BOT.name), el("span", "app-tag", "APP"), clock(note.at));
  meta.append(el("i", "only-you", "Only visible to you"));
  body.append(meta, mrkdwn(note.text));
  node.append(el("div", "avatar", "C"), body);
  return node;
}

function renderChannel() {
  const box = $("messages");
  const nearBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
  const notes = snapshot.notes.filter((n) => n.user === person);
  const timeline = [];
  const known = new Set(snapshot.messages.map((m) => m.ts));
  // A reply whose thread start this channel never saw (e.g. kept from before a restart) still
  // shows, under a stand-in for the missing start.
  const roots = snapshot.messages.filter((m) => !m.thread_ts);
  for (const ts of new Set(snapshot.messages.map((m) => m.thread_ts))) {
    if (ts && !known.has(ts)) roots.push({ ts, missing: true });
  }
  for (const root of roots) {
    const group = el("div", "conversation");
    group.append(root.missing
      ? el("div", "message missing", "The start of this thread is not in the console any more.")
      : renderMessage(root));
    const replies = snapshot.messages.filter((m) => m.thread_ts === root.ts)
      .map((m) => [Number(m.ts), renderMessage(m)])
      .concat(notes.filter((n) => n.thread_ts === root.ts).map((n) => [n.at, renderNote(n)]))
      .sort((a, b) => a[0] - b[0]);
    if (replies.length) {
      const thread = el("div", "thread");
      thread.append(...replies.map((r) => r[1]));
      group.append(thread);
    }
    timeline.push([Number(root.ts), group]);
  }
  const threads = new Set(snapshot.messages.map((m) => m.ts));
  for (const note of notes.filter((n) => !n.thread_ts || !threads.has(n.thread_ts))) {
    timeline.push([note.at, renderNote(note)]);
  }
  timeline.sort((a, b) => a[0] - b[0]);
  box.replaceChildren(...timeline.map((t) => t[1]));
  if (!timeline.length) box.append($("empty") || emptyHint());
  if (nearBottom) box.scrollTop = box.scrollHeight;
}

function emptyHint() {
  const hint = el("p", "empty", "Type a task below, e.g. /agent delete u-100.");
  hint.id = "empty";
  return hint;
}

// --- modals --------------------------------------------------------------------------------------

function renderModal() {
  const backdrop = $("modal");
  const open = snapshot.views.find((v) => v.user === person);
  const key = open ? open.id + JSON.stringify(open.errors) : "";
  if (key === shownModal) return;
  const typed = {};
  backdrop.querySelectorAll("[data-block]").forEach((f) => { typed[f.id] = f.value; });
  shownModal = key;
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
  modal.querySelectorAll("[data-block]").forEach((f) => { if (typed[f.id]) f.value = typed[f.id]; });
  backdrop.hidden = false;
  const first = modal.querySelector("textarea, input");
  if (first) first.focus();
}

// --- the page ------------------------------------------------------------------------------------

function renderHeader() {
  const config = snapshot.config;
  $("channel-name").textContent = config.channel.name;
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
      render();
    };
  }
}

function render() {
  if (!snapshot) return;
  renderHeader();
  renderChannel();
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
    if (!(await send({ kind: "command", command: match[1], text })) && !input.value) {
      input.value = typed;  // never lose what was typed
    }
  };
  input.oninput = () => {
    const match = input.value.trim().match(/^\/[a-z0-9_-]+(?:\s+([\s\S]*))?$/);
    $("composer-error").textContent = tooLong(match ? match[1] || "" : "");
  };
  for (const example of EXAMPLES) {
    const chip = el("button", "", "/agent " + example);
    chip.type = "button";
    chip.onclick = () => { input.value = "/agent " + example; input.focus(); };
    $("examples").append(chip);
  }
  const events = new EventSource("/console/stream");
  events.onmessage = (event) => {
    snapshot = JSON.parse(event.data);
    render();
  };
  events.onerror = () => {
    $("composer-error").textContent = "Lost the connection to the web process; retrying…";
  };
  events.onopen = () => { $("composer-error").textContent = ""; };
}

start();
