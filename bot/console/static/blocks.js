// Drawing what the bot sent, as Slack draws it: mrkdwn (mentions, dates, links, emoji) and the
// Block Kit of messages, notes, the Home tab and modals. Loaded before console.js, which owns
// the page's state (snapshot, person, place) and `send`, `go` and the places these call.
"use strict";

// Every shortcode the bot writes, drawn as Slack draws it (tests/bot/console/test_console.py checks the list).
const EMOJI = {
  raised_hand: "✋", white_check_mark: "✅", no_entry: "⛔", no_entry_sign: "🚫", hourglass: "⌛",
  hourglass_flowing_sand: "⏳", x: "❌", warning: "⚠️", robot_face: "🤖", alarm_clock: "⏰",
  busts_in_silhouette: "👥", bust_in_silhouette: "👤", bell: "🔔", rotating_light: "🚨",
  arrow_up: "⬆️", key: "🔑", lock: "🔒", pencil2: "✏️", memo: "📝", eyes: "👀",
  information_source: "ℹ️", heavy_check_mark: "✔️", stopwatch: "⏱️", house: "🏠",
  leftwards_arrow_with_hook: "↩️", speech_balloon: "💬", heavy_minus_sign: "➖", mag: "🔍",
};

const BOT = { id: "UBOT0001", name: "Countersign" };
const INLINE = /(<[^>\s][^>]*>)|(`[^`\n]+`)|((?<![\w*])\*[^*\n]+\*(?![\w*]))|((?<![\w_])_[^_\n]+_(?![\w_]))|((?<![\w~])~[^~\n]+~(?![\w~]))|(:[a-z0-9_+-]+:)/g;

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

// Slack's date tokens: a "pretty" one is "Today", "Yesterday" or "Tomorrow" when it can be,
// so a list of today's events does not repeat the date (and its year) on every line.
function slackDate(epoch, format) {
  const when = new Date(epoch * 1000);
  const midnight = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
  const days = Math.round((midnight(when) - midnight(new Date())) / 86400000);
  const near = { "-1": "Yesterday", 0: "Today", 1: "Tomorrow" }[days];
  const short = when.toLocaleDateString([], { month: "short", day: "numeric", year: "numeric" });
  const long = when.toLocaleDateString([], { month: "long", day: "numeric", year: "numeric" });
  const dates = {
    date_num: when.toISOString().slice(0, 10),
    date: long,
    date_short: short,
    date_long: when.toLocaleDateString([], { weekday: "long", month: "long", day: "numeric", year: "numeric" }),
  };
  dates.date_pretty = near || dates.date;
  dates.date_short_pretty = near || dates.date_short;
  dates.date_long_pretty = near || dates.date_long;
  const time = when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  const secs = when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return format
    .replace(/\{(date[a-z_]*)\}/g, (token, name) => dates[name] || short)
    .replace(/\{time_secs\}/g, secs)
    .replace(/\{time[a-z_]*\}/g, time);
}

function special(token) {
  const inner = token.slice(1, -1);
  const [target, label] = inner.split("|");
  if (target.startsWith("@")) return el("span", "mention", "@" + personName(target.slice(1)));
  if (target.startsWith("#")) {
    const channel = target.slice(1);
    const mention = el("a", "mention", "#" + (label || channelName(channel)));
    mention.href = "#";
    mention.onclick = (event) => {
      event.preventDefault();
      go(channel);
    };
    return mention;
  }
  if (target.startsWith("!date^")) {
    const [, epoch, format] = target.split("^");
    return document.createTextNode(slackDate(Number(epoch), format || "{date} {time}"));
  }
  if (target.startsWith("!subteam^")) {
    const group = target.slice("!subteam^".length);
    return el("span", "mention", "@" + (label || (snapshot.config.groups || {})[group] || group));
  }
  if (target.startsWith("!")) return el("span", "mention", "@" + target.slice(1));
  const link = el("a", "", decode(label || target));
  link.href = decode(target);
  const here = consoleLink(link.href);
  if (here) {
    link.onclick = (event) => {
      event.preventDefault();
      go(here.channel === dmOf(person) ? "dm" : here.channel, here.ts);
    };
  } else {
    link.target = "_blank";
    link.rel = "noopener";
  }
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
// `where.place` says what the blocks belong to, as a click names it to the server: a message
// ({message_ts}), a private note ({note_id}) or the Home tab ({home: true}). The server looks
// the element up there; the page never sends a button's value.

function renderBlocks(blocks, where) {
  const box = el("div", "blocks");
  blocks.forEach((block, index) => box.append(renderBlock(block, where, index)));
  return box;
}

function act(where, index, element, option, group) {
  const controls = [...group.querySelectorAll("button, select")];
  controls.forEach((c) => { c.disabled = true; });
  const intent = { kind: "click", ...where.place, block_index: index, action_id: element.action_id };
  if (option !== undefined) intent.option = option;
  return send(intent).finally(() => controls.forEach((c) => { c.disabled = false; }));
}

function renderElement(element, where, index, group) {
  if (element.type === "button") {
    const button = el("button", "btn" + (element.style ? " " + element.style : ""), element.text.text);
    button.type = "button";
    button.onclick = () => act(where, index, element, undefined, group);
    return button;
  }
  if (element.type === "static_select") {
    const label = element.placeholder ? element.placeholder.text : "Choose…";
    const select = el("select", "menu");
    select.setAttribute("aria-label", label);
    const placeholder = new Option(label, "", true, true);
    placeholder.disabled = true;
    select.append(placeholder);
    for (const option of element.options || []) select.append(new Option(option.text.text, option.value));
    select.onchange = () => act(where, index, element, select.value, group);
    return select;
  }
  if (element.type === "overflow") {
    const menu = el("span", "overflow");
    const toggle = el("button", "btn", "⋯");
    toggle.type = "button";
    toggle.setAttribute("aria-label", "More actions");
    toggle.setAttribute("aria-haspopup", "menu");
    const list = el("div", "overflow-menu");
    list.setAttribute("role", "menu");
    list.hidden = true;
    for (const option of element.options || []) {
      const item = el("button", "", option.text.text);
      item.type = "button";
      item.setAttribute("role", "menuitem");
      item.onclick = () => {
        list.hidden = true;
        act(where, index, element, option.value, group);
      };
      list.append(item);
    }
    toggle.onclick = () => { list.hidden = !list.hidden; };
    menu.append(toggle, list);
    return menu;
  }
  return el("span", "context", `(a ${element.type}: not drawn by the console)`);
}

function renderInput(block, where, node) {
  const id = `input-${block.block_id}-${block.element.action_id}`;
  const label = el("label", "", block.label.text);
  label.htmlFor = id;
  const field = el(block.element.multiline ? "textarea" : "input");
  field.id = id;
  field.dataset.block = block.block_id;
  field.dataset.action = block.element.action_id;
  if (block.element.placeholder) field.placeholder = block.element.placeholder.text;
  if (block.element.max_length) field.maxLength = block.element.max_length;
  if (block.element.initial_value) field.value = block.element.initial_value;
  if (block.element.multiline) {
    field.rows = Math.min(16, Math.max(4, field.value.split("\n").length + 1));
    field.spellcheck = false;
  }
  node.append(label, field);
  const error = where.errors && where.errors[block.block_id];
  if (error) {
    // Slack shows a submission's errors under their field, and keeps what was typed.
    const shown = el("div", "error", error);
    shown.id = id + "-error";
    shown.setAttribute("role", "alert");
    field.setAttribute("aria-invalid", "true");
    field.setAttribute("aria-describedby", shown.id);
    node.append(shown);
  }
}

function renderBlock(block, where, index) {
  const node = el("div", "block " + block.type);
  if (block.type === "section") {
    const main = el("div", "section-text");
    if (block.text) main.append(textObject(block.text));
    if (block.fields) {
      const fields = el("div", "fields");
      for (const field of block.fields) fields.append(textObject(field));
      main.append(fields);
    }
    node.append(main);
    if (block.accessory) {
      const accessory = el("div", "accessory");
      accessory.append(renderElement(block.accessory, where, index, accessory));
      node.append(accessory);
    }
  } else if (block.type === "context") {
    for (const element of block.elements) if (element.text !== undefined) node.append(textObject(element));
  } else if (block.type === "actions") {
    for (const element of block.elements) node.append(renderElement(element, where, index, node));
  } else if (block.type === "input") {
    renderInput(block, where, node);
  } else if (block.type === "header") {
    node.append(el("h3", "", block.text.text));
  } else if (block.type === "divider") {
    node.append(el("hr"));
  } else if (block.type === "markdown") {
    node.append(mrkdwn(block.text));
  } else if (block.type === "alert") {
    node.classList.add(block.level || "default");
    node.append(textObject(block.text));
  } else {
    node.append(el("div", "context", `(a ${block.type} block: not drawn by the console)`));
  }
  return node;
}
